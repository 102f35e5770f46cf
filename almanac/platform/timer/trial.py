"""A trial run: a script run on a chosen payload, its effects shown and never applied.

A trial (a schedule page's "Try with payload", a script page's "Try draft") runs through the
one admission path (`platform.admission`, trigger `trial`): the script sees the committed kv (and its own writes
within the run, through the sandbox's run buffer), exactly as a real run would; the run is
recorded and counted against the daily budgets like any run (it used the sandbox), but no kv
change, event or job is applied. What the run *would* have done (the `Effects` its one
`RunResult` carries) is handed back to be shown by `trial_of`, with the requests it made (its
`http` records: a fetch happens during the run, trial or not). A trial that does not succeed
carries no effects, as a run that does not succeed applies none. `trial_run` runs one on a
runner directly, for the platform's own tests of what a trial shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from almanac.platform.store.run_effects import TenantReads
from almanac.platform.runner import Runner, broken, storable
from almanac.sandbox.contract import RunRequest, RunResult
from almanac.sandbox.limits import Limits


@dataclass(frozen=True)
class PlannedJob:
    """A follow-up the trial would plan (`schedule.at`)."""

    key: str
    run_at: datetime
    payload: Any


@dataclass(frozen=True)
class Trial:
    """What one trial run did: its one `RunResult` (checked fit for a row, as a run's is, so a
    run's templates show it), and what its effects would have changed, decoded to be shown."""

    result: RunResult
    events: list[tuple[str, Any]] = field(default_factory=list)  # (topic, data) it would emit
    kv_writes: dict[str, Any] = field(default_factory=dict)  # key -> value it would store
    kv_deletes: list[str] = field(default_factory=list)
    jobs: list[PlannedJob] = field(default_factory=list)  # follow-ups it would plan
    fetches: list[dict[str, Any]] = field(default_factory=list)  # the requests it made (a run's http records)


def trial_run(runner: Runner, store: Any, tenant: str, *, source: str, payload: Any, schedule_id: int | None,
              now: datetime, timeout_ms: int, memory_mb: int) -> Trial:
    """Run `source` on `payload` as a manual run of `schedule_id` would, and apply nothing."""
    reads = TenantReads(store, tenant, now=now, job_root=None)
    stamp = now.isoformat().replace("+00:00", "Z")
    event = {"payload": payload, "scheduledFor": stamp, "firedAt": stamp, "attempt": 1,
             "scheduleId": schedule_id, "jobKey": None, "runId": None}
    try:
        result = runner.run(RunRequest(source, event, Limits(timeout_ms=timeout_ms, memory_mb=memory_mb)), reads)
    except Exception as exc:  # the runner itself broke: shown as a failed trial, like a failed run
        result = broken(exc)
    return trial_of(result)


def trial_of(result: RunResult) -> Trial:
    """A trial's outcome from the one `RunResult` of its run, effects included (checked fit for a row)."""
    result = storable(result)
    effects = result.effects
    return Trial(
        result=result,
        events=[(topic, json.loads(data)) for topic, data in effects.events],
        kv_writes={key: json.loads(text) for key, text in effects.kv.items() if text is not None},
        kv_deletes=[key for key, text in effects.kv.items() if text is None],
        jobs=[PlannedJob(key, datetime.fromisoformat(run_at.replace("Z", "+00:00")), json.loads(text))
              for key, (run_at, text) in effects.jobs.items()],
        fetches=list(result.http),
    )
