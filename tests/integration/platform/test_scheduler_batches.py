"""Claiming and recording in batches keeps every per-attempt guarantee: each claim is its own
compare-and-set with its own lease token, each record is fenced by that token, and effects
apply only for the records that applied."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update

from tests.integration.platform.scheduler_world import World

from almanac.platform.store.models import Script, ScriptVersion
from almanac.platform.timer.scheduler import Scheduler
from almanac.sandbox.contract import Effects, RunResult


def _effects(world: World, key: str) -> Effects:
    return Effects(kv={key: "1"}, events=(("done", f'{{"key":"{key}"}}'),))


def test_one_claim_transaction_claims_many_with_their_own_tokens_and_runs(world: World) -> None:
    script = world.add_script()
    for i in range(25):
        world.put_job(f"job-{i}", script, world.clock.now())
    batch = world.store.claim_due(world.tenant, world.clock.now(), 100)
    assert len(batch.claims) == 25 and not batch.full
    assert len({c.lease_token for c in batch.claims}) == 25
    # Each token begins with the claiming process's tag: a dead process's running attempts are found by it.
    assert {c.lease_token[:8] for c in batch.claims} == {world.store.owner_tag}
    assert len({c.run_id for c in batch.claims}) == 25
    runs = {r.id: r for r in world.runs()}
    for claim in batch.claims:
        run = runs[claim.run_id]
        assert (run.status, run.lease_token, run.occurrence_id, run.attempt) == (
            "running", claim.lease_token, claim.occurrence_id, 1)
    held = {o.id: o for o in world.occurrences()}
    assert all(held[c.occurrence_id].run_id == c.run_id for c in batch.claims)
    assert all(held[c.occurrence_id].lease_token == c.lease_token for c in batch.claims)
    assert world.store.claim_due(world.tenant, world.clock.now(), 100).claims == []


def test_a_batch_of_records_fences_each_attempt_by_its_own_token(world: World) -> None:
    script = world.add_script(timeout_ms=1000)
    world.put_job("dead", script, world.clock.now())
    (dead,) = world.store.claim_due(world.tenant, world.clock.now(), 10).claims
    world.clock.set(dead.lease_until + timedelta(seconds=1))
    world.put_job("alive", script, world.clock.now())
    claims = world.store.claim_due(world.tenant, world.clock.now(), 10).claims
    retry = next(c for c in claims if c.occurrence_id == dead.occurrence_id)
    alive = next(c for c in claims if c.job_key == "alive")
    now = world.clock.now()
    def ok(key: str) -> RunResult:
        return RunResult("succeeded", effects=_effects(world, key))

    applied = world.store.finish_many([
        (dead, ok("from-dead"), now, now),  # its lease lapsed: refused, effects dropped
        (retry, ok("from-retry"), now, now),
        (alive, ok("from-alive"), now, now),
    ])
    assert applied == [False, True, True]
    assert world.store.kv_read(world.tenant, "from-dead") is None
    assert world.store.kv_read(world.tenant, "from-retry") == 1
    assert world.store.kv_read(world.tenant, "from-alive") == 1
    statuses = {(r.job_key, r.attempt): r.status for r in world.runs()}
    assert statuses == {("dead", 1): "failed", ("dead", 2): "succeeded", ("alive", 1): "succeeded"}
    assert world.job("dead").state == "done" and world.job("alive").state == "done"
    assert {o.status for o in world.occurrences()} == {"done"}


def test_a_lost_lease_in_a_bulk_release_rolls_back_and_records_the_rest(world: World) -> None:
    """Each attempt's occurrence is met once here, so all go to the bulk release: the one whose lease
    was taken over (a retry claimed by another process, not in this batch) makes the whole optimistic
    transaction roll back, and the careful pass records the others and fences it."""
    script = world.add_script(timeout_ms=1000)
    world.put_job("lost", script, world.clock.now(), max_attempts=2)
    (lost,) = world.store.claim_due(world.tenant, world.clock.now(), 10).claims
    world.clock.set(lost.lease_until + timedelta(seconds=1))
    for key in ("a", "b"):
        world.put_job(key, script, world.clock.now())
    claims = {c.job_key: c for c in world.store.claim_due(world.tenant, world.clock.now(), 10).claims}
    assert claims["lost"].attempt == 2  # the retry holds the occurrence now, with its own token
    now = world.clock.now()
    def ok(key: str) -> RunResult:
        return RunResult("succeeded", effects=_effects(world, key))

    applied = world.store.finish_many([
        (claims["a"], ok("from-a"), now, now),
        (lost, ok("from-lost"), now, now),
        (claims["b"], ok("from-b"), now, now),
    ])
    assert applied == [True, False, True]
    assert world.store.kv_read(world.tenant, "from-lost") is None
    assert world.store.kv_read(world.tenant, "from-a") == 1 and world.store.kv_read(world.tenant, "from-b") == 1
    with world.session() as s:
        from almanac.platform.store.models import Event

        assert len(s.execute(select(Event.id)).all()) == 2  # the rolled-back pass left no effect behind
    statuses = {(r.job_key, r.attempt): r.status for r in world.runs()}
    assert statuses == {("lost", 1): "failed", ("lost", 2): "running", ("a", 1): "succeeded", ("b", 1): "succeeded"}
    held = {o.job_id: o for o in world.occurrences()}[world.job("lost").id]
    assert (held.status, held.lease_token) == ("running", claims["lost"].lease_token)


def test_a_batch_mixes_retries_failures_and_successes(world: World) -> None:
    script = world.add_script()
    for key in ("ok", "bad", "last"):
        world.put_job(key, script, world.clock.now(), max_attempts=2 if key != "last" else 1)
    claims = {c.job_key: c for c in world.store.claim_due(world.tenant, world.clock.now(), 10).claims}
    now = world.clock.now()
    applied = world.store.finish_many([
        (claims["ok"], RunResult("succeeded", output={"n": 1}, effects=_effects(world, "ok")), now, now),
        (claims["bad"], RunResult("failed", error="boom", effects=_effects(world, "bad")), now, now),
        (claims["last"], RunResult("timed_out"), now, now),
    ])
    assert applied == [True, True, True]
    runs = {r.job_key: r for r in world.runs()}
    assert (runs["ok"].status, runs["ok"].output) == ("succeeded", '{"n": 1}')
    assert runs["bad"].status == "failed" and "retry 2 of 2" in runs["bad"].reason
    assert runs["last"].status == "timed_out"
    assert world.store.kv_read(world.tenant, "bad") is None and world.store.kv_read(world.tenant, "ok") == 1
    occurrences = {o.job_id: o for o in world.occurrences()}
    assert occurrences[world.job("bad").id].status == "planned"
    assert occurrences[world.job("ok").id].status == "done"
    assert world.job("bad").state == "pending" and world.job("last").state == "done"


def test_a_new_script_version_is_run_after_the_cached_one(world: World) -> None:
    script = world.add_script(source="export default () => 'v1'")
    world.put_job("a", script, world.clock.now())
    (first,) = world.store.claim_due(world.tenant, world.clock.now(), 10).claims
    now = world.clock.now()
    with world.session() as s:
        s.add(ScriptVersion(script_id=script, version=2, source="export default () => 'v2'", created_at=now))
        s.execute(update(Script).where(Script.id == script).values(current_version=2))
    world.put_job("b", script, world.clock.now())
    (second,) = world.store.claim_due(world.tenant, world.clock.now(), 10).claims
    assert (first.source, first.script_version) == ("export default () => 'v1'", 1)
    assert (second.source, second.script_version) == ("export default () => 'v2'", 2)


def test_schedules_due_together_are_each_planned_once(world: World) -> None:
    script = world.add_script()
    sids = [world.add_schedule(script, every=60) for _ in range(5)]
    first = world.schedule(sids[0]).next_run_at
    world.clock.set(first)
    assert len(world.tick()) == 5
    for sid in sids:
        assert world.schedule(sid).next_run_at == first + timedelta(seconds=60)
        assert [o.status for o in world.occurrences(schedule_id=sid)] == ["done", "planned"]


def _run_until(scheduler: Scheduler, done: Callable[[], bool], timeout_s: float = 20) -> None:
    """Run the real scheduler until `done()` (or the timeout), then stop it."""
    scheduler.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        scheduler.stop()


def test_the_running_scheduler_records_every_run_through_its_recorder(world: World) -> None:
    script = world.add_script()
    for i in range(40):
        world.put_job(f"job-{i}", script, world.clock.now())
    scheduler = Scheduler(world.store, world.scheduler.runner, world.clock, lambda: [world.tenant],
                          workers=4, metrics=world.scheduler.metrics)
    _run_until(scheduler, lambda: len(world.runs(status="succeeded")) >= 40)
    assert len(world.runs(status="succeeded")) == 40 and world.runs(status="running") == []
    assert scheduler.outstanding() == (0, 0, 0)
    with world.session() as s:
        from almanac.platform.store.models import Job

        assert set(s.execute(select(Job.state)).scalars()) == {"done"}


def test_the_scheduler_prepares_its_runner_before_the_first_claim(world: World) -> None:
    script = world.add_script()
    world.put_job("j", script, world.clock.now())
    order: list[str] = []
    runner = world.scheduler.runner

    class Preparing:
        def prepare(self) -> None:
            order.append("prepare")
            time.sleep(0.3)  # a slow start: nothing may be claimed meanwhile
            order.append(f"claimed before ready: {len(world.runs())}")

        def run(self, *args: object):
            order.append("run")
            return runner.run(*args)

    scheduler = Scheduler(world.store, Preparing(), world.clock, lambda: [world.tenant],  # type: ignore[arg-type]
                          workers=2, metrics=world.scheduler.metrics)
    _run_until(scheduler, lambda: bool(world.runs(status="succeeded")))
    assert order == ["prepare", "claimed before ready: 0", "run"]


def test_the_recorder_gathers_runs_that_finish_close_together_into_few_transactions(world: World) -> None:
    script = world.add_script()
    for i in range(40):
        world.put_job(f"job-{i}", script, world.clock.now())
    transactions: list[int] = []
    store = world.store

    class Counting:
        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        def finish_many(self, items: list) -> list[bool]:
            transactions.append(len(items))
            return store.finish_many(items)

    def slow(source: str, event: dict, caps: object) -> int:
        time.sleep(0.005)  # like a run thread waiting on its sandbox process
        return 1

    from almanac.platform.runner import FunctionRunner

    counting: Any = Counting()
    scheduler = Scheduler(counting, FunctionRunner(slow), world.clock, lambda: [world.tenant],
                          workers=4, metrics=world.scheduler.metrics)
    _run_until(scheduler, lambda: len(world.runs(status="succeeded")) >= 40)
    assert sum(transactions) == 40
    assert len(transactions) <= 10, transactions  # one per finished run without the recorder's linger


def test_a_runner_with_submit_is_called_back_and_never_has_more_than_workers_out(world: World) -> None:
    """The sandbox pool's way: `submit` returns at once and calls back from its own thread.
    The scheduler keeps at most `workers` runs out, starts the next from the callback,
    and records a run the runner refused (it raised) as failed."""
    import threading

    script = world.add_script()
    for i in range(30):
        world.put_job(f"job-{i}", script, world.clock.now())
    out, most = [0], [0]
    lock = threading.Lock()

    class Submitting:
        def run(self, *args: object) -> object:
            raise AssertionError("the scheduler must use submit")

        def submit(self, request: RunRequest, caps: object, done: Callable[[object], None]) -> None:
            event = request.event
            if event["jobKey"] == "job-7":
                raise RuntimeError("sandbox pool is closed")
            with lock:
                out[0] += 1
                most[0] = max(most[0], out[0])

            def finish() -> None:
                with lock:
                    out[0] -= 1
                done(RunResult("succeeded", output=event["jobKey"], effects=Effects(kv={event["jobKey"]: "1"})))

            threading.Timer(0.01, finish).start()

    from almanac.sandbox.contract import RunRequest

    scheduler = Scheduler(world.store, Submitting(), world.clock, lambda: [world.tenant],  # type: ignore[arg-type]
                          workers=3, metrics=world.scheduler.metrics)
    _run_until(scheduler, lambda: len(world.runs(status="succeeded")) >= 29 and len(world.runs(status="failed")) >= 1)
    assert len(world.runs(status="succeeded")) == 29 and world.runs(status="running") == []
    [refused] = world.runs(status="failed")
    assert refused.job_key == "job-7" and "could not run the script: RuntimeError" in refused.error
    assert 1 <= most[0] <= 3
    assert world.store.kv_read(world.tenant, "job-3") == 1 and world.store.kv_read(world.tenant, "job-7") is None
    assert scheduler.outstanding() == (0, 0, 0)


def test_a_runner_that_refuses_every_run_gets_each_recorded_failed_without_deep_recursion(world: World) -> None:
    script = world.add_script()
    for i in range(400):
        world.put_job(f"job-{i}", script, world.clock.now())

    class Closed:
        def run(self, *args: object) -> object:
            raise AssertionError("the scheduler must use submit")

        def submit(self, *args: object) -> None:
            raise RuntimeError("sandbox pool is closed")

    # 40 places: one claim of all 400 (capacity 16 per place), each refused at once.
    scheduler = Scheduler(world.store, Closed(), world.clock, lambda: [world.tenant],  # type: ignore[arg-type]
                          workers=40, metrics=world.scheduler.metrics)
    _run_until(scheduler, lambda: len(world.runs(status="failed")) >= 400)
    assert len(world.runs(status="failed")) == 400 and world.runs(status="running") == []
