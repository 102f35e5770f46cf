"""A chain of follow-up jobs holds at most 100 jobs from whatever run started it (SPEC section 8).

A job's run extends its job's chain; any other run (a manual run, a schedule's occurrence) is the
root of a chain of its own, keyed by the run (`run:<id>`). Both are bounded the same way, by the
check inside the script and again, exactly, in the transaction that records the run.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, select

from almanac.platform.decisions import policies
from almanac.platform.store.models import Job
from tests.integration.platform.scheduler_world import World
from tests.integration.platform.conftest import on_both_paths

world_path = on_both_paths  # recorded as production records on each backend

FAN_OUT = 20  # follow-ups each run plans: under the per-run limit, so only the chain limit can stop them


def _fan_out(world: World, levels: int) -> Any:
    """Each run plans FAN_OUT follow-ups one second later, down to `levels` levels below its root."""

    def script(source: str, event: dict[str, Any], caps: Any) -> None:
        level = (event["payload"] or {}).get("level", 0)
        if level >= levels:
            return
        at = (world.clock.now() + timedelta(seconds=1)).isoformat()
        name = event["jobKey"] or f"r{event['runId']}"
        for i in range(FAN_OUT):
            caps.schedule_at(at, {"level": level + 1}, f"{name}.{i}")

    return script


def _drain(world: World) -> None:
    for _ in range(30):
        world.clock.advance(seconds=60)  # everything planned is due, past every retry's backoff
        while world.tick():
            pass
        if world.store.backlog(world.tenant, world.clock.now()) == 0:
            return


def _chains(world: World) -> dict[str, int]:
    with world.session() as s:
        return dict(s.execute(select(Job.root_key, func.count()).group_by(Job.root_key)).all())


def test_a_manual_runs_follow_ups_are_one_chain_of_at_most_100_jobs(world: World) -> None:
    world.behaviour = _fan_out(world, levels=2)
    script_id = world.add_script()
    claim = world.store.claim_manual(world.tenant, script_id, None, world.clock.now())
    world.scheduler.run_claim(claim)
    _drain(world)
    root = f"run:{claim.run_id}"
    # 20 from the manual run, then 20 from each of four of them: the fifth would be the 101st and more.
    assert _chains(world) == {root: policies.MAX_FOLLOW_UPS}
    assert world.job(f"r{claim.run_id}.0").depth == 1 and world.job(f"r{claim.run_id}.0.0").depth == 2
    refused = world.runs(status="failed")
    assert len(refused) == FAN_OUT - 4 and all("chain" in r.error for r in refused)


def test_a_schedules_occurrence_roots_a_chain_of_its_own(world: World) -> None:
    world.behaviour = _fan_out(world, levels=2)
    sid = world.add_schedule(world.add_script(), every=3600)
    world.clock.set(world.schedule(sid).next_run_at)
    (claim,) = world.tick()
    _drain(world)
    assert _chains(world) == {f"run:{claim.run_id}": policies.MAX_FOLLOW_UPS}


def test_the_chain_is_counted_again_when_the_run_is_recorded(world: World) -> None:
    # Two runs of one chain run side by side: each saw room for its three follow-ups in what was
    # committed when it ran, but together they would pass the limit; the one recorded second is refused.
    def plan_three(source: str, event: dict[str, Any], caps: Any) -> None:
        for i in range(3):
            caps.schedule_at(world.clock.now().isoformat(), None, f"{event['jobKey']}.{i}")

    world.behaviour = plan_three
    script_id = world.add_script()
    world.put_job("root", script_id, world.clock.now() + timedelta(days=1))
    with world.session() as s:
        for i in range(policies.MAX_FOLLOW_UPS - 8):  # with the root, a and b: 95 jobs
            s.add(Job(key=f"filler.{i}", script_id=script_id, run_at=world.clock.now() + timedelta(days=1),
                      payload="null", max_attempts=1, priority=0, state="done", root_key="root", depth=1,
                      created_at=world.clock.now(), updated_at=world.clock.now()))
    for key in ("a", "b"):
        world.put_job(key, script_id, world.clock.now(), max_attempts=1)
    with world.session() as s:
        s.execute(Job.__table__.update().where(Job.key.in_(["a", "b"])).values(root_key="root", depth=1))
    batch = world.store.claim_due(world.tenant, world.clock.now(), 10)
    assert len(batch.claims) == 2
    finished = [world.scheduler._run(claim) for claim in batch.claims]  # both ran before either is recorded
    for done in finished:
        world.store.finish(done.claim, done.result, done.started, done.finished_at)
    assert _chains(world)["root"] == 95 + 3
    (refused,) = world.runs(status="failed")
    assert "chain" in refused.error and "not retried" in refused.reason
