"""Every policy through the real store, with a manual clock: misfire, overlap, expiry,
retries, priority, pause / resume / trigger, rule changes, jobs by key, atomic effects."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tests.integration.platform.scheduler_world import World

from almanac.platform.store import planning
from almanac.sandbox.capabilities import CapabilityError
from almanac.platform.store.models import Schedule
from tests.integration.platform.conftest import on_both_paths

world_path = on_both_paths  # every policy through the claim production runs on each backend


def _down_for(world: World, sid: int, minutes: int, extra_s: int = 1):
    first = world.schedule(sid).next_run_at
    world.clock.set(first + timedelta(minutes=minutes, seconds=extra_s))
    return first


def _drain(world: World) -> None:
    for _ in range(50):
        if not world.tick() and world.store.backlog(world.tenant, world.clock.now()) == 0:
            return


def test_misfire_run_once_runs_the_latest_and_records_the_rest_skipped(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60, misfire="run_once")
    first = _down_for(world, sid, 10)
    _drain(world)
    ran = world.runs(status="succeeded")
    # 09:00-09:09 were missed: one catch-up run (the latest missed); 09:10 is 1 s late, on time.
    assert [r.scheduled_for for r in ran] == [first + timedelta(minutes=m) for m in (9, 10)]
    assert [r.trigger for r in ran] == ["catchup", "catchup"]
    assert len(world.runs(status="skipped")) == 9
    assert world.schedule(sid).next_run_at == first + timedelta(minutes=11)


def test_misfire_run_all_runs_each_in_order(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60, misfire="run_all")
    first = _down_for(world, sid, 4)
    _drain(world)
    assert [r.scheduled_for for r in world.runs(status="succeeded")] == [first + timedelta(minutes=m) for m in range(5)]
    assert [c["scheduledFor"] for c in world.calls] == sorted(c["scheduledFor"] for c in world.calls)


def test_misfire_skip_runs_nothing_missed(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60, misfire="skip")
    first = _down_for(world, sid, 5, extra_s=30)
    _drain(world)
    # 09:05 is 30 s late: within MISFIRE_GRACE_S, merely late, so it runs; the five before were missed.
    assert [r.scheduled_for for r in world.runs(status="succeeded")] == [first + timedelta(minutes=5)]
    assert len(world.runs(status="skipped")) == 5


@pytest.mark.parametrize(("misfire", "succeeded", "skipped"), [
    ("skip", [12], [2, 4, 6, 8, 10]), ("run_once", [10, 12], [2, 4, 6, 8]),
], ids=["skip", "run_once"])
def test_misfire_applies_to_a_frequent_schedule(world: World, misfire: str, succeeded: list[int],
                                                skipped: list[int]) -> None:
    # A 2-second schedule after a 10 s outage: 2..10 s were overtaken by their next occurrence.
    sid = world.add_schedule(world.add_script(), every=2, misfire=misfire)
    first = world.schedule(sid).next_run_at
    world.clock.set(first + timedelta(seconds=10))
    _drain(world)
    at = [first + timedelta(seconds=s - 2) for s in succeeded]
    assert [r.scheduled_for for r in world.runs(status="succeeded")] == at
    assert sorted(r.scheduled_for for r in world.runs(status="skipped")) == [
        first + timedelta(seconds=s - 2) for s in skipped]
    assert all("misfire=" + misfire in r.reason for r in world.runs(status="skipped"))


def test_occurrences_older_than_the_catchup_window_are_expired(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60, misfire="run_all", catchup_window_s=180)
    _down_for(world, sid, 10)
    _drain(world)
    assert len(world.runs(status="expired")) == 8
    assert len(world.runs(status="succeeded")) == 3
    assert all("catchup_window_s" in r.reason for r in world.runs(status="expired"))


def _hold_a_run(world: World, sid: int):
    world.clock.set(world.schedule(sid).next_run_at)
    (held,) = world.claim(10)
    world.clock.advance(60)
    return held


def test_overlap_skip_records_skipped(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60, overlap="skip")
    _hold_a_run(world, sid)
    assert world.tick() == []
    (skipped,) = world.runs(status="skipped")
    assert skipped.reason == "the previous run was still running"


def test_overlap_queue_runs_after_the_previous_finishes(world: World) -> None:
    from almanac.sandbox.contract import RunResult

    sid = world.add_schedule(world.add_script(), every=60, overlap="queue")
    held = _hold_a_run(world, sid)
    assert world.tick() == []
    assert [o.status for o in world.occurrences(schedule_id=sid)][:2] == ["running", "queued"]
    world.store.finish(held, RunResult("succeeded"), world.clock.now(), world.clock.now())
    (claim,) = world.tick()
    assert claim.scheduled_for == held.scheduled_for + timedelta(seconds=60)


def test_overlap_queue_waits_at_most_until_the_blockers_lease_lapses(world: World) -> None:
    from almanac.sandbox.contract import RunResult

    sid = world.add_schedule(world.add_script(timeout_ms=1000), every=60, overlap="queue")
    held = _hold_a_run(world, sid)
    assert world.tick() == []  # queued behind a run that is still leased
    world.clock.set(held.lease_until + timedelta(seconds=1))
    (retry,) = world.claim(10)
    assert retry.attempt == 2 and retry.occurrence_id == held.occurrence_id  # the dead one, retried
    world.store.finish(retry, RunResult("succeeded"), world.clock.now(), world.clock.now())
    (queued,) = world.tick()  # the queued one waited for the retry too
    assert queued.scheduled_for == held.scheduled_for + timedelta(seconds=60)


def test_overlap_allow_runs_alongside(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60, overlap="allow")
    _hold_a_run(world, sid)
    assert len(world.tick()) == 1


def test_expire_after(world: World) -> None:
    script = world.add_script()
    world.put_job("late", script, world.clock.now(), expire_after_s=30)
    world.clock.advance(31)
    assert world.tick() == []
    (run,) = world.runs()
    assert run.status == "expired" and world.job("late").state == "done"


def test_failed_runs_are_retried_with_doubling_backoff(world: World) -> None:
    def boom(source, event, caps):
        raise RuntimeError("nope")

    world.behaviour = boom
    world.put_job("flaky", world.add_script(), world.clock.now(), max_attempts=3)
    assert len(world.tick()) == 1
    world.clock.advance(9)
    assert world.tick() == []
    world.clock.advance(1)
    assert world.tick()[0].attempt == 2
    world.clock.advance(19)
    assert world.tick() == []
    world.clock.advance(1)
    assert world.tick()[0].attempt == 3
    world.clock.advance(3600)
    assert world.tick() == []
    runs = world.runs()
    assert [r.status for r in runs] == ["failed"] * 3
    assert "retry 2 of 3" in runs[0].reason and "retry" not in runs[2].reason
    assert runs[0].error == "RuntimeError: nope"
    assert world.job("flaky").state == "done"


def test_priority_among_occurrences_due_together(world: World) -> None:
    script = world.add_script()
    now = world.clock.now()
    for key, prio in (("low", 0), ("high", 9), ("mid", 5)):
        world.put_job(key, script, now, priority=prio)
    order = [world.claim(1)[0].job_key for _ in range(3)]
    assert order == ["high", "mid", "low"]


def test_pause_resume_and_trigger(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60)
    with world.session() as s:
        sch = s.get(Schedule, sid)
        sch.enabled = False
        planning.replan_schedule(s, sch, world.clock.now(), world.store.rules)
    world.clock.advance(600)
    assert world.tick() == [] and world.occurrences(status="planned") == []
    with world.session() as s:
        sch = s.get(Schedule, sid)
        sch.enabled = True
        planning.replan_schedule(s, sch, world.clock.now(), world.store.rules)
        planning.trigger_now(s, sch, world.clock.now())
    (claim,) = world.tick()
    assert claim.trigger == "trigger" and world.schedule(sid).next_run_at > world.clock.now()


def test_a_rule_change_replaces_planned_occurrences(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60)
    with world.session() as s:
        sch = s.get(Schedule, sid)
        sch.rrule, sch.version = "EVERY 3600", sch.version + 1
        planning.replan_schedule(s, sch, world.clock.now(), world.store.rules)
    (occ,) = world.occurrences(status="planned")
    assert occ.schedule_version == 2 and occ.scheduled_for.minute == 0


def test_an_occurrence_of_an_old_version_is_dropped_not_run(world: World) -> None:
    sid = world.add_schedule(world.add_script(), every=60)
    with world.session() as s:
        s.get(Schedule, sid).version += 1  # changed by another process that has not replanned yet
    world.clock.advance(120)
    assert world.tick() == [] and world.runs() == []


def test_job_upsert_by_key(world: World) -> None:
    script = world.add_script()
    now = world.clock.now()
    world.put_job("k", script, now + timedelta(hours=1), payload={"v": 1})
    world.put_job("k", script, now + timedelta(hours=2), payload={"v": 2})
    (occ,) = world.occurrences(status="planned")
    assert occ.scheduled_for == now + timedelta(hours=2)
    world.clock.advance(hours=2)
    world.tick()
    assert world.calls[-1]["payload"] == {"v": 2} and world.calls[-1]["jobKey"] == "k"
    world.put_job("k", script, now + timedelta(hours=2), payload={"v": 3})  # same time: ran already
    assert world.tick() == [] and world.job("k").state == "done"
    world.put_job("k", script, now + timedelta(hours=3))  # new time: runs again
    world.clock.advance(hours=1)
    assert len(world.tick()) == 1


def test_cancelled_job_does_not_run(world: World) -> None:
    script = world.add_script()
    world.put_job("k", script, world.clock.now())
    with world.session() as s:
        from sqlalchemy import select

        from almanac.platform.store.models import Job

        planning.cancel_job(s, s.execute(select(Job).where(Job.key == "k")).scalar_one(), world.clock.now())
    assert world.tick() == [] and world.job("k").state == "cancelled"


def test_effects_apply_only_when_the_run_succeeds(world: World) -> None:
    def script(source, event, caps):
        caps.kv_set("count", (caps.kv_get("count") or 0) + 1)
        assert caps.kv_get("count") >= 1  # reads see the run's own writes
        caps.emit("counted", {"n": 1})
        caps.schedule_at("2026-11-22T09:00:00Z", {"again": True}, "follow")
        if event["payload"] == "fail":
            raise ValueError("after the effects")
        return caps.kv_list("")

    world.behaviour = script
    script_id = world.add_script()
    world.put_job("bad", script_id, world.clock.now(), payload="fail", max_attempts=1)
    world.tick()
    assert world.store.kv_read(world.tenant, "count") is None
    world.put_job("good", script_id, world.clock.now(), payload="ok")
    world.tick()
    assert world.store.kv_read(world.tenant, "count") == 1
    follow = world.job("follow")
    assert (follow.root_key, follow.depth, follow.state) == ("good", 1, "pending")
    good_run = world.runs(job_key="good")[0]
    assert good_run.output == '["count"]'


def test_a_chain_holds_at_most_100_jobs_in_all_and_a_refused_run_is_not_retried(world: World) -> None:
    # Each run plans 10 follow-ups: counting depth let this reach 1,110 jobs in three levels.
    def fan_out(source, event, caps):
        at = (world.clock.now() + timedelta(seconds=1)).isoformat()
        for i in range(10):
            caps.schedule_at(at, None, f"{event['jobKey']}.{i}")

    world.behaviour = fan_out
    world.put_job("root", world.add_script(), world.clock.now(), max_attempts=3)
    for _ in range(4):
        _drain(world)
        world.clock.advance(seconds=60)  # past every retry's backoff
    with world.session() as s:
        from sqlalchemy import func, select

        from almanac.platform.store.models import Job

        # root + 10 + 8 x 10: the ninth run's tenth follow-up would be the 101st, so that run fails
        # and, all or nothing, plans none of its ten; so does every later one.
        assert s.execute(select(func.count()).select_from(Job).where(Job.root_key == "root")).scalar_one() == 91
    refused = world.runs(status="failed")
    assert refused and all("chain" in r.error and "not retried" in r.reason for r in refused)
    assert {r.attempt for r in world.runs()} == {1}


def test_capability_errors() -> None:
    from datetime import datetime, timezone

    from almanac.platform.store.run_effects import TenantReads
    from almanac.platform.runner import _Calls
    from almanac.sandbox.effects import RunBuffer

    class Chain:  # a job's run whose chain holds 100 jobs already
        def chain_keys(self, tenant: str, root: str) -> set[str]:
            return {f"j{i}" for i in range(100)}

    reads = TenantReads(Chain(), "t", now=datetime(2026, 1, 1, tzinfo=timezone.utc), job_root="root")
    caps = _Calls(RunBuffer(reads), 64 * 1024)  # the registry's checks, then the run's buffer
    for call in (
        lambda: caps.kv_set("x" * 513, 1),
        lambda: caps.kv_set("k", "x" * 70_000),
        lambda: caps.kv_set("k", float("nan")),
        lambda: caps.schedule_at("tomorrow", None),
        lambda: caps.schedule_at("2026-01-02T00:00:00", None),
        lambda: caps.schedule_at("2028-01-02T00:00:00Z", None),
        lambda: caps.emit("", None),
        lambda: caps.schedule_at("2026-01-02T00:00:00Z", None, "one-more"),  # the chain holds 100 already
    ):
        with pytest.raises(CapabilityError):
            call()
