"""Request and answer bodies of the scheduler's API (scripts, schedules, jobs, runs, kv).

Kept apart from the ORM models. Requests forbid unknown fields and cap sizes:
names 200 characters, payloads 64 KiB of JSON, sources 256 KiB.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from almanac import jsonsafe
from almanac.sandbox.capabilities import JOB_KEY_MAX, job_key_problem

PAYLOAD_MAX = 64 * 1024
SOURCE_MAX = 256 * 1024
ID_MAX = jsonsafe.ID_MAX


def _small_json(value: Any) -> Any:
    jsonsafe.dumps(value, "the value", PAYLOAD_MAX)  # Unsafe is a ValueError: pydantic reports it
    return value


_DATE_TEXT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _date_text(value: Any) -> Any:
    """ISO-8601 text only: pydantic would also read numbers (and numeric text) as Unix times."""
    if isinstance(value, datetime) or (isinstance(value, str) and _DATE_TEXT.match(value)):
        return value
    raise ValueError("must be an ISO-8601 date-time, e.g. 2026-12-01T09:00:00Z")


def _instant(value: datetime) -> datetime:
    return jsonsafe.check_instant(value)


def _aware_instant(value: datetime) -> datetime:
    return jsonsafe.check_instant(value, need_offset=True)


def job_key(key: str) -> str:
    """A job key as SPEC section 8 allows it (`capabilities.job_key_problem`: the grammar `schedule.at` has too)."""
    problem = job_key_problem(key)
    if problem:
        raise ValueError(problem)
    return key


Payload = Annotated[Any, AfterValidator(_small_json)]
# A date-time that no offset or time zone can push past the calendar; `AwareInstant` needs its offset.
Instant = Annotated[datetime, Field(strict=False), BeforeValidator(_date_text), AfterValidator(_instant)]
AwareInstant = Annotated[datetime, Field(strict=False), BeforeValidator(_date_text), AfterValidator(_aware_instant)]
Id = Annotated[int, Field(ge=1, le=ID_MAX)]
Name = Annotated[str, Field(min_length=1, max_length=200)]
KEY_RULE = ("1 to 200 characters, without '/' or control characters, not '.' or '..', not beginning or ending "
            "with a space, and not beginning with 'run:'")
JobKey = Annotated[str, Field(min_length=1, max_length=JOB_KEY_MAX, description=f"The job's key: {KEY_RULE}."),
                   AfterValidator(job_key)]
Misfire = Literal["run_once", "run_all", "skip"]
Overlap = Literal["skip", "queue", "allow"]
CalendarPolicy = Literal["skip", "before", "after"]
CalendarName = Annotated[str, Field(min_length=1, max_length=64, description=(
    "A business calendar by name: one the tenant stored, or a place code such as DE or US-NY."))]


class Strict(BaseModel):
    """Request bodies: unknown fields refused, and no coercion (`false` is not a number, `"1"` not an
    integer), so that what the OpenAPI document says a field is, is what it accepts."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Patch(Strict):
    """A partial update: a field left out is unchanged; `null` is refused except for `NULLABLE` fields
    (for the others it would mean "make this required column empty")."""

    NULLABLE: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="after")
    def _no_null(self) -> "Patch":
        nulls = sorted(name for name in self.model_fields_set
                       if getattr(self, name) is None and name not in self.NULLABLE)
        if nulls:
            raise ValueError(f"{', '.join(nulls)} may not be null (leave a field out to keep it)")
        return self


class ScriptIn(Strict):
    name: Name
    source: str = Field(min_length=1, max_length=SOURCE_MAX)
    timeout_ms: int = Field(default=1000, ge=1, le=30_000)
    memory_mb: int = Field(default=32, ge=1, le=256)


class ScriptPatch(Patch):
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


class ScriptCheckIn(Strict):
    source: str = Field(max_length=SOURCE_MAX, description="The script's source, as it would be saved.")


class ScriptCheckOut(BaseModel):
    ok: bool = Field(description="True when the source parses and has a default export.")
    message: str | None = Field(default=None, description="What is wrong, for a person.")
    line: int | None = Field(default=None, description="1-based line of the problem.")
    column: int | None = Field(default=None, description="1-based column of the problem.")


class ScriptVersionOut(BaseModel):
    version: int = Field(description="1 for the first save; each saved change of source adds one.")
    author: str | None = Field(description="Who saved it: a person's email or an API token's name.")
    created_at: datetime = Field(description="When it was saved.")
    source: str = Field(description="The source of this version.")


