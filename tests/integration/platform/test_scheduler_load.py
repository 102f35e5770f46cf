"""The scheduler under load (SPEC section 11): waiting is not dying, tenants share the slots,
and a run's recorded start is when its script started.

The first two drive the real timer thread with short, slow runs; they compare outcomes
and the order of starts, never durations."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from almanac.db import Database
from almanac.platform.clock import SystemClock
from almanac.platform.store.models import Job
from almanac.platform.runner import FunctionRunner
from almanac.sandbox.contract import RunResult
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.scheduler import Scheduler
from tests.integration.platform.scheduler_world import EveryRules, World


def _await(done: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _jobs_done(world: World, count: int) -> bool:
    with world.session() as s:
        return list(s.execute(select(Job.state)).scalars()).count("done") >= count


def _drain_beside_a_second_process(scheduler: Scheduler, other: SqlStore, clock: SystemClock,
                                   tenants: list[str], done: Callable[[], bool]) -> None:
    """Run `scheduler` until `done()`, while a second, live process takes over any lease that lapses."""
    stop = threading.Event()

    def second_process() -> None:
        while not stop.is_set():
            now = clock.now()
            for tenant in tenants:
                for claim in other.claim_due(tenant, now, 5).claims:
                    other.finish(claim, RunResult("succeeded"), now, now)
            time.sleep(0.05)

    helper = threading.Thread(target=second_process, daemon=True)
    scheduler.start()
    helper.start()
    try:
        _await(done)
    finally:
        stop.set()
        helper.join()
        scheduler.stop()


def test_runs_waiting_for_a_slot_are_not_declared_dead_while_their_process_lives(
        database: Database, make_tenant: Callable[..., str]) -> None:
    # Lease = 100 ms timeout + 1 s margin; one slot; each run takes 0.4 s, so claimed runs wait
    # several leases in the queue. A second, live process claims whatever is due meanwhile.
    clock = SystemClock()
    store = SqlStore(database, EveryRules(), lease_margin_s=1.0)
    other = SqlStore(database, EveryRules(), lease_margin_s=1.0)
    world = World(database, make_tenant(), clock, store, None)  # type: ignore[arg-type]
    script = world.add_script(timeout_ms=100)
    for i in range(10):
        world.put_job(f"job-{i}", script, clock.now())
    scheduler = Scheduler(store, FunctionRunner(lambda *_: time.sleep(0.4)), clock, lambda: [world.tenant],
                          workers=1)
    _drain_beside_a_second_process(scheduler, other, clock, [world.tenant], lambda: _jobs_done(world, 10))
    runs = world.runs()
    assert [r.reason for r in runs if "lease" in (r.reason or "")] == []
    assert sorted(r.job_key for r in runs) == sorted(f"job-{i}" for i in range(10))  # once each
    assert {r.status for r in runs} == {"succeeded"}


def test_a_quiet_tenants_run_starts_ahead_of_a_noisy_tenants_backlog(
        database: Database, make_tenant: Callable[..., str]) -> None:
    clock = SystemClock()
    store = SqlStore(database, EveryRules(), lease_margin_s=60)
    noisy = World(database, make_tenant(), clock, store, None)  # type: ignore[arg-type]
    quiet = World(database, make_tenant(), clock, store, None)  # type: ignore[arg-type]
    starts: list[tuple[str, float]] = []
    lock = threading.Lock()

    def script(source: str, event: dict[str, Any], caps: Any) -> None:
        with lock:
            starts.append((event["jobKey"], time.monotonic()))
        time.sleep(0.05)

    now = clock.now()
    script_id = noisy.add_script()
    for i in range(120):
        noisy.put_job(f"noisy-{i}", script_id, now)
    due_in = 0.6
    quiet.put_job("quiet", quiet.add_script(), now + timedelta(seconds=due_in))
    due_at = time.monotonic() + due_in
    scheduler = Scheduler(store, FunctionRunner(script), clock, lambda: [noisy.tenant, quiet.tenant],
                          workers=2)  # tenant_max_share: the default one half
    scheduler.start()
    try:
        _await(lambda: _jobs_done(quiet, 1) and _jobs_done(noisy, 120))
    finally:
        scheduler.stop()
    (quiet_start,) = [at for key, at in starts if key == "quiet"]
    # Noisy runs started after the quiet one fell due and before it started: with the two slots
    # shared round robin, at most the one slot the noisy tenant keeps and a run in hand-over.
    overtaking = [key for key, at in starts if due_at <= at < quiet_start]
    assert len(overtaking) <= 3, overtaking
    assert len(noisy.runs(status="succeeded")) == 120


def test_a_runs_recorded_start_is_when_its_script_started(world: World) -> None:
    """The runner ran the script for `duration_ms` before calling back: the run started then, not at hand-over."""
    script = world.add_script()
    world.put_job("j", script, world.clock.now())
    handed: list[Callable[[object], None]] = []

    class Queueing:
        processes = 1

        def run(self, *args: object) -> object:
            raise AssertionError("the scheduler must use submit")

        def submit(self, request: object, caps: object, done: Callable[[object], None]) -> None:
            handed.append(done)

    scheduler = Scheduler(world.store, Queueing(), world.clock, lambda: [world.tenant],  # type: ignore[arg-type]
                          workers=4, metrics=world.scheduler.metrics)
    handed_at = world.clock.now()
    scheduler._claim(world.tenant, handed_at)
    assert len(handed) == 1
    world.clock.advance(seconds=5)  # it waited 4.75 s in the runner's queue, then ran 250 ms
    handed[0](RunResult("succeeded", duration_ms=250))
    scheduler.recorder.record_done([scheduler.recorder._finished.get_nowait()])
    (run,) = world.runs()
    assert run.status == "succeeded"
    assert run.started_at == handed_at + timedelta(seconds=4.75)
    assert run.duration_ms == 250


def test_waiting_runs_of_several_tenants_keep_their_leases(
        database: Database, make_tenant: Callable[..., str]) -> None:
    """Run ids repeat across tenants (each counts from 1): every tenant's waiting claims are renewed."""
    clock = SystemClock()
    store = SqlStore(database, EveryRules(), lease_margin_s=1.0)
    other = SqlStore(database, EveryRules(), lease_margin_s=1.0)
    worlds = [World(database, make_tenant(), clock, store, None) for _ in range(3)]  # type: ignore[arg-type]
    for world in worlds:
        script = world.add_script(timeout_ms=100)
        for i in range(8):
            world.put_job(f"job-{i}", script, clock.now())
    scheduler = Scheduler(store, FunctionRunner(lambda *_: time.sleep(0.4)), clock,
                          lambda: [w.tenant for w in worlds], workers=2)
    _drain_beside_a_second_process(scheduler, other, clock, [w.tenant for w in worlds],
                                   lambda: all(_jobs_done(w, 8) for w in worlds))
    for world in worlds:
        assert [r.reason for r in world.runs() if "lease" in (r.reason or "")] == []
        assert sorted(r.job_key for r in world.runs()) == [f"job-{i}" for i in range(8)]
