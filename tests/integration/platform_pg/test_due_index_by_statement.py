"""The claim and record statements across tenants move the shared due index themselves (migration t0019).

While they run, the tenants' due-index triggers are off (`tenant_parts.due_index_by_statement`);
here the trigger functions are replaced by ones that raise, so the first test fails on the
code before t0019, whose statements left the index to the triggers. The index must still
mirror every tenant's occurrences (due time and priority) after each step, and every other
write, in the same transaction or not, must keep the triggers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, text

from almanac.db import Database, schema_for
from almanac.platform.store.due_index import tenant_parts as across
from almanac.platform.store.coordination_models import DueEntry
from almanac.platform.store.models import Occurrence
from almanac.platform.store.sql_store import SqlStore
from almanac.sandbox.contract import RunResult
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_record_across import DONE, T1, _items, _results, _tenant

pytestmark = pytest.mark.postgres

_FUNCTIONS = ("almanac_due_index_v2", "almanac_due_index_inserted_v2")  # what the triggers call (sql/shared/)
_RAISING = ("CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'the due-index trigger fired'; END $$")


@contextmanager
def _triggers_raise(database: Database) -> Iterator[None]:
    """Within: a due-index trigger that fires fails its statement (the functions are put back after)."""
    with database.engine.begin() as conn:
        saved = [conn.execute(text("SELECT pg_get_functiondef(to_regproc(:f))"), {"f": f}).scalar_one()
                 for f in _FUNCTIONS]
        for name in _FUNCTIONS:
            conn.exec_driver_sql(_RAISING.format(name=name))
    try:
        yield
    finally:
        with database.engine.begin() as conn:
            for definition in saved:
                conn.exec_driver_sql(definition)


def _index(database: Database) -> dict[tuple[str, int], tuple[datetime, int]]:
    with database.shared_session() as s:
        return {(r.tenant_slug, r.occurrence_id): (r.due_at, r.priority) for r in s.execute(select(DueEntry.__table__))}


def _mirror(database: Database, slugs: list[str]) -> dict[tuple[str, int], tuple[datetime, int]]:
    want = {}
    for slug in slugs:
        with database.tenant_session(slug) as s:
            rows = s.execute(select(Occurrence.id, Occurrence.due_at, Occurrence.priority)
                             .where(Occurrence.due_at.is_not(None)))
            want.update({(slug, oid): (due, priority) for oid, due, priority in rows})
    return want


@pytest.fixture
def slugs(database: Database, make_tenant: Callable[..., str]) -> list[str]:
    """Three tenants, each with a schedule every minute that queues behind itself and two jobs at T1."""
    names = [make_tenant(f"bs-{i}") for i in range(3)]
    for slug in names:
        _tenant(database, slug)
    return names


def test_claims_and_records_move_the_index_themselves_with_the_triggers_off(
        database: Database, slugs: list[str]) -> None:
    store = SqlStore(database, EveryRules(), lease_margin_s=600)
    assert _index(database) == _mirror(database, slugs)
    with _triggers_raise(database):
        batch = store.due_index.claim_across(T1, 100)  # runs claimed (moved to their lease end), next occurrences planned
    assert not batch.failed and len(batch.claims) == 9
    index = _index(database)
    assert index == _mirror(database, slugs)
    assert all(index[(c.tenant, c.occurrence_id)][0] == c.lease_until for c in batch.claims)
    assert store.due_index.claim_across(T1 + timedelta(seconds=60), 100).claims == []  # queued behind: the triggers' write
    assert _index(database) == _mirror(database, slugs)
    with _triggers_raise(database):  # released, and the queued occurrences due again
        assert store.due_index.finish_across(_items(batch.claims, lambda c: DONE)) == [True] * 9
    index = _index(database)
    assert index == _mirror(database, slugs)
    assert not any((c.tenant, c.occurrence_id) in index for c in batch.claims)
    assert [due for due, _ in index.values()].count(T1 + timedelta(seconds=61)) == 3  # the queued ones, due now


def test_the_writes_after_the_statement_in_its_transaction_keep_the_triggers(
        database: Database, slugs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(across, "TENANTS_PER_STATEMENT", 2)  # two statements, each switching the triggers off and on
    store = SqlStore(database, EveryRules(), lease_margin_s=600)
    claims = store.due_index.claim_across(T1, 100).claims
    # A retried failure and a success with effects are recorded after the plain ones, in the same transaction.
    assert store.due_index.finish_across(_items(claims, _results)) == [True] * 9
    assert _index(database) == _mirror(database, slugs)
    with database.tenant_session(slugs[1]) as s:
        retried = s.execute(select(Occurrence).where(Occurrence.status == "planned",
                                                     Occurrence.job_id.is_not(None))).scalar_one()
    assert _index(database)[(slugs[1], retried.id)][0] == T1 + timedelta(seconds=71)
    with database.engine.begin() as conn:
        assert conn.execute(text("SELECT current_setting(:n, true)"), {"n": across.BY_STATEMENT}).scalar() in (None, "")


def test_a_record_that_rolls_back_leaves_the_index_as_it_was(
        database: Database, slugs: list[str]) -> None:
    store = SqlStore(database, EveryRules(), lease_margin_s=600)
    claims = store.due_index.claim_across(T1, 100).claims
    before = _index(database)
    lost = next(c for c in claims if c.tenant == slugs[2])
    with database.tenant_session(slugs[2]) as s:  # another process took the attempt over (same due time)
        s.execute(Occurrence.__table__.update().where(Occurrence.id == lost.occurrence_id)
                  .values(lease_token="x" * 32))
    assert store.due_index.finish_across(_items(claims, lambda c: RunResult("succeeded", output=1))) is None
    assert _index(database) == before == _mirror(database, slugs)


def _wait_until_blocked(database: Database, timeout_s: float = 10.0) -> None:
    """Until a backend of this database waits for a lock (the record, behind the renewal's row lock)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with database.engine.connect() as conn:
            waiting = conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                        "AND wait_event_type = 'Lock'")).scalar_one()
        if waiting:
            return
        time.sleep(0.02)
    raise AssertionError("the record never waited for the renewal")


def test_a_lease_renewed_while_the_record_waits_for_its_row_leaves_no_entry_behind(
        database: Database, slugs: list[str]) -> None:
    """The record's statement began before a renewal of the same attempt committed; the renewal's
    trigger had moved the entry. Deleting by the statement's own snapshot missed the moved entry
    (an occurrence done, its entry due for ever: every later pick found it and claimed nothing)."""
    store = SqlStore(database, EveryRules(), lease_margin_s=600)
    claims = store.due_index.claim_across(T1, 100).claims
    renewed = next(c for c in claims if c.tenant == slugs[0])
    later = renewed.lease_until + timedelta(seconds=30)
    renewal = database.engine.connect()
    transaction = renewal.begin()
    renewal.execute(text(f"UPDATE {schema_for(slugs[0])}.occurrences SET lease_until = :t, due_at = :t "
                         "WHERE id = :id"), {"t": later, "id": renewed.occurrence_id})  # the trigger moves the entry
    outcome: list[Any] = []
    record = threading.Thread(target=lambda: outcome.append(store.due_index.finish_across(_items(claims, lambda c: DONE))))
    record.start()
    try:
        _wait_until_blocked(database)
    finally:
        transaction.commit()
        renewal.close()
        record.join(30)
    assert outcome == [[True] * 9]
    assert _index(database) == _mirror(database, slugs)
    assert (slugs[0], renewed.occurrence_id) not in _index(database)
