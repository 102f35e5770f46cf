"""The due index's row locks (PostgreSQL): a pick locks only the entries it returns.

A pick (`_PICK`, `FOR UPDATE SKIP LOCKED`) reads the index in its statement's snapshot. When
another process claimed an entry after that snapshot, PostgreSQL follows the entry's update
to its new version, locks it, and only then finds it no longer due: the entry is not returned
but stays locked until the pick's whole claim transaction commits. The claimer's release of
that run (its occurrence done, its entry deleted) then waited for a claim of another process.
Moving an entry is therefore a delete and an insert (s0010): the pick finds its version deleted
and skips it without a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from sqlalchemy import text

from almanac.db import Database
from almanac.platform.store.due_index.claim import _PICK, pick_parameters
from almanac.platform.store.sql_store import SqlStore
from almanac.sandbox.contract import RunResult
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_due_index import _index, _jobs, _script

pytestmark = pytest.mark.postgres


def _pick_cursor(conn: object, now: datetime) -> None:
    """Open the pick as a cursor: its snapshot is taken now, its rows are locked when fetched."""
    conn.execute(text("DECLARE pick CURSOR FOR " + _PICK.text),  # type: ignore[attr-defined]
                 pick_parameters(now, 100, 0.5, 7))


def test_a_pick_that_predates_a_claim_does_not_hold_the_claimed_entries_and_the_release_does_not_wait(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    slug = make_tenant("lock-a")
    _jobs(database, slug, _script(database, slug, now), now, 3)
    store = SqlStore(database, EveryRules())
    with database.engine.connect() as other:
        other.begin()
        _pick_cursor(other, now)  # another process's pick, its snapshot before the claim
        claims = store.due_index.claim_across(now, 100).claims
        assert len(claims) == 3
        assert other.execute(text("FETCH ALL FROM pick")).all() == []  # claimed since: not returned
        done = RunResult("succeeded", output=1, duration_ms=1)
        released = threading.Event()

        def release() -> None:
            store.due_index.finish_across([(c, done, now, now + timedelta(seconds=1)) for c in claims])
            released.set()

        worker = threading.Thread(target=release)
        worker.start()
        try:
            # Before: the release waited on the entries the pick had locked, until its transaction ended.
            assert released.wait(10), "the release waited for another process's pick"
        finally:
            other.rollback()
            worker.join(30)
    assert _index(database) == {}


def test_a_pick_still_skips_what_a_claim_in_flight_holds_and_returns_what_is_due(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    """The delete-and-insert move changes nothing for a pick that meets a claim still in flight."""
    slug = make_tenant("lock-b")
    _jobs(database, slug, _script(database, slug, now), now, 4)
    with database.engine.connect() as holder, holder.begin():
        held = holder.execute(text("SELECT occurrence_id FROM due_index ORDER BY occurrence_id LIMIT 2 "
                                   "FOR UPDATE")).scalars().all()
        with database.engine.connect() as other, other.begin():
            _pick_cursor(other, now)
            picked = [oid for _, oid in other.execute(text("FETCH ALL FROM pick")).all()]
    assert len(picked) == 2 and set(picked) == {oid for _, oid in _index(database)} - set(held)


def test_the_migration_goes_down_to_the_upserting_trigger_and_back(database: Database) -> None:
    from alembic import command

    from almanac.tenants.migrations import _config

    def body() -> str:
        with database.engine.connect() as conn:
            return conn.execute(text("SELECT prosrc FROM pg_proc WHERE proname = 'almanac_due_index'")).scalar_one()

    assert "DELETE FROM" in body().split("IF TG_OP = 'DELETE'")[0]  # deletes first, whatever the operation
    with database.engine.connect() as conn:
        command.downgrade(_config("shared", conn), "s0009_due_index_in_bulk")
        conn.commit()
    assert body().split("IF TG_OP = 'DELETE'")[0].strip().endswith("BEGIN")  # s0007's upsert again
    with database.engine.connect() as conn:
        command.upgrade(_config("shared", conn), "head")
        conn.commit()
    assert "DELETE FROM" in body().split("IF TG_OP = 'DELETE'")[0]