class RunNowIn(Strict):
    payload: Payload = None


class ScheduleIn(Strict):
    name: Name
    script_id: Id
    rule: str = Field(min_length=1, max_length=4096)
    timezone: str = Field(default="UTC", max_length=64)
    start: Instant | None = None
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
    calendar: CalendarName | None = None
    calendar_policy: CalendarPolicy | None = Field(default=None, description=(
        "On a day that is not a business day: skip (the default), before or after (the previous or next "
        "business day, same time)."))


class SchedulePatch(Patch):
    NULLABLE = frozenset({"start", "payload", "expire_after_s", "pause_after_failures", "calendar"})
    name: Name | None = None
    script_id: Id | None = None
    rule: str | None = Field(default=None, min_length=1, max_length=4096)
    timezone: str | None = Field(default=None, max_length=64)
    start: Instant | None = None
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
    calendar: CalendarName | None = None
    calendar_policy: CalendarPolicy | None = None


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
    calendar: str | None = None
    calendar_policy: str = "skip"


class CalendarNote(BaseModel):
    """What a business calendar did to one of the rule's dates."""

    original: datetime = Field(description="The occurrence the rule itself gives.")
    action: Literal["skipped", "moved"]
    when: datetime | None = Field(description="Where it runs instead (moved), or null (skipped).")
    reason: str = Field(description="Why the day is not a business day: a holiday's name, a closed entry's "
                                    "label, or weekend.")
    note: str = Field(description='The line a preview shows: "Fri 25 Dec 2026 skipped: Christmas Day".')


def calendar_notes(rolled: list[Any]) -> list[CalendarNote]:
    """The skipped and moved entries of `business.first_runs`' answer, as the API shows them."""
    return [CalendarNote(original=r.original, action=r.action, when=r.when, reason=r.reason, note=r.describe())
            for r in rolled if r.action != "kept"]


class NextOut(BaseModel):
    next: list[datetime]
    calendar_notes: list[CalendarNote] = Field(default=[], description=(
        "One entry per date the schedule's business calendar skipped or moved on the way to `next`."))


class JobIn(Strict):
    script_id: Id
    run_at: AwareInstant
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


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None


class FetchRecord(BaseModel):
    """One `fetch` of a run (SPEC section 9: no bodies); secret values appear as `[secret NAME]`."""

    model_config = ConfigDict(json_schema_extra={"example": {
        "method": "GET", "url": "https://api.frankfurter.app/latest?from=EUR", "status": 200, "bytes": 312,
        "duration_ms": 84}})
    method: str = Field(description="HTTP method sent")
    url: str = Field(description="the URL of the last request made (after redirects)")
    status: int | None = Field(default=None, description="the answer's HTTP status; null when none came")
    bytes: int = Field(default=0, description="size of the answer's body in bytes")
    duration_ms: int = Field(default=0, description="wall time of the call, redirects included")
    error: str | None = Field(default=None, description="why the call was refused or failed, if it was")


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
    event: Any = None  # what the script was given; null for runs recorded before it was kept
    cpu_ms: int | None = None
    events: list[int] = []  # ids of the events it emitted
    root_key: str | None = None  # the chain a job's run belongs to
    http: list[FetchRecord] = Field(default_factory=list, description="the run's fetches, in order")


class RunPage(BaseModel):
    items: list[RunOut]
    next_cursor: str | None


class KvIn(Strict):
    value: Payload


class KvOut(BaseModel):
    key: str
    value: Any
    updated_at: datetime


class KvPage(BaseModel):
    items: list[KvOut]
    next_cursor: str | None


def run_out(run: Any, events: list[int] | None = None, root_key: str | None = None) -> RunOut:
    return RunOut(
        id=run.id, schedule_id=run.schedule_id, job_key=run.job_key, script_id=run.script_id,
        script_version=run.script_version, trigger=run.trigger, scheduled_for=run.scheduled_for,
        started_at=run.started_at, finished_at=run.finished_at, status=run.status, reason=run.reason,
        attempt=run.attempt, output=None if run.output is None else jsonsafe.loads_stored(run.output), error=run.error,
        error_line=run.error_line, logs=jsonsafe.loads_stored(run.logs) if run.logs else [], duration_ms=run.duration_ms,
        event=None if run.event is None else jsonsafe.loads_stored(run.event), cpu_ms=run.cpu_ms,
        events=events or [], root_key=root_key,
        http=jsonsafe.loads_stored(run.http) if getattr(run, "http", None) else [],
    )
