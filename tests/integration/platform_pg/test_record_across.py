"""Finished runs of many tenants recorded by one statement (`due_index.record`), on PostgreSQL.

Before it, `finish_across` ran four statements per tenant for a succeeded run of a schedule
(release, run, failures reset, queued released): the first test fails on that code. The
others hold the one statement to what the per-tenant path writes, row for row.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, select, text, update

from almanac.db import Database
from almanac.platform.store.due_index import tenant_parts as across
from almanac.platform.store import planning
from almanac.platform.store.models import KV, Job, Occurrence, Run, Schedule, Script, ScriptVersion
from almanac.platform.store.due_index.record import record_plain
from almanac.platform.store.sql_store import SqlStore
from almanac.sandbox.contract import Effects, RunResult
from tests.integration.platform.scheduler_world import EPOCH, EveryRules
from tests.integration.platform_pg.tenant_rows import snapshot

pytestmark = pytest.mark.postgres

T0 = EPOCH + timedelta(days=300, seconds=30)  # half a minute before a schedule's time
T1 = T0 + timedelta(seconds=30)  # the schedules' first occurrence, and the jobs' time
DONE = RunResult("succeeded", output={"n": 1}, logs=("one", "two"), duration_ms=4, cpu_ms=3,
                 event={"scheduledFor": "x"})


def _tenant(database: Database, slug: str) -> None:
    """A script, a schedule every minute that queues behind itself (2 failures in a row), two jobs at T1."""
    with database.tenant_session(slug) as s:
        script = Script(name="s", current_version=1, timeout_ms=1000, memory_mb=32, created_at=T0, updated_at=T0)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source="export default () => 1", created_at=T0))
        sch = Schedule(name="sch", script_id=script.id, rule_text="EVERY 60", input_kind="test", rrule="EVERY 60",
                       timezone="UTC", payload=json.dumps({"n": 1}), enabled=True, version=1, created_at=T0,
                       updated_at=T0, misfire="run_once", catchup_window_s=86400, overlap="queue",
                       expire_after_s=None, max_attempts=3, retry_backoff_s=10, priority=0, failures_in_row=2)
        s.add(sch)
        s.flush()
        planning.replan_schedule(s, sch, T0, EveryRules())
        for key in ("j0", "j1"):
            planning.upsert_job(s, key, dict(script_id=script.id, run_at=T1, payload="null", expire_after_s=None,
                                             max_attempts=3, priority=0), now=T0)


def _claimed(database: Database, slugs: list[str]) -> tuple[SqlStore, list[Any]]:
    """Every tenant's schedule run and two job runs claimed at T1, the schedule's next one queued behind."""
    for slug in slugs:
        _tenant(database, slug)
    store = SqlStore(database, EveryRules(), lease_margin_s=600)
    claims = store.due_index.claim_across(T1, 100).claims
    assert len(claims) == 3 * len(slugs)
    assert store.due_index.claim_across(T1 + timedelta(seconds=60), 100).claims == []  # queued behind the running one
    return store, sorted(claims, key=lambda c: (c.tenant, c.occurrence_id))


def _items(claims: list[Any], results: Callable[[Any], RunResult]) -> list[Any]:
    end = T1 + timedelta(seconds=61)
    return [(c, results(c), T1 + timedelta(seconds=1), end) for c in claims]


def _statements(database: Database) -> list[str]:
    """The statements executed from now on, but for the switch of the due-index triggers around them."""
    seen: list[str] = []
    event.listen(database.engine, "before_cursor_execute",
                 lambda *a: None if a[2].startswith("SELECT set_config(") else seen.append(a[2]))
    return seen


def test_succeeded_runs_of_many_tenants_are_recorded_by_one_statement(
        database: Database, make_tenant: Callable[..., str]) -> None:
    slugs = [make_tenant(f"ra-{i}") for i in range(3)]
    store, claims = _claimed(database, slugs)
    seen = _statements(database)
    assert store.due_index.finish_across(_items(claims, lambda c: DONE)) == [True] * 9
    assert len(seen) == 1, seen  # before: release, run, reset, queued per tenant (and the jobs')
    for slug in slugs:
        with database.tenant_session(slug) as s:
            assert {r.status for r in s.execute(select(Run)).scalars()} == {"succeeded"}
            assert s.execute(select(Schedule.failures_in_row)).scalar_one() == 0
            assert {j.state for j in s.execute(select(Job)).scalars()} == {"done"}
            queued = s.execute(select(Occurrence).where(Occurrence.status == "queued")).scalar_one()
            assert queued.due_at == T1 + timedelta(seconds=61)  # due now: its running one ended


def _results(c: Any) -> RunResult:
    """A mix: plain successes, a failure that is retried, a success with effects (the per-tenant path)."""
    if c.job_key == "j1" and c.tenant.endswith("1"):
        return RunResult("failed", error="boom", duration_ms=2)
    if c.job_key == "j0" and c.tenant.endswith("2"):
        return RunResult("succeeded", output=2, effects=Effects(kv={"k": '"v"'}))
    return DONE


def test_the_one_statement_writes_what_the_per_tenant_records_write(
        database: Database, make_tenant: Callable[..., str]) -> None:
    fused = [make_tenant(f"rf-{i}") for i in range(3)]
    apart = [make_tenant(f"rp-{i}") for i in range(3)]
    store, claims = _claimed(database, fused + apart)
    mine = {slug: [c for c in claims if c.tenant == slug] for slug in fused + apart}
    assert store.due_index.finish_across(_items([c for slug in fused for c in mine[slug]], _results)) == [True] * 9
    for slug in apart:
        assert store.finish_many(_items(mine[slug], _results)) == [True] * 3
    for a, b in zip(fused, apart):
        assert snapshot(database, a) == snapshot(database, b)
    with database.tenant_session(fused[1]) as s:  # the failure's retry and event, through the mixed path
        retried = s.execute(select(Occurrence).where(Occurrence.status == "planned",
                                                     Occurrence.job_id.is_not(None))).scalar_one()
        assert retried.attempt == 1 and retried.due_at == T1 + timedelta(seconds=71)
    with database.tenant_session(fused[2]) as s:
        assert s.execute(select(KV.value).where(KV.key == "k")).scalar_one() == '"v"'


def test_a_lost_lease_in_a_later_statement_rolls_back_the_earlier_ones(
        database: Database, make_tenant: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(across, "TENANTS_PER_STATEMENT", 2)
    slugs = [make_tenant(f"rl-{i}") for i in range(3)]
    store, claims = _claimed(database, slugs)
    before = {slug: snapshot(database, slug) for slug in slugs}
    lost = [c for c in claims if c.tenant == slugs[2]][0]
    with database.tenant_session(slugs[2]) as s:  # another process took the attempt over
        s.execute(update(Occurrence).where(Occurrence.id == lost.occurrence_id).values(lease_token="x" * 32))
    before[slugs[2]] = snapshot(database, slugs[2])
    seen = _statements(database)
    assert store.due_index.finish_across(_items(claims, lambda c: DONE)) is None
    assert len(seen) == 2  # two statements: the first recorded its two tenants, then was rolled back
    assert {slug: snapshot(database, slug) for slug in slugs} == before


def test_an_occurrence_met_twice_in_the_batch_is_fenced_row_by_row() -> None:
    from almanac.platform.store.due_index.claim import _split_plain

    claim = type("C", (), dict(tenant="a", occurrence_id=7, job_id=None, schedule_id=1))
    other = type("C", (), dict(tenant="a", occurrence_id=8, job_id=None, schedule_id=1))
    items = [(claim, DONE, T1, T1), (claim, DONE, T1, T1), (other, DONE, T1, T1),
             (other, RunResult("failed"), T1, T1)]
    assert _split_plain(items) == ([], [("a", [0, 1, 2, 3])])
    assert _split_plain(items[2:3]) == ([("a", [0])], [])


def test_an_attempt_taken_over_is_fenced_and_logged_on_the_per_tenant_path_too(
        database: Database, make_tenant: Callable[..., str], caplog: pytest.LogCaptureFixture) -> None:
    """A timed-out attempt (retried, so not a plain one) whose lease another process took over.

    `finish_across` refuses it without a rollback; before, only `finish_many` said so in the
    log, and a worker paused past its lease whose sandbox was killed as hung on resume fenced
    silently (seen in CI: the acceptance test waited for `run.fenced` in vain).
    """
    slug = make_tenant("rt-0")
    store, claims = _claimed(database, [slug])
    lost = [c for c in claims if c.job_key == "j0"][0]
    with database.tenant_session(slug) as s:  # another process took the attempt over
        s.execute(update(Occurrence).where(Occurrence.id == lost.occurrence_id).values(lease_token="x" * 32))
    before = snapshot(database, slug)
    timed_out = RunResult("timed_out", error="timed out after 1000 ms", duration_ms=1000)
    with caplog.at_level("WARNING", logger="almanac"):
        assert store.due_index.finish_across(_items([lost], lambda c: timed_out)) == [False]
    assert snapshot(database, slug) == before
    fenced = [r for r in caplog.records if getattr(r, "event", None) == "run.fenced"]
    assert [getattr(r, "run_id", None) for r in fenced] == [lost.run_id]


def test_a_backend_plans_a_tenant_s_record_once_and_keeps_the_plan(
        database: Database, make_tenant: Callable[..., str]) -> None:
    """The record's writes are static SQL of the tenant's function (t0021): the connection keeps their
    plan, where the statement naming the tenants was planned afresh at every call."""
    slug = make_tenant("rk")
    store, claims = _claimed(database, [slug])
    items = _items(claims, lambda c: DONE)
    kept = text("SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'CachedPlan' AND ident LIKE '%rel AS (%'")
    with database.engine.connect() as conn:
        with conn.begin():
            assert conn.execute(kept).scalar_one() == 0
            assert record_plain(conn, [(slug, items)], lambda item: store.records.finish_values(*item, None))
            conn.rollback()
        with conn.begin():
            assert conn.execute(kept).scalar_one() == 1  # kept past the transaction, for the next call
            assert record_plain(conn, [(slug, items)], lambda item: store.records.finish_values(*item, None))
            assert conn.execute(kept).scalar_one() == 1  # the same plan, not a second one
