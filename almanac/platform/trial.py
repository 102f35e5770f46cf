"""A trial run: a script run on a chosen payload, its effects shown and never applied.

The schedule page's "Run with payload" uses it: the script sees the committed kv (and its own
writes within the run), exactly as a real run would, but nothing is recorded: no run row, no
kv change, no event, no job. What the run *would* have done is handed back to be shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from almanac.platform.effects import JobUpsert, RunEffects
from almanac.platform.runner import Runner, broken, storable


@dataclass(frozen=True)
class Trial:
    """What one trial run did; the attribute names are those of a run, so a run's templates show it."""

    status: str
    output: Any = None
    error: str | None = None
    error_line: int | None = None
    logs: list[str] = field(default_factory=list)
    duration_ms: int = 0
    reason: str | None = None
    events: list[tuple[str, Any]] = field(default_factory=list)  # (topic, data) it would emit
    kv_writes: dict[str, Any] = field(default_factory=dict)  # key -> value it would store
    kv_deletes: list[str] = field(default_factory=list)
    jobs: list[JobUpsert] = field(default_factory=list)  # follow-ups it would plan


def trial_run(runner: Runner, store: Any, tenant: str, *, source: str, payload: Any, schedule_id: int | None,
              now: datetime, timeout_ms: int, memory_mb: int) -> Trial:
    """Run `source` on `payload` as a manual run of `schedule_id` would, and apply nothing."""
    quota_state = getattr(store, "quota_state", None)
    effects = RunEffects(
        lambda key: store.kv_read(tenant, key), lambda prefix: store.kv_keys(tenant, prefix),
        now=now, job_depth=None, quota=(lambda: quota_state(tenant)) if quota_state is not None else None,
    )
    stamp = now.isoformat().replace("+00:00", "Z")
    event = {"payload": payload, "scheduledFor": stamp, "firedAt": stamp, "attempt": 1,
             "scheduleId": schedule_id, "jobKey": None, "runId": None}
    try:
        result = runner.run(source, event, timeout_ms, memory_mb, effects)
    except Exception as exc:  # the runner itself broke: shown as a failed trial, like a failed run
        result = broken(exc)
    status, output, error, logs, reason = storable(result.status, result.output, result.error, list(result.logs))
    writes, deletes = effects.kv_changes()
    return Trial(
        status=status, output=output, error=error, error_line=result.error_line, logs=logs,
        duration_ms=result.duration_ms, reason=reason or effects.refused,
        events=[(topic, json.loads(data)) for topic, data in effects.events],
        kv_writes={key: json.loads(text) for key, text in writes.items()}, kv_deletes=deletes,
        jobs=list(effects.jobs.values()),
    )
