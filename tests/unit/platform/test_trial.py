"""A trial run (a schedule page's Try with payload): the script sees committed kv, and what it
would change comes back to be shown; nothing reaches the store."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from almanac.platform.runner import FunctionRunner
from almanac.sandbox.contract import RunResult
from almanac.platform.timer.trial import trial_run

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)


class ReadOnlyStore:
    """Committed kv to read; any write method called on it fails the test."""

    def __init__(self, kv: dict[str, Any]) -> None:
        self.kv = kv

    def kv_read(self, tenant: str, key: str) -> Any:
        return self.kv.get(key)

    def kv_keys(self, tenant: str, prefix: str) -> list[str]:
        return sorted(k for k in self.kv if k.startswith(prefix))


def _script(source: str, event: dict[str, Any], caps: Any) -> Any:
    seen = caps.kv_get("seen") or 0
    caps.kv_set("seen", seen + 1)
    caps.kv_delete("old")
    caps.emit("greeted", {"name": event["payload"]["name"]})
    caps.schedule_at("2026-12-01T09:00:00Z", {"again": True}, "again")
    if event["payload"].get("fail"):
        raise RuntimeError("asked to fail")
    return {"seen": seen, "scheduleId": event["scheduleId"]}


def _trial(payload: Any, runner: Any = None) -> Any:
    store = ReadOnlyStore({"seen": 4, "old": 1})
    result = trial_run(runner or FunctionRunner(_script), store, "acme", source="", payload=payload,
                       schedule_id=3, now=NOW, timeout_ms=1000, memory_mb=32)
    assert store.kv == {"seen": 4, "old": 1}  # the store is as it was
    return result


def test_a_trial_shows_what_it_would_change_and_applies_nothing():
    trial = _trial({"name": "Bo"})
    assert trial.result.status == "succeeded" and trial.result.output == {"seen": 4, "scheduleId": 3}
    assert trial.events == [("greeted", {"name": "Bo"})]
    assert trial.kv_writes == {"seen": 5} and trial.kv_deletes == ["old"]
    assert [job.key for job in trial.jobs] == ["again"]


def test_a_failed_trial_keeps_its_error_and_shows_no_effects():
    # The run contract: a run that does not succeed carries no effects (it would apply none).
    trial = _trial({"name": "Bo", "fail": True})
    assert trial.result.status == "failed" and "asked to fail" in (trial.result.error or "")
    assert trial.events == [] and trial.kv_writes == {} and trial.jobs == []


def test_a_broken_runner_is_a_failed_trial_not_an_exception():
    class Broken:
        def run(self, *args: Any) -> RunResult:
            raise OSError("sandbox gone")

    trial = _trial({"name": "Bo"}, Broken())
    assert trial.result.status == "failed" and "could not run the script" in (trial.result.error or "")
