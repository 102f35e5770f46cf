"""The claim contract (`timer.claim_paths.ClaimPath`): each promise, held by both implementations.

Every test runs through `PerTenant` and, on PostgreSQL, through `AcrossTenants` (the path that
`almanac worker` runs there), on real databases. A second `SqlStore` on the same database stands
for a second process. The policy suites (misfire, overlap, retries, expiry, quotas, follow-ups)
run through both paths too (`world_path = on_both_paths` in their modules).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from almanac.db import Database
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.claim_paths import AcrossTenants, ClaimPath, Pace, PerTenant
from almanac.sandbox.contract import RunResult
from tests.integration.platform.conftest import on_both_paths
from tests.integration.platform.scheduler_world import EveryRules, World

world_path = on_both_paths  # every test on both paths

DONE = RunResult("succeeded", output=None)


def _jobs(world: World, count: int) -> None:
    sid = world.add_script()
    for i in range(count):
        world.put_job(f"j{i}", sid, world.clock.now())


@pytest.fixture
def other(world: World) -> Iterator[ClaimPath]:
    """The same kind of claim path as `world`'s, on a database engine and store of its own: another process."""
    store = SqlStore(Database(world.db.settings), EveryRules(), lease_margin_s=world.store.lease_margin_s)
    idle = timedelta(seconds=5)
    if isinstance(world.scheduler.path, AcrossTenants):
        assert store.due_index is not None
        yield AcrossTenants(store.due_index, store, idle=idle)
    else:
        yield PerTenant(store, lambda: [world.tenant], idle=idle, tenants_every=idle)
    store.db.dispose()


def test_a_claim_never_takes_an_occurrence_another_claim_holds(world: World, other: ClaimPath) -> None:
    _jobs(world, 40)
    now, got = world.clock.now(), {}
    start = threading.Barrier(2, timeout=30)

    def claim(name: str, path: ClaimPath) -> None:
        start.wait()
        got[name] = [c for _ in range(10) for c in path.claim(world.tenant, now, 4, 1.0).claims]

    threads = [threading.Thread(target=claim, args=(n, p)) for n, p in (("a", world.scheduler.path), ("b", other))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    occurrences = [c.occurrence_id for claims in got.values() for c in claims]
    assert len(occurrences) == 40 and len(set(occurrences)) == 40  # every one claimed, none twice


def test_a_claim_plans_the_next_occurrence_in_its_transaction(world: World) -> None:
    sid = world.add_script()
    world.add_schedule(sid, every=60)
    world.clock.advance(seconds=61)
    (claim,) = world.scheduler.path.claim(world.tenant, world.clock.now(), 10, 1.0).claims
    planned = world.occurrences(schedule_id=claim.schedule_id, status="planned")
    assert [o.scheduled_for for o in planned] == [claim.scheduled_for + timedelta(seconds=60)]


def test_renew_names_the_claims_another_process_took_over(world: World, other: ClaimPath) -> None:
    _jobs(world, 2)
    path = world.scheduler.path
    claims = path.claim(world.tenant, world.clock.now(), 10, 1.0).claims
    assert path.renew(claims, world.clock.now()) == set()
    world.clock.advance(seconds=3600)  # this process was paused past its leases: another took them over
    taken = other.claim(world.tenant, world.clock.now(), 10, 1.0).claims
    assert len(taken) == 2
    assert path.renew(claims, world.clock.now()) == {(c.tenant, c.run_id) for c in claims}


def test_record_applies_a_held_attempt_and_refuses_a_lost_one(world: World, other: ClaimPath) -> None:
    _jobs(world, 2)
    path = world.scheduler.path
    held, lost = path.claim(world.tenant, world.clock.now(), 10, 1.0).claims
    world.clock.advance(seconds=3600)
    other.claim(world.tenant, world.clock.now(), 1, 1.0)  # takes over one of them (the lost one: oldest first)
    now = world.clock.now()
    applied = path.record([(held, DONE, now, now), (lost, DONE, now, now)])
    assert sorted(applied, key=lambda ok: ok is True) == [False, True]


def test_next_look_is_no_later_than_the_next_due_occurrence(world: World) -> None:
    sid = world.add_script()
    world.put_job("later", sid, world.clock.now() + timedelta(seconds=2))
    path, now = world.scheduler.path, world.clock.now()
    path.claimed(world.tenant, path.claim(world.tenant, now, 10, 1.0), now)  # nothing due yet
    at, _ = path.next_look(now)
    assert now <= at <= now + timedelta(seconds=2)


def test_room_comes_back_once_runs_are_recorded(world: World) -> None:
    _jobs(world, 8)
    timer, path = world.scheduler, world.scheduler.path
    claims = path.claim(world.tenant, world.clock.now(), 100, 1.0).claims
    timer._hold(claims, queue=False)
    with timer._cond:
        timer._inflight += 10 * timer.capacity  # a process holding far more than it may
        assert path.room(world.tenant, timer) <= 0
        path.starved(world.tenant, world.clock.now())
        assert not path.room_back(timer, world.clock.now())
        timer._inflight -= 10 * timer.capacity
        timer._woken = False
    timer._release(claims, recorded=False)  # the runs were recorded: their room is back
    with timer._cond:
        assert path.room(world.tenant, timer) > 0 and timer._woken  # the claim loop was woken


def test_capacity_grows_with_the_run_slots(world: World) -> None:
    path = world.scheduler.path
    small, large = Pace(2, 2, 0.05, None), Pace(20, 20, 0.05, None)
    assert 2 <= path.capacity(small) < path.capacity(large)
