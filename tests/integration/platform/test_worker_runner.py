"""The worker's Runner: scripts in a pool of sandbox processes (the default) or in-process
(`ALMANAC_SANDBOX_PROCESSES=0`), with the same results and the same buffered capabilities."""

from __future__ import annotations

import queue

import pytest

from almanac.sandbox.capabilities import InMemoryCapabilities
from almanac.sandbox.contract import RunRequest, RunResult
from almanac.sandbox.limits import Limits
from almanac.worker import SandboxRunner, sandbox_processes

SCRIPT = """export default async function (event) {
  const seen = (await almanac.kv.get("seen")) ?? 0;
  await almanac.kv.set("seen", seen + 1);
  almanac.emit("seen", {seen});
  try { await almanac.kv.set("", 1); } catch (e) { console.log("refused: " + e.message); }
  return {seen, payload: event.payload};
}"""


def test_processes_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """ALMANAC_SANDBOX_PROCESSES reaches the runner through Settings, the one door for configuration."""
    from almanac.settings import Settings

    monkeypatch.setenv("ALMANAC_SANDBOX_PROCESSES", "0")
    assert SandboxRunner(None, Settings().sandbox_processes).runs_in_flight() is None
    monkeypatch.setenv("ALMANAC_SANDBOX_PROCESSES", "3")
    assert SandboxRunner(None, Settings().sandbox_processes).runs_in_flight() == 30
    monkeypatch.delenv("ALMANAC_SANDBOX_PROCESSES")
    assert Settings().sandbox_processes is None and sandbox_processes(None) >= 1


@pytest.mark.parametrize("processes", [0, 1], ids=["in-process", "pool"])
def test_pool_and_in_process_runs_agree(processes: int, sandbox_image_cache) -> None:
    runner = SandboxRunner(sandbox_image_cache, processes)
    try:
        runner.prepare()  # what the scheduler does before its first claim
        assert runner.ready(0) is (processes > 0)
        caps = InMemoryCapabilities({"seen": 41})
        result = runner.run(RunRequest(SCRIPT, {"payload": {"a": 1}}), caps)
        assert (result.status, result.output) == ("succeeded", {"seen": 41, "payload": {"a": 1}})
        assert (result.effects.kv, result.effects.events) == ({"seen": "42"}, (("seen", '{"seen":41}'),))
        assert any(line.startswith("refused: ") for line in result.logs)
        assert runner.check_syntax("export default () => {") is not None
        ended: "queue.Queue[RunResult]" = queue.Queue()  # submit: the scheduler's way
        runner.submit(RunRequest("export default (e) => e.payload * 2", {"payload": 21}), caps, ended.put)
        outcome = ended.get(timeout=30)
        assert isinstance(outcome, RunResult) and (outcome.status, outcome.output) == ("succeeded", 42)
    finally:
        runner.close()


def test_runs_go_in_process_while_the_pool_starts(sandbox_image_cache) -> None:
    runner = SandboxRunner(sandbox_image_cache, 1)
    try:
        runner.start()
        result = runner.run(RunRequest("export default () => 7", {}), None)  # likely before the pool is up
        assert (result.status, result.output) == ("succeeded", 7)
        assert runner.ready(120)
        assert runner.run(RunRequest("export default () => 8", {}), None).output == 8
    finally:
        runner.close()


def test_an_in_process_run_that_raises_still_calls_back_failed(sandbox_image_cache) -> None:
    """The scheduler counts a submitted run out until `done` is called: a run the in-process
    sandbox refuses (an event it cannot hand over) must still call back, or stop() would wait forever."""
    runner = SandboxRunner(sandbox_image_cache, 0)
    try:
        ended: "queue.Queue[RunResult]" = queue.Queue()
        runner.submit(RunRequest("export default () => 1", {"x": object()}, Limits()), None, ended.put)
        outcome = ended.get(timeout=30)
        assert outcome.status == "failed" and "could not run the script: TypeError" in (outcome.error or "")
    finally:
        runner.close()
