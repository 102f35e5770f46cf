"""A claim pass across tenants writes its plans and claims by one statement (`due_index.writes`), on PostgreSQL.

Before it, each tenant's part wrote its own: the next occurrence, `next_run_at`, the runs and
the compare-and-set, four statements for a schedule's claim; the first test fails on that
code. The second holds the one statement to what the tenant-by-tenant writes make, row for
row, with the rarer decisions (a lapsed lease retried, a misfire caught up, a deleted
script) written inline in the same transaction.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import delete, event, select, text

from almanac.db import Database
from almanac.platform.store import planning
from almanac.platform.store.due_index import claim as store_due
from almanac.platform.store.models import Job, Occurrence, Run, Schedule, Script, ScriptVersion
from almanac.platform.store.sql.functions import CLAIM_READS, CLAIM_WRITES
from almanac.platform.store.due_index.writes import Part, write_claims
from almanac.platform.store.due_index.reads import read_tenants
from almanac.platform.store.sql_store import SqlStore
from tests.integration.platform.scheduler_world import EPOCH, EveryRules
from tests.integration.platform_pg.tenant_rows import snapshot

pytestmark = pytest.mark.postgres

T1 = EPOCH + timedelta(days=300)  # on the minute: every schedule "EVERY 60" falls due
CLAIMED = {"runs": Run, "occurrences": Occurrence, "jobs": Job, "schedules": Schedule}  # what a claim writes


def _script(s: Any, name: str) -> int:
    script = Script(name=name, current_version=1, timeout_ms=1000, memory_mb=32, created_at=T1, updated_at=T1)
    s.add(script)
    s.flush()
    s.add(ScriptVersion(script_id=script.id, version=1, source="export default () => 1", created_at=T1))
    return script.id


def _schedule(s: Any, script_id: int, created: Any, **policy: Any) -> int:
    fields = dict(misfire="run_once", catchup_window_s=86400, overlap="skip", expire_after_s=None, max_attempts=3,
                  retry_backoff_s=10, priority=0)
    fields.update(policy)
    sch = Schedule(name="sch", script_id=script_id, rule_text="EVERY 60", input_kind="test", rrule="EVERY 60",
                   timezone="UTC", payload=json.dumps({"n": 1}), enabled=True, version=1, created_at=created,
                   updated_at=created, **fields)
    s.add(sch)
    s.flush()
    planning.replan_schedule(s, sch, created, EveryRules())
    return sch.id


def _job(s: Any, key: str, script_id: int, when: Any, max_attempts: int = 3) -> None:
    planning.upsert_job(s, key, dict(script_id=script_id, run_at=when, payload=json.dumps(key), expire_after_s=None,
                                     max_attempts=max_attempts, priority=0), now=when)


def _tenant(database: Database, store: SqlStore, slug: str) -> None:
    """Due at T1: a plain schedule, a schedule that missed five times (run_all), a schedule whose
    previous attempt still runs (overlap skip), a job, a job whose script was deleted, and a job
    whose attempt's lease lapsed (its process died at T1 - 120 s)."""
    with database.tenant_session(slug) as s:
        script = _script(s, "a")
        _job(s, "lapsed", script, T1 - timedelta(seconds=120), max_attempts=2)
    (held,) = store.claim_due(slug, T1 - timedelta(seconds=120), 10).claims
    assert held.job_key == "lapsed"
    with database.tenant_session(slug) as s:
        _schedule(s, script, T1 - timedelta(seconds=30))
        _schedule(s, script, T1 - timedelta(seconds=330), misfire="run_all")
        busy = _schedule(s, script, T1 - timedelta(seconds=30), overlap="skip")
        s.add(Occurrence(schedule_id=busy, schedule_version=1, scheduled_for=T1 - timedelta(seconds=60),
                         due_at=T1 + timedelta(seconds=600), priority=0, trigger="schedule", status="running",
                         attempt=1, lease_token="r" * 32, lease_until=T1 + timedelta(seconds=600), created_at=T1))
        _job(s, "j0", script, T1)
        gone = _script(s, "b")
        _job(s, "orphan", gone, T1)
        s.execute(delete(ScriptVersion).where(ScriptVersion.script_id == gone))
        s.execute(delete(Script).where(Script.id == gone))


