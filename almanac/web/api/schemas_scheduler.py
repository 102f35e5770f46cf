"""Request and answer bodies of the scheduler's API (scripts, schedules, jobs, runs, kv).

Kept apart from the ORM models. Requests forbid unknown fields and cap sizes:
names 200 characters, payloads 64 KiB of JSON, sources 256 KiB.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

PAYLOAD_MAX = 64 * 1024
SOURCE_MAX = 256 * 1024


def _small_json(value: Any) -> Any:
    try:
        size = len(json.dumps(value, allow_nan=False).encode())
    except ValueError as exc:
        raise ValueError(f"must be JSON: {exc}") from None
    if size > PAYLOAD_MAX:
        raise ValueError("must be at most 64 KiB of JSON")
    return value


Payload = Annotated[Any, AfterValidator(_small_json)]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Misfire = Literal["run_once", "run_all", "skip"]
Overlap = Literal["skip", "queue", "allow"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptIn(Strict):
    name: Name
    source: str = Field(min_length=1, max_length=SOURCE_MAX)
    timeout_ms: int = Field(default=1000, ge=1, le=30_000)
    memory_mb: int = Field(default=32, ge=1, le=256)


class ScriptPatch(Strict):
    name: Name | None = None
    source: str | None = Field(default=None, min_length=1, max_length=SOURCE_MAX)
    timeout_ms: int | None = Field(default=None, ge=1, le=30_000)
    memory_mb: int | None = Field(default=None, ge=1, le=256)


class ScriptOut(BaseModel):
    id: int
    name: str
    version: int
    timeout_ms: int
    memory_mb: int
    source: str | None = None
    created_at: datetime
    updated_at: datetime


class RunNowIn(Strict):
    payload: Payload = None


class ScheduleIn(Strict):
    name: Name
    script_id: int
    rule: str = Field(min_length=1, max_length=4096)
    timezone: str = Field(default="UTC", max_length=64)
    start: datetime | None = None
    payload: Payload = None
    enabled: bool = True
    misfire: Misfire = "run_once"
    catchup_window_s: int = Field(default=86400, ge=0, le=30 * 86400)
    overlap: Overlap = "skip"
    expire_after_s: int | None = Field(default=None, ge=1, le=365 * 86400)
    max_attempts: int = Field(default=3, ge=1, le=20)
    retry_backoff_s: int = Field(default=10, ge=1, le=86400)
    priority: int = Field(default=0, ge=-100, le=100)
    pause_after_failures: int | None = Field(default=None, ge=1, le=1000)


class SchedulePatch(Strict):
    name: Name | None = None
    script_id: int | None = None
    rule: str | None = Field(default=None, min_length=1, max_length=4096)
    timezone: str | None = Field(default=None, max_length=64)
    start: datetime | None = None
    payload: Payload = None
    enabled: bool | None = None
    misfire: Misfire | None = None
    catchup_window_s: int | None = Field(default=None, ge=0, le=30 * 86400)
    overlap: Overlap | None = None
    expire_after_s: int | None = Field(default=None, ge=1, le=365 * 86400)
    max_attempts: int | None = Field(default=None, ge=1, le=20)
    retry_backoff_s: int | None = Field(default=None, ge=1, le=86400)
    priority: int | None = Field(default=None, ge=-100, le=100)
    pause_after_failures: int | None = Field(default=None, ge=1, le=1000)


class ScheduleOut(BaseModel):
    id: int
    name: str
    script_id: int
    rule: str
    input_kind: str
    rrule: str
    description: str
    timezone: str
    payload: Any
    enabled: bool
    misfire: str
    catchup_window_s: int
    overlap: str
    expire_after_s: int | None
    max_attempts: int
    retry_backoff_s: int
    priority: int
    pause_after_failures: int | None = None
    paused_reason: str | None = None
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime


class NextOut(BaseModel):
    next: list[datetime]


class JobIn(Strict):
    script_id: int
    run_at: datetime
    payload: Payload = None
    expire_after_s: int | None = Field(default=None, ge=1, le=365 * 86400)
    max_attempts: int = Field(default=3, ge=1, le=20)
    priority: int = Field(default=0, ge=-100, le=100)


class JobOut(BaseModel):
    key: str
    script_id: int
    run_at: datetime
    payload: Any
    expire_after_s: int | None
    max_attempts: int
    priority: int
    state: str
    next_run_at: datetime | None
    root_key: str
    depth: int
    created_at: datetime
    updated_at: datetime


class RunOut(BaseModel):
    id: int
    schedule_id: int | None
    job_key: str | None
    script_id: int | None
    script_version: int | None
    trigger: str
    scheduled_for: datetime
    started_at: datetime | None
    finished_at: datetime | None
    status: str
    reason: str | None
    attempt: int
    output: Any
    error: str | None
    error_line: int | None
    logs: list[str]
    duration_ms: int | None


class RunPage(BaseModel):
    items: list[RunOut]
    next_cursor: str | None


class KvIn(Strict):
    value: Payload


class KvOut(BaseModel):
    key: str
    value: Any
    updated_at: datetime


def run_out(run: Any) -> RunOut:
    return RunOut(
        id=run.id, schedule_id=run.schedule_id, job_key=run.job_key, script_id=run.script_id,
        script_version=run.script_version, trigger=run.trigger, scheduled_for=run.scheduled_for,
        started_at=run.started_at, finished_at=run.finished_at, status=run.status, reason=run.reason,
        attempt=run.attempt, output=None if run.output is None else json.loads(run.output), error=run.error,
        error_line=run.error_line, logs=json.loads(run.logs) if run.logs else [], duration_ms=run.duration_ms,
    )
