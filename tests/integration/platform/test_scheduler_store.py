"""The store on real databases: planning, claiming with leases, fencing, and the unique keys."""

from __future__ import annotations

import threading
from datetime import timedelta

from tests.integration.platform.scheduler_world import EveryRules, World

from almanac.db import Database, insert_ignore
from almanac.platform.store import planning
from almanac.platform.store.models import Occurrence
from almanac.sandbox.contract import Effects, RunResult
from almanac.platform.store.sql_store import SqlStore


def test_a_due_occurrence_runs_once_and_the_next_is_planned(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60)
    first = world.schedule(sid).next_run_at
    assert first is not None and first > world.clock.now()
    assert world.tick() == []
    world.clock.set(first)
    claims = world.tick()
    assert len(claims) == 1 and world.tick() == []
    (run,) = world.runs()
    assert (run.status, run.attempt, run.scheduled_for, run.trigger) == ("succeeded", 1, first, "schedule")
    assert run.reason == "the script returned"
    assert world.schedule(sid).next_run_at == first + timedelta(seconds=60)
    assert world.calls[0]["scheduledFor"] == first.isoformat().replace("+00:00", "Z")
    assert world.calls[0]["payload"] == {"n": 1} and world.calls[0]["runId"] == run.id


def test_planning_the_same_time_twice_keeps_one_occurrence(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60)
    sch = world.schedule(sid)
    with world.session() as s:
        for _ in range(3):
            planning.plan_next(s, sch, world.clock.now(), world.clock.now(), world.store.rules)
    assert len(world.occurrences(schedule_id=sid)) == 1


def test_concurrent_claimers_never_run_an_occurrence_twice(world: World, database: Database) -> None:
    script = world.add_script()
    for i in range(30):
        world.put_job(f"job-{i}", script, world.clock.now())
    others = [SqlStore(Database(database.settings), EveryRules()) for _ in range(3)]
    claimed: list[int] = []
    lock = threading.Lock()

    def claim(store: SqlStore) -> None:
        for _ in range(20):
            batch = store.claim_due(world.tenant, world.clock.now(), 4)
            with lock:
                claimed.extend(c.occurrence_id for c in batch.claims)

    threads = [threading.Thread(target=claim, args=(store,)) for store in others]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in others:
        store.db.dispose()
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == 30
    assert len(world.runs(status="running")) == 30


def test_a_lapsed_lease_is_retried_as_a_new_attempt_and_the_old_result_is_fenced(world: World) -> None:
    script = world.add_script(timeout_ms=1000)
    world.put_job("j", script, world.clock.now())
    (dead,) = world.store.claim_due(world.tenant, world.clock.now(), 10).claims
    world.clock.set(dead.lease_until - timedelta(seconds=1))  # timeout + margin: still leased
    assert world.store.claim_due(world.tenant, world.clock.now(), 10).claims == []
    world.clock.advance(1)
    (retry,) = world.store.claim_due(world.tenant, world.clock.now(), 10).claims
    assert (retry.attempt, retry.occurrence_id) == (2, dead.occurrence_id)
    first = world.runs(attempt=1)[0]
    assert first.status == "failed" and "lease lapsed" in first.reason

    # the dead process comes back and tries to record: refused
    buffered = RunResult("succeeded", effects=Effects(kv={"late": "1"}))
    assert world.store.finish(dead, buffered, world.clock.now(), world.clock.now()) is False
    assert world.store.kv_read(world.tenant, "late") is None
    assert world.store.finish(retry, RunResult("succeeded"), world.clock.now(), world.clock.now()) is True
    assert [r.status for r in world.runs()] == ["failed", "succeeded"]
    assert world.job("j").state == "done"


def test_lease_lapse_on_the_last_attempt_ends_the_occurrence(world: World) -> None:
    script = world.add_script()
    world.put_job("j", script, world.clock.now(), max_attempts=1)
    (claim,) = world.store.claim_due(world.tenant, world.clock.now(), 10).claims
    world.clock.set(claim.lease_until + timedelta(seconds=1))
    assert world.store.claim_due(world.tenant, world.clock.now(), 10).claims == []
    assert world.occurrences()[0].status == "done" and world.job("j").state == "done"


def test_the_due_index_is_used(world: World) -> None:
    if not world.db.is_sqlite:
        return
    with world.db.tenant_connection(world.tenant) as conn:
        plan = conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN SELECT * FROM occurrences WHERE due_at <= '2026-01-01' "
            "ORDER BY priority DESC, due_at, id LIMIT 10").fetchall()
    assert any("ix_occurrences_due_at" in str(row) for row in plan)


def test_occurrence_unique_key_holds_in_the_database(world: World) -> None:
    script = world.add_script()
    world.put_job("j", script, world.clock.now())
    (occ,) = world.occurrences()
    with world.session() as s:
        added = insert_ignore(s, Occurrence.__table__, planning.occurrence_values(
            world.clock.now(), occ.scheduled_for, 0, "job", job_id=occ.job_id))
    assert added is False



def test_the_chain_count_uses_the_root_key_index(world: World) -> None:
    if not world.db.is_sqlite:
        return
    with world.db.tenant_connection(world.tenant) as conn:
        plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN SELECT key FROM jobs WHERE root_key = 'r' LIMIT 101").fetchall()
    assert any("ix_jobs_root_key" in str(row) for row in plan)
