"""a run's buffered effects are applied with its finish, after the tenant's
quotas are checked again, exactly, in the transaction that records it."""

from __future__ import annotations

from almanac.platform.store import quotas
from almanac.sandbox.contract import Effects, RunResult
from tests.integration.platform.scheduler_world import World


def _claims(world: World, *keys: str) -> dict:
    script = world.add_script()
    for key in keys:
        world.put_job(key, script, world.clock.now(), max_attempts=3)
    return {c.job_key: c for c in world.store.claim_due(world.tenant, world.clock.now(), 10).claims}


def _limit(world: World, **changes: int) -> None:
    with world.db.shared_session() as s:
        quotas.set_quotas(s, world.tenant, changes, world.clock.now())


def test_runs_that_each_fit_alone_are_charged_together_at_apply(world: World) -> None:
    """Two runs each saw room for one more key (their scripts' check passed); one transaction records
    both: the first applies, the second is recorded failed with the quota's message, applies nothing
    and is not retried."""
    claims = _claims(world, "a", "b")
    _limit(world, kv_keys=1)
    now = world.clock.now()
    applied = world.store.finish_many([
        (claims["a"], RunResult("succeeded", effects=Effects(kv={"from-a": "1"}, events=(("t", "1"),))), now, now),
        (claims["b"], RunResult("succeeded", effects=Effects(kv={"from-b": "1"}, events=(("t", "2"),))), now, now),
    ])
    assert applied == [True, True]
    runs = {r.job_key: r for r in world.runs()}
    assert runs["a"].status == "succeeded"
    assert runs["b"].status == "failed" and "quota_exceeded" in runs["b"].error and "1 kv keys" in runs["b"].error
    assert "not retried" in runs["b"].reason
    assert world.store.kv_read(world.tenant, "from-a") == 1 and world.store.kv_read(world.tenant, "from-b") is None
    assert world.job("b").state == "done"  # not retried: trying again cannot help
    from sqlalchemy import select

    from almanac.platform.store.models import Event

    with world.session() as s:
        # b's own event was not stored (only the platform's almanac.run.failed for it)
        assert [row.data for row in s.execute(select(Event.data).where(Event.topic == "t"))] == ["1"]


def test_replacing_and_deleting_keys_is_charged_by_what_changes(world: World) -> None:
    claims = _claims(world, "a")
    with world.session() as s:
        from almanac.platform.store.models import KV

        s.add(KV(key="old", value='"x"', updated_at=world.clock.now()))
    _limit(world, kv_keys=1)
    now = world.clock.now()
    # Deleting the one key and writing another keeps the count at 1: allowed.
    result = RunResult("succeeded", effects=Effects(kv={"old": None, "new": '"y"'}))
    assert world.store.finish(claims["a"], result, now, now) is True
    assert world.runs()[0].status == "succeeded"
    assert world.store.kv_read(world.tenant, "old") is None and world.store.kv_read(world.tenant, "new") == "y"


def test_pending_jobs_quota_is_checked_at_apply(world: World) -> None:
    claims = _claims(world, "a")
    _limit(world, pending_jobs=1)  # the claimed job is still pending while its run is recorded
    now = world.clock.now()
    plan = Effects(jobs={"later": ("2026-12-01T09:00:00Z", "null")})
    assert world.store.finish(claims["a"], RunResult("succeeded", effects=plan), now, now) is True
    (run,) = world.runs()
    assert run.status == "failed" and "pending jobs" in run.error
