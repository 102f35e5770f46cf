"""A run keeps what its page shows: the event the script was given and the CPU it used (SPEC section 9).

Before t0008 the page rebuilt the event from the job's payload as it is *now*, so a payload
changed after the run showed the wrong input.
"""

from __future__ import annotations

import json
from typing import Any

from almanac.sandbox.contract import RunRequest, RunResult
from tests.integration.platform.scheduler_world import World
from tests.integration.platform.conftest import on_both_paths

world_path = on_both_paths  # recorded as production records on each backend


class MeasuringRunner:
    """A runner that reports CPU time, as the sandbox does."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def run(self, request: RunRequest, caps: Any) -> RunResult:
        self.events.append(request.event)
        return RunResult("succeeded", output={"ok": True}, duration_ms=9, cpu_ms=7)

    def check_syntax(self, source: str) -> None:
        return None


def test_the_run_row_keeps_the_event_as_given_and_its_cpu(world: World) -> None:
    runner = MeasuringRunner()
    world.scheduler.runner = runner
    world.put_job("j", world.add_script(), world.clock.now(), payload={"report": "sales"})
    world.tick()
    (run,) = world.runs()
    assert json.loads(run.event) == runner.events[0]
    assert json.loads(run.event)["payload"] == {"report": "sales"} and json.loads(run.event)["runId"] == run.id
    assert run.cpu_ms == 7


def test_a_runner_that_does_not_measure_cpu_leaves_it_empty(world: World) -> None:
    world.put_job("j", world.add_script(), world.clock.now())
    world.tick()
    (run,) = world.runs()
    assert run.cpu_ms is None and json.loads(run.event)["jobKey"] == "j"


def test_a_run_that_cannot_be_recorded_keeps_its_event(world: World, monkeypatch: Any) -> None:
    finish = world.store.finish_many

    def refusing(items: Any) -> Any:
        if any("could not be recorded" not in (o.reason or "") for _, o, _, _ in items):
            raise RuntimeError("the database refused the row")
        return finish(items)

    monkeypatch.setattr(world.store, "finish_many", refusing)
    index = world.store.due_index
    if index is not None:  # PostgreSQL: the record across tenants refuses it too
        finish_across = index.finish_across

        def refusing_across(items: Any) -> Any:
            if any("could not be recorded" not in (o.reason or "") for _, o, _, _ in items):
                raise RuntimeError("the database refused the row")
            return finish_across(items)

        monkeypatch.setattr(index, "finish_across", refusing_across)
    world.put_job("j", world.add_script(), world.clock.now())
    world.tick()
    (run,) = world.runs()
    assert run.status == "failed" and json.loads(run.event)["jobKey"] == "j"


def test_lone_surrogates_in_a_payload_are_stored_as_escapes(world: World) -> None:
    world.put_job("j", world.add_script(), world.clock.now(), payload={"name": "\ud800x"})
    world.tick()
    (run,) = world.runs()
    assert run.status == "succeeded" and "\\ud800" in run.event

