"""Whatever fails while recording a run, the run ends in a final status with a reason (SPEC section 9)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from tests.integration.platform.scheduler_world import World
from tests.integration.platform.conftest import on_both_paths

world_path = on_both_paths  # through the claim and record production runs on each backend


def _succeeds(source: str, event: dict[str, Any], caps: Any) -> Any:
    caps.kv_set("seen", 1)
    return {"ok": True}


@pytest.fixture
def refusing_database(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's finishing transaction fails, as a constraint, a full disk or a value the driver refuses would.

    (The first reproduction used lone surrogates in an error or a kv key; the text and JSON boundary of
    the API now refuses those before they reach a row, so the failure is injected here instead.)
    """
    finish_many = world.store.finish_many

    def refusing_results(items: Any) -> Any:
        if any("could not be recorded" not in (outcome.reason or "") for _, outcome, _, _ in items):
            raise OperationalError("UPDATE runs SET ...", {}, Exception("the database refused the row"))
        return finish_many(items)  # the plain fallback record goes through

    monkeypatch.setattr(world.store, "finish_many", refusing_results)
    index = world.store.due_index
    if index is not None:  # PostgreSQL: the record across tenants fails the same way
        finish_across = index.finish_across

        def refusing_across(items: Any) -> Any:
            if any("could not be recorded" not in (outcome.reason or "") for _, outcome, _, _ in items):
                raise OperationalError("UPDATE runs SET ...", {}, Exception("the database refused the row"))
            return finish_across(items)

        monkeypatch.setattr(index, "finish_across", refusing_across)


@pytest.mark.usefixtures("refusing_database")
def test_a_run_whose_record_fails_still_ends_with_a_reason(world: World) -> None:
    world.behaviour = _succeeds
    world.put_job("j", world.add_script(), world.clock.now(), max_attempts=3)
    world.tick()
    (run,) = world.runs()
    assert run.status == "failed" and run.finished_at is not None
    assert "could not be recorded" in run.reason
    (occurrence,) = world.occurrences()
    assert occurrence.status == "done"  # not retried: the same result would fail the same way
    assert world.job("j").state == "done"
    assert world.store.kv_read(world.tenant, "seen") is None  # nothing of the run applied


@pytest.mark.usefixtures("refusing_database")
def test_the_background_recorder_ends_such_a_run_too(world: World) -> None:
    world.behaviour = _succeeds
    world.put_job("j", world.add_script(), world.clock.now(), max_attempts=1)
    batch = world.store.claim_due(world.tenant, world.clock.now(), 10)
    (claim,) = batch.claims
    done = world.scheduler._run(claim)
    world.scheduler.recorder.record_done([done])
    (run,) = world.runs()
    assert run.status == "failed" and "could not be recorded" in run.reason
