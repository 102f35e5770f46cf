"""One run's hand-over, as the timer makes it: its request, its result as recorded, and who watches it.

Pure helpers of `scheduler.Scheduler`, and the protocol of the runs admitted by a request
(`admission.Admission` fills it).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, NamedTuple, Protocol

from almanac.platform.runner import broken, storable
from almanac.platform.store.contract import Claim
from almanac.sandbox.contract import RunRequest, RunResult
from almanac.sandbox.limits import Limits

log = logging.getLogger("almanac.scheduler")


class RunWatcher(Protocol):
    """Told about the runs that entered through `Scheduler.enqueue` (`admission.Admission`); the
    timer's own claims pass through unchanged. Called on the runner's and the recorder's threads."""

    def event(self, claim: Claim, event: dict[str, Any]) -> dict[str, Any]:
        """The event the run's script is given."""

    def ended(self, claim: Claim, result: RunResult) -> RunResult:
        """The run ended: what of its result is recorded."""

    def released(self, claims: list[Claim]) -> None:
        """These runs were recorded (or given up), and their slots given back."""


class Outstanding(NamedTuple):
    running: int
    claimed: int  # claimed and not yet recorded (includes the two below it)
    unrecorded: int  # finished, waiting for (or in) the recorder


def runner_broke(claim: Claim, exc: Exception) -> RunResult:
    log.error("run.runner_failed", exc_info=exc, extra={"event": "run.runner_failed", "run_id": claim.run_id})
    return broken(exc)


def run_request(claim: Claim, event: dict[str, Any]) -> RunRequest:
    """The run's request (ValueError for limits out of range: the run fails, the platform goes on)."""
    return RunRequest(claim.source, event, Limits(timeout_ms=claim.timeout_ms, memory_mb=claim.memory_mb))


def recordable(result: RunResult, elapsed_s: float) -> RunResult:
    """A runner's result as it will be recorded: checked once, here, so no run can write a broken row."""
    checked = storable(result)
    if checked.duration_ms:
        return checked
    return replace(checked, duration_ms=int(elapsed_s * 1000))