@pytest.fixture
def still(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass's leases count from `now` plus the time it took: here none, so that passes compare."""
    monkeypatch.setattr(store_due, "time", types.SimpleNamespace(monotonic=lambda: 0.0))


def test_a_pass_writes_every_tenant_s_plans_and_claims_by_one_statement(
        database: Database, make_tenant: Callable[..., str]) -> None:
    store = SqlStore(database, EveryRules())
    slugs = [make_tenant(f"cw-{i}") for i in range(3)]
    seen = _statements_of_a_pass(database, store, slugs)
    writes = [sql for sql in seen if sql.lstrip().split()[0].upper() in ("INSERT", "UPDATE")]
    turns = [sql for sql in writes if "INTO tenant_turns" in sql]
    assert len(turns) <= 1  # the tenants' turns in the shared schema (`tenant_turns`): one statement a pass at most
    assert [sql for sql in writes if sql not in turns] == []  # before: next occurrence, next_run_at, runs, claim per tenant
    (claim,) = [sql for sql in seen if CLAIM_WRITES.name in sql]
    assert all(f't_{slug.replace("-", "_")}.{CLAIM_WRITES.name}(' in claim.replace('"', '') for slug in slugs)
    for slug in slugs:
        with database.tenant_session(slug) as s:
            occurrences = {(o.trigger, o.status, o.run_id is not None) for o in s.execute(select(Occurrence)).scalars()}
            assert occurrences == {("schedule", "running", True), ("job", "running", True),
                                   ("schedule", "planned", False)}
            assert s.execute(select(Schedule.next_run_at)).scalar_one() == T1 + timedelta(seconds=60)


def test_the_one_statement_writes_what_the_tenant_by_tenant_claim_writes(
        database: Database, make_tenant: Callable[..., str], still: None) -> None:
    store = SqlStore(database, EveryRules())
    fused, apart = [make_tenant(f"cf-{i}") for i in range(2)], [make_tenant(f"cp-{i}") for i in range(2)]
    for slug in fused:
        _tenant(database, store, slug)
    batch = store.due_index._claim_pass(T1, 100, 0.5, None)  # optimistic: writes deferred to one statement
    # Read now: the next pass would take the catch-up occurrences this one planned.
    written = [snapshot(database, slug, CLAIMED) for slug in fused]
    for slug in apart:
        _tenant(database, store, slug)
    other = store.due_index.claim_tenant_by_tenant(T1, 100, 0.5, lambda slug: True)  # a savepoint and the writes per tenant
    assert batch.recorded == [("failed", 2), ("lease_lapsed", 2), ("skipped", 2)]
    for a, b, mine_written in zip(fused, apart, written):
        assert mine_written == snapshot(database, b, CLAIMED)
        mine = [replace(c, lease_token="", tenant="") for c in batch.claims if c.tenant == a]
        theirs = [replace(c, lease_token="", tenant="") for c in other.claims if c.tenant == b]
        assert mine == theirs and len(mine) == 4  # the retry, two schedules, j0
    with database.tenant_session(fused[0]) as s:  # the misfire's catch-up is planned, due now
        assert s.execute(select(Occurrence.scheduled_for).where(Occurrence.trigger == "catchup")
                         .order_by(Occurrence.scheduled_for)).scalars().all() == [
            T1 - timedelta(seconds=60 * k) for k in (4, 3, 2, 1, 0)]


def _job_claimed(database: Database, slug: str, attempt_read: int) -> Part:
    """A job due at T1 in `slug`, and the claim writes of its first attempt as if read at `attempt_read`."""
    with database.tenant_session(slug) as s:
        _job(s, "j0", _script(s, "a"), T1)
        occurrence = s.execute(select(Occurrence)).scalar_one()
    run = dict(b_occurrence_id=occurrence.id, b_schedule_id=None, b_job_key="j0", b_script_id=1, b_script_version=1,
               b_trigger="job", b_scheduled_for=T1, b_created_at=T1, b_started_at=T1, b_status="running",
               b_attempt=1, b_lease_token="t" * 32)
    return Part(slug, [], [], [run], [(occurrence.id, "planned", attempt_read, "t" * 32, T1)])


def test_a_compare_and_set_that_misses_raises_rather_than_claim_on_a_guess(
        database: Database, make_tenant: Callable[..., str]) -> None:
    slug = make_tenant("cm")
    stale = _job_claimed(database, slug, attempt_read=5)  # attempt 5: not as read
    with pytest.raises(RuntimeError, match="claim changed 0"):
        with database.engine.connect() as conn, conn.begin():
            write_claims(conn, [stale])
    with database.tenant_session(slug) as s:
        assert s.execute(select(Run)).scalars().all() == []


def test_a_backend_plans_a_tenant_s_claim_writes_once_and_keeps_the_plan(
        database: Database, make_tenant: Callable[..., str]) -> None:
    """The writes are static SQL of the tenant's function (t0020): the connection keeps their plan,
    where the statement naming the tenants was planned afresh at every pass."""
    part = _job_claimed(database, make_tenant("ck"), attempt_read=0)
    kept = text("SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'CachedPlan' "
                "AND ident LIKE '%INSERT INTO%runs%'")
    with database.engine.connect() as conn:
        with conn.begin():
            assert conn.execute(kept).scalar_one() == 0
            assert len(write_claims(conn, [part])) == 1
            conn.rollback()
        with conn.begin():
            assert conn.execute(kept).scalar_one() == 1  # kept past the transaction, for the next pass
            assert len(write_claims(conn, [part])) == 1
            assert conn.execute(kept).scalar_one() == 1  # the same plan, not a second one


def test_a_backend_plans_a_tenant_s_claim_reads_once_and_keeps_the_plan(
        database: Database, make_tenant: Callable[..., str]) -> None:
    """The reads are static SQL of the tenant's function (t0022): the connection keeps their plan,
    where the five statements naming the pass's tenants were planned afresh at every pass."""
    slug = make_tenant("cr")
    with database.tenant_session(slug) as s:
        _schedule(s, _script(s, "a"), T1 - timedelta(seconds=30))
        (due,) = s.execute(select(Occurrence.id)).scalars()
    kept = text("SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'CachedPlan' "
                "AND ident LIKE '%SKIP LOCKED%'")
    with database.engine.connect() as conn:
        with conn.begin():
            assert conn.execute(kept).scalar_one() == 0
            assert len(read_tenants(conn, [(slug, [due])], T1, lambda *_: False)[slug].rows) == 1
            conn.rollback()
        with conn.begin():
            assert conn.execute(kept).scalar_one() == 1  # kept past the transaction, for the next pass
            reads = read_tenants(conn, [(slug, [due])], T1, lambda *_: True)[slug]
            assert conn.execute(kept).scalar_one() == 1  # the same plan, not a second one
    assert [r.id for r in reads.rows] == [due] and list(reads.schedules) == [1] and reads.day == (0, 0)
    assert [r.id for r in reads.scripts] == [1] and reads.sources == {}  # known: not read again


def _statements_of_a_pass(database: Database, store: SqlStore, slugs: list[str]) -> list[str]:
    for slug in slugs:
        with database.tenant_session(slug) as s:
            script = _script(s, "a")
            _schedule(s, script, T1 - timedelta(seconds=30))
            _job(s, "j0", script, T1)
    seen: list[str] = []
    listener = lambda *a: seen.append(a[2])  # noqa: E731
    event.listen(database.engine, "before_cursor_execute", listener)
    try:
        claims = store.due_index.claim_across(T1, 100).claims
        assert len(claims) == 2 * len(slugs) and all(c.run_id for c in claims)
    finally:
        event.remove(database.engine, "before_cursor_execute", listener)
    return seen


def test_a_pass_reads_every_tenant_s_rows_by_one_call_of_its_function(
        database: Database, make_tenant: Callable[..., str]) -> None:
    """Before: five reads across the tenants (their rows, schedules, running attempts, scripts,
    today's runs), each a statement naming every tenant's table."""
    store = SqlStore(database, EveryRules())
    slugs = [make_tenant(f"cr-{i}") for i in range(3)]
    seen = _statements_of_a_pass(database, store, slugs)
    (reads,) = [sql for sql in seen if CLAIM_READS.name in sql]
    assert all(f't_{slug.replace("-", "_")}.{CLAIM_READS.name}(' in reads.replace('"', '') for slug in slugs)
    tenant_tables = re.compile(r'\bt_\w+"?\.(schedules|jobs|scripts|runs|occurrences)\b')
    direct = [sql for sql in seen if tenant_tables.search(sql)]
    assert direct == [], direct  # (the sources of scripts not met yet, `script_versions`, are read apart)


def test_a_pass_costs_the_same_statements_for_three_tenants_as_for_one(
        database: Database, make_tenant: Callable[..., str]) -> None:
    """Before: five reads and four writes per tenant (its rows, schedules, running attempts, scripts,
    today's runs; next occurrence, next_run_at, runs, claim)."""
    store = SqlStore(database, EveryRules())
    one = _statements_of_a_pass(database, store, [make_tenant("cs-0")])
    three = _statements_of_a_pass(database, store, [make_tenant(f"cs-{i}") for i in (1, 2, 3)])
    assert len(three) == len(one), (one, three)


def test_a_run_recorded_failed_in_the_pass_counts_against_the_day_as_a_read_then_would(
        database: Database, make_tenant: Callable[..., str], still: None) -> None:
    """The day's runs are read at the start of the pass: a deleted script's run recorded `failed`
    before the tenant's first claim counts, as it did when the day was read at that claim."""
    from almanac.platform.store import quotas

    store = SqlStore(database, EveryRules())
    outcomes = []
    for slug, tenant_exists in ((make_tenant("cq-0"), None), (make_tenant("cq-1"), lambda slug: True)):
        with database.shared_session() as shared:
            quotas.set_quotas(shared, slug, {"runs_per_day": 1}, T1)
        with database.tenant_session(slug) as s:
            script = _script(s, "a")
            gone = _script(s, "b")
            planning.upsert_job(s, "orphan", dict(script_id=gone, run_at=T1, payload="1", expire_after_s=None,
                                                  max_attempts=1, priority=5), now=T1)  # decided first
            _job(s, "j0", script, T1)
            s.execute(delete(ScriptVersion).where(ScriptVersion.script_id == gone))
            s.execute(delete(Script).where(Script.id == gone))
        batch = store.due_index._claim_pass(T1, 100, 0.5, tenant_exists)
        outcomes.append((batch.claims, batch.recorded))
    assert outcomes[0] == outcomes[1] == ([], [("failed", 1), ("skipped", 1)])
