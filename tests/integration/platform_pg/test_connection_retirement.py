"""A pooled connection that has met more tenants than `pg_tenants_per_connection` is replaced.

A PostgreSQL backend keeps a catalog cache entry for every table and index it has opened and
never frees them: ~150 kB a tenant for the scheduler's tables, 143 MB for one backend that met
1,000 tenants (`bench/pg_catalog.py`). With the pool handing connections out in turn, every
backend ended up holding every busy tenant's entries. Each connection now counts the tenants
whose schemas it names (per-tenant sessions and the statements across tenants alike), and past
the setting it is closed when next handed out. On the code before, the backend never changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import event, func, select, text

from almanac.db import Database, tenants_met
from almanac.platform.store.models import Occurrence
from almanac.platform.store.sql_store import SqlStore
from almanac.settings import Settings
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_record_across import DONE, T1, _items, _tenant

pytestmark = pytest.mark.postgres


@pytest.fixture
def small(settings: Settings) -> Iterator[Database]:
    """A database handle whose connections retire past 2 tenants, one pooled connection (and one overflow)."""
    db = Database(settings.model_copy(update={"pg_tenants_per_connection": 2, "pool_size": 1}))
    yield db
    db.dispose()


def _pid(conn: Any) -> int:
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _alive(database: Database, pid: int) -> bool:
    with database.engine.connect() as conn:
        return bool(conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"), {"p": pid}).scalar())


def test_a_connection_past_the_setting_is_replaced(
        database: Database, small: Database, make_tenant: Callable[..., str], caplog: pytest.LogCaptureFixture) -> None:
    slugs = [make_tenant(f"rt{i}") for i in range(4)]
    pids, counts = [], []
    with caplog.at_level(logging.INFO, logger="almanac.db"):
        for slug in slugs:
            with small.tenant_connection(slug) as conn:
                conn.execute(select(func.count()).select_from(Occurrence))  # the tenant's table, really opened
                pids.append(_pid(conn))
                counts.append(tenants_met(conn.info))
    assert counts == [1, 2, 3, 1]
    assert pids[0] == pids[1] == pids[2] != pids[3]  # the third tenant took it past 2: replaced at the next checkout
    assert not _alive(database, pids[0])  # and closed, with its catalog cache
    said = [(r.getMessage(), getattr(r, "tenants_met", None)) for r in caplog.records if r.name == "almanac.db"]
    assert said == [("db.connection_retired", 3)]  # once, for the operator's log


def test_a_connection_within_the_setting_is_kept(small: Database, make_tenant: Callable[..., str]) -> None:
    slug, other = make_tenant("keep1"), make_tenant("keep2")
    pids = []
    for s in (slug, other, slug, other, slug):
        with small.tenant_connection(s) as conn:
            pids.append(_pid(conn))
    assert len(set(pids)) == 1  # two tenants met, again and again: the same backend throughout


def test_the_scheduler_passes_count_the_tenants_they_name(
        small: Database, make_tenant: Callable[..., str]) -> None:
    """A claim and its record across 3 tenants name their schemas in SQL text, not through a tenant session."""
    slugs = [make_tenant(f"pass{i}") for i in range(3)]
    for slug in slugs:
        _tenant(small, slug)
    seen: list[tuple[int, int]] = []  # (backend pid, tenants met) at every checkin

    def at_checkin(dbapi_conn: Any, record: Any) -> None:
        if dbapi_conn is not None:
            seen.append((dbapi_conn.info.backend_pid, tenants_met(record.info)))

    small.engine.dispose()  # the set-up's connection is gone: only the passes' connections count
    event.listen(small.engine, "checkin", at_checkin)
    store = SqlStore(small, EveryRules(), lease_margin_s=600)
    claims = store.due_index.claim_across(T1, 100).claims
    assert len(claims) == 9
    assert store.due_index.finish_across(_items(claims, lambda c: DONE)) == [True] * 9
    event.remove(small.engine, "checkin", at_checkin)
    retired = {pid for pid, met in seen if met > 2}
    assert retired and max(met for _, met in seen) == 3  # the passes counted all three tenants
    with small.engine.connect() as a, small.engine.connect() as b:  # every pooled connection, and the overflow
        assert {_pid(a), _pid(b)}.isdisjoint(retired)
        assert tenants_met(a.info) == tenants_met(b.info) == 0
