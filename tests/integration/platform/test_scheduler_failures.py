"""pause_after_failures and the platform events (SPEC section 7), through the real store and outbox."""

from __future__ import annotations

import json
from sqlalchemy import select
from tests.integration.platform.scheduler_world import World

from almanac.delivery import fanout
from almanac.delivery.models import Delivery, Target
from almanac.platform.service import resources as service
from almanac.platform.store.models import Event
from tests.integration.platform.conftest import on_both_paths

world_path = on_both_paths  # every policy through the claim production runs on each backend


def _fail(source, event, caps):
    raise RuntimeError("boom")


def _events(world: World) -> list[tuple[str, dict]]:
    with world.session() as s:
        return [(e.topic, json.loads(e.data)) for e in s.execute(select(Event).order_by(Event.id)).scalars()]


def test_a_schedule_pauses_itself_after_failures_in_row_and_says_so(world: World) -> None:
    with world.session() as s:
        for name, topics in (("platform", ["almanac.*"]), ("orders", ["order.*"])):
            s.add(Target(kind="webhook", name=name, url="https://hooks.example.com/x", secret="whsec_x",
                         topics=json.dumps(topics), enabled=True, created_at=world.clock.now(),
                         updated_at=world.clock.now()))
    sid = world.add_schedule(world.add_script(), every=60, max_attempts=1, pause_after_failures=3)
    world.behaviour = _fail
    for _ in range(2):
        world.clock.set(world.schedule(sid).next_run_at)
        world.tick()
    world.behaviour = None  # a success resets the count
    world.clock.set(world.schedule(sid).next_run_at)
    world.tick()
    assert world.schedule(sid).failures_in_row == 0 and world.schedule(sid).enabled
    world.behaviour = _fail
    for _ in range(3):
        world.clock.set(world.schedule(sid).next_run_at)
        world.tick()
    sch = world.schedule(sid)
    assert not sch.enabled and sch.next_run_at is None
    assert "3 failed runs in a row" in sch.paused_reason
    assert [o.status for o in world.occurrences(schedule_id=sid) if o.status != "done"] == []
    topics = [topic for topic, _ in _events(world)]
    assert topics == ["almanac.run.failed"] * 5 + ["almanac.schedule.paused"]
    failed = _events(world)[0][1]
    assert failed["schedule_id"] == sid and failed["status"] == "failed" and "boom" in failed["error"]
    with world.session() as s:
        fanout.fan_out(s, now=world.clock.now(), limit=100)
    with world.session() as s:
        deliveries = s.execute(select(Delivery)).scalars().all()
    assert len(deliveries) == 6  # each event to the target that subscribes to almanac.*, none to order.*
    # Resuming counts afresh and clears the reason.
    with world.session() as s:
        service.set_enabled(s, world.store.rules, sid, True, world.clock.now())
    assert world.schedule(sid).paused_reason is None and world.schedule(sid).failures_in_row == 0


def test_a_retried_failure_is_not_yet_a_failure_in_row(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60, max_attempts=2, pause_after_failures=1)
    world.behaviour = _fail
    world.clock.set(world.schedule(sid).next_run_at)
    world.tick()
    assert world.schedule(sid).enabled and _events(world) == []  # attempt 1 of 2: a retry is planned
    world.clock.advance(seconds=30)
    world.tick()
    assert not world.schedule(sid).enabled
    assert [t for t, _ in _events(world)] == ["almanac.run.failed", "almanac.schedule.paused"]


def test_a_lapsed_last_attempt_is_a_failure_in_row_with_its_event(world: World) -> None:
    """A process that died mid-run fails the run as surely as a throw: it counts and it is announced."""
    from datetime import timedelta

    sid = world.add_schedule(world.add_script(), every=60, max_attempts=1, pause_after_failures=1)
    world.clock.set(world.schedule(sid).next_run_at)
    (claim,) = world.claim(10)  # its process then dies
    world.clock.set(claim.lease_until + timedelta(seconds=1))
    world.claim(10)
    sch = world.schedule(sid)
    assert not sch.enabled and "1 failed run in a row" in sch.paused_reason
    events = _events(world)
    assert [t for t, _ in events] == ["almanac.run.failed", "almanac.schedule.paused"]
    failed = events[0][1]
    assert failed["status"] == "failed" and "lease lapsed" in failed["error"]
    assert failed["run_id"] == world.runs()[0].id and failed["attempt"] == 1


def test_a_lapsed_attempt_that_is_retried_is_not_yet_a_failure(world: World) -> None:
    from datetime import timedelta

    sid = world.add_schedule(world.add_script(), every=60, max_attempts=2, pause_after_failures=1)
    world.clock.set(world.schedule(sid).next_run_at)
    (claim,) = world.claim(10)
    world.clock.set(claim.lease_until + timedelta(seconds=1))
    world.claim(10)
    assert world.schedule(sid).enabled and _events(world) == []
