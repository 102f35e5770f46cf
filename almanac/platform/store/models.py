"""Every per-tenant table: scripts, key-value data, the event outbox, schedules, jobs,
occurrences and runs.

Each table lives in the placeholder schema `tenant` (see `almanac.db`). Times are
timezone-aware UTC (`UTCDateTime`). There are deliberately no foreign keys from
occurrences, runs or jobs to schedules and scripts: history outlives what it ran,
and a deleted schedule must not take a running occurrence's row with it (the run
would lose its result to the fencing check).

The two unique keys that make a double run impossible:

- `occurrences (schedule_id, scheduled_for)` and `occurrences (job_id, scheduled_for)`:
  one occurrence per planned time, whoever plans it (planning uses
  ON CONFLICT DO NOTHING).
- `runs (occurrence_id, attempt)`: one run row per attempt of an occurrence; the
  claim is a compare-and-set on the occurrence and inserts this row in the same
  transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from almanac.db import IDS_NEVER_REUSED, TenantBase, UTCDateTime

NAME_MAX = 200
KEY_MAX = 512
PAUSE_NOTE_MAX = 500
CALENDAR_NAME_MAX = 64

# Occurrence states. `due_at` is "when this row next needs the timer's attention":
# its planned time (or retry time) while planned, the blocker's lease end while
# queued, its own lease end while running, NULL once done. One index on it finds
# everything the timer must look at, however many schedules exist.
PLANNED, QUEUED, RUNNING, DONE = "planned", "queued", "running", "done"
ACTIVE_STATES = (PLANNED, QUEUED, RUNNING)

# Run statuses (SPEC section 9).
RUN_STATUSES = (
    "pending", "running", "succeeded", "failed", "timed_out", "memory_exceeded",
    "skipped", "expired", "cancelled",
)
RETRYABLE = ("failed", "timed_out", "memory_exceeded")

# Job states.
JOB_PENDING, JOB_DONE, JOB_CANCELLED = "pending", "done", "cancelled"


class Script(TenantBase):
    __tablename__ = "scripts"
    __table_args__ = IDS_NEVER_REUSED

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_MAX), unique=True)
    current_version: Mapped[int] = mapped_column(Integer)
    timeout_ms: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ScriptVersion(TenantBase):
    __tablename__ = "script_versions"
    __table_args__ = (UniqueConstraint("script_id", "version"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    script_id: Mapped[int] = mapped_column(Integer, ForeignKey("tenant.scripts.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    author: Mapped[str | None] = mapped_column(String(320), nullable=True)  # email or token name


class KV(TenantBase):
    __tablename__ = "kv"

    key: Mapped[str] = mapped_column(String(KEY_MAX), primary_key=True)
    value: Mapped[str] = mapped_column(Text)  # JSON text
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Event(TenantBase):
    """The outbox of `almanac.emit`: written in the run's finishing transaction."""

    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_run_id", "run_id"),
        Index("ix_events_created_at", "created_at"),  # retention finds the oldest first
        IDS_NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int | None] = mapped_column(Integer)
    topic: Mapped[str] = mapped_column(String(NAME_MAX))
    data: Mapped[str] = mapped_column(Text)  # JSON text
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0)


