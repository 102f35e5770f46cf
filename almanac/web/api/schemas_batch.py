"""Request and answer bodies of the batch routes (SPEC sections 7 and 8): up to 1,000 items each.

An item is exactly what the single-item route takes (a job item adds its `key`), so the same
limits apply to every item; the list itself is capped at `BATCH_MAX` (over it: 422, nothing saved).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from almanac.platform.service.batch_writes import BATCH_MAX
from almanac.web.api.schemas_scheduler import JobIn, JobKey, ScheduleIn, ScheduleOut, Strict


_JOB_EXAMPLE: Any = {"key": "remind-order-7", "script_id": 1, "run_at": "2026-12-01T09:00:00Z", "payload": {"order": 7}}
_SCHEDULE_EXAMPLE: Any = {"name": "weekday report", "script_id": 1, "rule": "every weekday at 9am",
                     "timezone": "Europe/Berlin"}


class JobBatchItem(JobIn):
    key: JobKey = Field(description="The job's key, as in PUT /api/v1/jobs/{key}; at most once per batch.")


class JobBatchIn(Strict):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"example": {"jobs": [_JOB_EXAMPLE]}})

    jobs: list[JobBatchItem] = Field(max_length=BATCH_MAX, description=(
        f"Up to {BATCH_MAX} jobs, each as PUT /api/v1/jobs/{{key}} takes it plus its key. All are saved "
        "in one transaction, or none: a bad item refuses the batch, naming it by its index."))


class JobBatchResult(BaseModel):
    index: int = Field(description="The item's position in the request, from 0.")
    key: str = Field(description="The job's key.")
    outcome: str = Field(description="`created` (a new key), `replaced` (something changed) or `unchanged` "
                         "(the item equals the stored job).")
    state: str = Field(description="The job's state after the batch: `pending`, or `done` when it already "
                       "ran at this time.")


class JobBatchOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"items": [
        {"index": 0, "key": "remind-order-7", "outcome": "created", "state": "pending"}]}})

    items: list[JobBatchResult] = Field(description="One result per item, in the request's order.")


class ScheduleBatchIn(Strict):
    model_config = ConfigDict(extra="forbid", strict=True,
                              json_schema_extra={"example": {"schedules": [_SCHEDULE_EXAMPLE]}})

    schedules: list[ScheduleIn] = Field(max_length=BATCH_MAX, description=(
        f"Up to {BATCH_MAX} schedules, each as POST /api/v1/schedules takes it. All are created in one "
        "transaction, or none: a bad item (its rule, its script) refuses the batch, naming it by its index."))


class ScheduleBatchOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"items": [{
        "id": 1, "name": "weekday report", "script_id": 1, "rule": "every weekday at 9am", "input_kind": "text",
        "rrule": "DTSTART;TZID=Europe/Berlin:20261123T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
        "description": "every weekday at 9:00 AM", "timezone": "Europe/Berlin", "payload": None, "enabled": True,
        "misfire": "run_once", "catchup_window_s": 86400, "overlap": "skip", "expire_after_s": None,
        "max_attempts": 3, "retry_backoff_s": 10, "priority": 0, "next_run_at": "2026-11-24T08:00:00Z",
        "created_at": "2026-11-23T22:00:00Z", "updated_at": "2026-11-23T22:00:00Z"}]}})

    items: list[ScheduleOut] = Field(description="The created schedules, in the request's order.")

