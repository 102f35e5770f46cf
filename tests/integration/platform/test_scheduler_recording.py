"""Whatever fails while recording a run, the run ends in a final status with a reason (SPEC section 9)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.integration.platform.scheduler_world import World


def _throws_surrogate(source: str, event: dict[str, Any], caps: Any) -> Any:
    raise RuntimeError("bad \ud800 text")


def _writes_surrogate_key(source: str, event: dict[str, Any], caps: Any) -> Any:
    caps.kv_set("key \udfff", 1)
    return {"ok": True}


@pytest.mark.parametrize("behaviour", [_throws_surrogate, _writes_surrogate_key], ids=["error", "kv-key"])
def test_a_run_whose_record_fails_still_ends_with_a_reason(world: World, behaviour: Any) -> None:
    world.behaviour = behaviour
    world.put_job("j", world.add_script(), world.clock.now(), max_attempts=3)
    world.tick()
    (run,) = world.runs()
    assert run.status == "failed" and run.finished_at is not None
    assert "could not be recorded" in run.reason
    (occurrence,) = world.occurrences()
    assert occurrence.status == "done"  # not retried: the same result would fail the same way
    assert world.job("j").state == "done"


def test_the_background_recorder_ends_such_a_run_too(world: World) -> None:
    world.behaviour = _throws_surrogate
    world.put_job("j", world.add_script(), world.clock.now(), max_attempts=1)
    batch = world.store.claim_due(world.tenant, world.clock.now(), 10)
    (claim,) = batch.claims
    done = world.scheduler._run(claim)
    world.scheduler._record([done])
    (run,) = world.runs()
    assert run.status == "failed" and "could not be recorded" in run.reason