class Schedule(TenantBase):
    __tablename__ = "schedules"
    __table_args__ = (Index("ix_schedules_script_id", "script_id"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    script_id: Mapped[int] = mapped_column(Integer)
    rule_text: Mapped[str] = mapped_column(Text)  # what the person typed
    input_kind: Mapped[str] = mapped_column(String(10))
    rrule: Mapped[str] = mapped_column(Text)  # canonical RFC 5545 block
    timezone: Mapped[str] = mapped_column(String(64))
    payload: Mapped[str] = mapped_column(Text)  # JSON text
    enabled: Mapped[bool] = mapped_column(Boolean)
    misfire: Mapped[str] = mapped_column(String(10))
    catchup_window_s: Mapped[int] = mapped_column(Integer)
    overlap: Mapped[str] = mapped_column(String(10))
    expire_after_s: Mapped[int | None] = mapped_column(Integer)
    max_attempts: Mapped[int] = mapped_column(Integer)
    retry_backoff_s: Mapped[int] = mapped_column(Integer)
    priority: Mapped[int] = mapped_column(Integer)
    # SPEC section 7: after this many final failures in a row (None: never) the schedule pauses itself.
    pause_after_failures: Mapped[int | None] = mapped_column(Integer)
    failures_in_row: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    paused_reason: Mapped[str | None] = mapped_column(String(200))
    # Bumped by every change of rule or timing: occurrences planned under an older
    # version are dropped, not run (background/001's version check).
    version: Mapped[int] = mapped_column(Integer)
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # The last pause or resume, as people wrote it: "Paused by ann@example.com: disk full".
    pause_note: Mapped[str | None] = mapped_column(String(PAUSE_NOTE_MAX))
    # The business calendar it runs under, by name (the planner reads a snapshot of it carried
    # in `rrule`: see recurrence/business.py), and what a closed day does to an occurrence.
    calendar: Mapped[str | None] = mapped_column(String(CALENDAR_NAME_MAX))
    calendar_policy: Mapped[str] = mapped_column(String(10), default="skip", server_default="skip")


class Calendar(TenantBase):
    """A tenant's named business calendar: `body` is BusinessCalendar's versioned JSON."""

    __tablename__ = "calendars"

    name: Mapped[str] = mapped_column(String(CALENDAR_NAME_MAX), primary_key=True)
    body: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_by: Mapped[str] = mapped_column(String(NAME_MAX))


class Job(TenantBase):
    """A one-off delayed run, upserted by key (SPEC section 8)."""

    __tablename__ = "jobs"
    # root_key: the chain limit counts every job of a chain at each planning, and the chain view lists them.
    __table_args__ = (Index("ix_jobs_script_id", "script_id"), Index("ix_jobs_root_key", "root_key"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(NAME_MAX), unique=True)
    script_id: Mapped[int] = mapped_column(Integer)
    run_at: Mapped[datetime] = mapped_column(UTCDateTime())
    payload: Mapped[str] = mapped_column(Text)  # JSON text
    expire_after_s: Mapped[int | None] = mapped_column(Integer)
    max_attempts: Mapped[int] = mapped_column(Integer)
    priority: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(10))
    # Guards of the "check again later" pattern: a follow-up made by a run of
    # job J has root_key = J.root_key and depth = J.depth + 1.
    root_key: Mapped[str] = mapped_column(String(NAME_MAX))
    depth: Mapped[int] = mapped_column(Integer)
    created_by_run_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Occurrence(TenantBase):
    """One planned time of a schedule or job: the unit that is claimed with a lease."""

    __tablename__ = "occurrences"
    __table_args__ = (
        UniqueConstraint("schedule_id", "scheduled_for"),
        UniqueConstraint("job_id", "scheduled_for"),
        Index("ix_occurrences_due_at", "due_at"),
        Index("ix_occurrences_schedule_id_status", "schedule_id", "status"),
        # Retention finds ended occurrences oldest first; partial, so planned ones (the claim's) never enter it.
        Index("ix_occurrences_done_scheduled_for", "scheduled_for",
              postgresql_where=text("status = 'done'"), sqlite_where=text("status = 'done'")),
        IDS_NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    schedule_id: Mapped[int | None] = mapped_column(Integer)
    job_id: Mapped[int | None] = mapped_column(Integer)
    schedule_version: Mapped[int | None] = mapped_column(Integer)
    scheduled_for: Mapped[datetime] = mapped_column(UTCDateTime())
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    priority: Mapped[int] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(10))
    status: Mapped[str] = mapped_column(String(10))
    attempt: Mapped[int] = mapped_column(Integer)
    lease_token: Mapped[str | None] = mapped_column(String(32))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    run_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Run(TenantBase):
    """One attempt of an occurrence (or a manual run), with why it ended."""

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("occurrence_id", "attempt"),
        Index("ix_runs_schedule_id_id", "schedule_id", "id"),
        Index("ix_runs_job_key_id", "job_key", "id"),
        Index("ix_runs_status_id", "status", "id"),
        Index("ix_runs_created_at", "created_at"),  # the daily run quotas count today's runs
        IDS_NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    occurrence_id: Mapped[int | None] = mapped_column(Integer)
    schedule_id: Mapped[int | None] = mapped_column(Integer)
    job_key: Mapped[str | None] = mapped_column(String(NAME_MAX))
    script_id: Mapped[int | None] = mapped_column(Integer)
    script_version: Mapped[int | None] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(10))
    scheduled_for: Mapped[datetime] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(String(200))  # why it ended, for people
    attempt: Mapped[int] = mapped_column(Integer)
    output: Mapped[str | None] = mapped_column(Text)  # JSON text
    error: Mapped[str | None] = mapped_column(Text)
    error_line: Mapped[int | None] = mapped_column(Integer)
    logs: Mapped[str | None] = mapped_column(Text)  # JSON list of lines
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    http: Mapped[str | None] = mapped_column(Text)  # JSON list of the run's fetches (no bodies)
    lease_token: Mapped[str | None] = mapped_column(String(32))
    # What the run's page shows as given (SPEC section 9): the event as the script received it
    # (JSON text; NULL for runs recorded before it was kept, or never started), and the CPU
    # time of its sandbox thread (NULL when the runner does not measure it).
    event: Mapped[str | None] = mapped_column(Text)
    cpu_ms: Mapped[int | None] = mapped_column(Integer)
