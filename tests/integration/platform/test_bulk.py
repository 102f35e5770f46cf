"""`Bulk` runs a Core statement as a driver executemany: the same rows written as SQLAlchemy's
own `execute` writes them, in the tenant's schema, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest
from sqlalchemy import bindparam, select, text, update

from tests.integration.platform.scheduler_world import World

from almanac.platform.store.executemany import Bulk
from almanac.platform.store.models import JOB_DONE, JOB_PENDING, Job

J = Job.__table__
_DONE = update(J).where(J.c.key == bindparam("b_key"), J.c.state == JOB_PENDING).values(
    state=JOB_DONE, run_at=bindparam("b_at"), updated_at=bindparam("b_at"), depth=bindparam("b_depth"))


def test_rows_are_written_as_sqlalchemy_writes_them(world: World) -> None:
    script = world.add_script()
    for key in ("a", "b", "c", "d"):
        world.put_job(key, script, world.clock.now())
    at = world.clock.now().astimezone(timezone(timedelta(hours=-5))) + timedelta(microseconds=7)
    later = at + timedelta(seconds=1)
    with world.db.tenant_connection(world.tenant) as conn, conn.begin():
        changed = Bulk(_DONE).executemany(conn, [
            {"b_key": "a", "b_at": at, "b_depth": 3}, {"b_key": "nobody", "b_at": at, "b_depth": 5},
            {"b_key": "b", "b_at": later, "b_depth": 4},  # a value converted once per run of equal ones
        ])
        assert changed == 2  # the rowcount of every row together
        conn.execute(_DONE, [{"b_key": "c", "b_at": at, "b_depth": 3}])  # SQLAlchemy's way, to compare
        jobs = conn.dialect.identifier_preparer.quote_schema(_schema(conn)) + ".jobs"
        rows = conn.execute(text(f"SELECT key, state, run_at, updated_at, depth FROM {jobs}"))
        raw = {r.key: tuple(r[1:]) for r in rows}
        typed = {r.key: r for r in conn.execute(select(J.c.key, J.c.run_at, J.c.state))}
    assert raw["a"][:3] == raw["c"][:3] and raw["a"][3] == 3 and raw["b"][3] == 4
    assert raw["d"][0] == JOB_PENDING
    assert typed["a"].run_at == at and typed["a"].run_at.tzinfo is timezone.utc
    assert typed["b"].run_at == later


def test_a_row_without_a_value_is_refused(world: World) -> None:
    with world.db.tenant_connection(world.tenant) as conn, conn.begin():
        with pytest.raises(KeyError, match="b_depth"):
            Bulk(_DONE).executemany(conn, [{"b_key": "a", "b_at": world.clock.now()}])


def _schema(conn: object) -> str:
    return conn.get_execution_options()["schema_translate_map"]["tenant"]  # type: ignore[attr-defined]
