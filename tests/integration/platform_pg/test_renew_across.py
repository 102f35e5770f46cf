"""Leases of many tenants renewed by one statement (`due_index.record.renew_leases`), on PostgreSQL.

A process whose claims wait for a slot renews their leases every round. Renewed row by row
(an UPDATE per claim, and the due index's row trigger moving each entry), that was a statement
per claim held, and on a loaded machine many claims wait that long. The first test fails on
that code; the others hold the one statement to what the per-tenant renewal writes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, update

from almanac.db import Database
from almanac.platform.store.due_index import tenant_parts as across
from almanac.platform.store.models import Occurrence
from almanac.platform.store.sql_store import SqlStore
from almanac.sandbox.contract import RunResult
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.tenant_rows import snapshot
from tests.integration.platform_pg.test_record_across import T1, _claimed

pytestmark = pytest.mark.postgres

LATER = T1 + timedelta(seconds=20)


def _server_statements(database: Database) -> list[str]:
    """The statements PostgreSQL is sent from now on (an executemany counts once a row), but for the
    switch of the due-index triggers around them."""
    seen: list[str] = []

    def note(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: bool) -> None:
        if not sql.startswith("SELECT set_config("):
            seen.extend([sql] * (len(params) if many else 1))
    event.listen(database.engine, "before_cursor_execute", note)
    return seen


def test_leases_of_many_tenants_are_renewed_by_one_statement(
        database: Database, make_tenant: Callable[..., str]) -> None:
    slugs = [make_tenant(f"rn-{i}") for i in range(3)]
    store, claims = _claimed(database, slugs)
    seen = _server_statements(database)
    assert store.due_index.renew_across(claims, LATER) == set()
    assert len(seen) == 1, seen  # 9 claims over 3 tenants
    for slug in slugs:  # the leases and the due index's entries end 600 s (the margin) + 1 s after LATER
        rows = snapshot(database, slug)
        running = [o for o in rows["occurrences"] if o[8] == "running"]
        assert len(running) == 3
        lease = LATER + timedelta(seconds=601)
        assert {(o[0], o[5]) for o in running} == {(o[0], lease) for o in running}
        assert {(oid, due) for oid, due, _ in rows["due_index"] if due == lease} == {(o[0], lease) for o in running}


def test_tenants_past_one_statement_are_renewed_by_the_next(
        database: Database, make_tenant: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(across, "TENANTS_PER_STATEMENT", 2)
    slugs = [make_tenant(f"rc-{i}") for i in range(3)]
    store, claims = _claimed(database, slugs)
    seen = _server_statements(database)
    assert store.due_index.renew_across(claims, LATER) == set()
    assert len(seen) == 2
    lease = LATER + timedelta(seconds=601)
    for slug in slugs:
        assert sorted(o[5] for o in snapshot(database, slug)["occurrences"] if o[8] == "running") == [lease] * 3


def test_a_claim_recorded_or_taken_over_meanwhile_is_named_and_the_others_renewed(
        database: Database, make_tenant: Callable[..., str]) -> None:
    slugs = [make_tenant(f"rl-{i}") for i in range(2)]
    store, claims = _claimed(database, slugs)
    done = RunResult("succeeded", output=1, duration_ms=1)
    recorded, taken = claims[0], claims[-1]
    assert store.finish(recorded, done, T1, T1 + timedelta(seconds=1))
    with database.tenant_session(taken.tenant) as s:  # its lease lapsed, and another process recovered it
        s.execute(update(Occurrence).where(Occurrence.id == taken.occurrence_id).values(lease_until=T1, due_at=T1))
    other = SqlStore(database, EveryRules(), lease_margin_s=600)
    assert dict(other.due_index.claim_across(T1 + timedelta(seconds=1), 100).recorded) == {"lease_lapsed": 1}
    lost = store.due_index.renew_across(claims, LATER)
    assert lost == {(recorded.tenant, recorded.run_id), (taken.tenant, taken.run_id)}
    assert store.finish(claims[1], done, T1, LATER)  # a renewed one is still held
    for slug in slugs:
        assert all(o[8] != "running" or o[5] > LATER for o in snapshot(database, slug)["occurrences"])


def test_the_one_statement_writes_what_the_per_tenant_renewal_writes(
        database: Database, make_tenant: Callable[..., str]) -> None:
    across, apart = make_tenant("rw-across"), make_tenant("rw-apart")
    store, claims = _claimed(database, [across, apart])
    done = RunResult("succeeded", output=1, duration_ms=1)
    for slug in (across, apart):  # one claim of each recorded meanwhile
        assert store.finish(next(c for c in claims if c.tenant == slug), done, T1, T1)
    lost_across = store.due_index.renew_across([c for c in claims if c.tenant == across], LATER)
    lost_apart = store.renew_leases(apart, [c for c in claims if c.tenant == apart], LATER)
    assert {run for _, run in lost_across} == lost_apart and len(lost_apart) == 1
    a, b = snapshot(database, across), snapshot(database, apart)
    assert a == b
