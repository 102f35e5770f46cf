"""The worker's Runner: scripts in a pool of sandbox processes (the default) or in-process
(`ALMANAC_SANDBOX_PROCESSES=0`), with the same results and the same buffered capabilities."""

from __future__ import annotations

import queue
from datetime import datetime, timezone

import pytest

from almanac.platform.effects import RunEffects
from almanac.platform.runner import RunOutcome
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
def test_pool_and_in_process_runs_agree(processes: int, tmp_path) -> None:
    runner = SandboxRunner(tmp_path / "cache", processes)
    try:
        runner.prepare()  # what the scheduler does before its first claim
        assert runner.ready(0) is (processes > 0)
        effects = RunEffects(lambda key: 41 if key == "seen" else None, lambda prefix: [],
                             now=datetime(2026, 1, 1, tzinfo=timezone.utc), job_depth=None)
        result = runner.run(SCRIPT, {"payload": {"a": 1}}, 1000, 32, effects)
        assert (result.status, result.output) == ("succeeded", {"seen": 41, "payload": {"a": 1}})
        assert effects.kv_changes() == ({"seen": "42"}, [])
        assert effects.events == [("seen", '{"seen":41}')]
        assert any(line.startswith("refused: ") for line in result.logs)
        assert runner.check_syntax("export default () => {") is not None
        ended: "queue.Queue[RunOutcome]" = queue.Queue()  # submit: the scheduler's way
        runner.submit("export default (e) => e.payload * 2", {"payload": 21}, 1000, 32, effects, ended.put)
        outcome = ended.get(timeout=30)
        assert isinstance(outcome, RunOutcome) and (outcome.status, outcome.output) == ("succeeded", 42)
    finally:
        runner.close()


def test_runs_go_in_process_while_the_pool_starts(tmp_path) -> None:
    runner = SandboxRunner(tmp_path / "cache", 1)
    try:
        runner.start()
        result = runner.run("export default () => 7", {}, 1000, 32, None)  # likely before the pool is up
        assert (result.status, result.output) == ("succeeded", 7)
        assert runner.ready(120)
        assert runner.run("export default () => 8", {}, 1000, 32, None).output == 8
    finally:
        runner.close()


def test_an_in_process_run_that_raises_still_calls_back_failed(tmp_path) -> None:
    """The scheduler counts a submitted run out until `done` is called: a run the in-process
    sandbox refuses (limits out of range) must still call back, or stop() would wait forever."""
    runner = SandboxRunner(tmp_path / "cache", 0)
    try:
        ended: "queue.Queue[RunOutcome]" = queue.Queue()
        runner.submit("export default () => 1", {}, 0, 32, None, ended.put)  # timeout_ms 0: refused
        outcome = ended.get(timeout=30)
        assert outcome.status == "failed" and "could not run the script: ValueError" in (outcome.error or "")
    finally:
        runner.close()
