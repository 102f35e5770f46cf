"""Scheduler tables: scripts, script versions, kv, the event outbox, schedules, jobs,
occurrences (unique per schedule/job and time) and runs (unique per occurrence and attempt).

Written by hand to match almanac/platform/store/models.py exactly.

Revision ID: t0002
Revises: t0001
"""

import sqlalchemy as sa
from alembic import op

from almanac.db import UTCDateTime

revision = "t0002"
down_revision = "t0001"
branch_labels = None
depends_on = None

S = "tenant"


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, UTCDateTime(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "scripts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("current_version", sa.Integer(), nullable=False),
        sa.Column("timeout_ms", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_scripts"),
        sa.UniqueConstraint("name", name="uq_scripts_name"),
        schema=S,
    )
    op.create_table(
        "script_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("script_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        _ts("created_at"),
        sa.ForeignKeyConstraint(
            ["script_id"], [f"{S}.scripts.id"], name="fk_script_versions_script_id_scripts", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_script_versions"),
        sa.UniqueConstraint("script_id", "version", name="uq_script_versions_script_id_version"),
        schema=S,
    )
    op.create_table(
        "kv",
        sa.Column("key", sa.String(512), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("key", name="pk_kv"),
        schema=S,
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("topic", sa.String(200), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        _ts("created_at"),
        _ts("delivered_at", nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
        schema=S,
    )
    op.create_index("ix_events_run_id", "events", ["run_id"], schema=S)
    _create_schedules_and_jobs()
    _create_occurrences_and_runs()


def _create_schedules_and_jobs() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("script_id", sa.Integer(), nullable=False),
        sa.Column("rule_text", sa.Text(), nullable=False),
        sa.Column("input_kind", sa.String(10), nullable=False),
        sa.Column("rrule", sa.Text(), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("misfire", sa.String(10), nullable=False),
        sa.Column("catchup_window_s", sa.Integer(), nullable=False),
        sa.Column("overlap", sa.String(10), nullable=False),
        sa.Column("expire_after_s", sa.Integer(), nullable=True),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("retry_backoff_s", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        _ts("next_run_at", nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
        schema=S,
    )
    op.create_index("ix_schedules_script_id", "schedules", ["script_id"], schema=S)
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("script_id", sa.Integer(), nullable=False),
        _ts("run_at"),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("expire_after_s", sa.Integer(), nullable=True),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("root_key", sa.String(200), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("created_by_run_id", sa.Integer(), nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.UniqueConstraint("key", name="uq_jobs_key"),
        schema=S,
    )
    op.create_index("ix_jobs_script_id", "jobs", ["script_id"], schema=S)


def _create_occurrences_and_runs() -> None:
    op.create_table(
        "occurrences",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("schedule_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("schedule_version", sa.Integer(), nullable=True),
        _ts("scheduled_for"),
        _ts("due_at", nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("trigger", sa.String(10), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("lease_token", sa.String(32), nullable=True),
        _ts("lease_until", nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_occurrences"),
        sa.UniqueConstraint("schedule_id", "scheduled_for", name="uq_occurrences_schedule_id_scheduled_for"),
        sa.UniqueConstraint("job_id", "scheduled_for", name="uq_occurrences_job_id_scheduled_for"),
        schema=S,
    )
    op.create_index("ix_occurrences_due_at", "occurrences", ["due_at"], schema=S)
    op.create_index("ix_occurrences_schedule_id_status", "occurrences", ["schedule_id", "status"], schema=S)
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("occurrence_id", sa.Integer(), nullable=True),
        sa.Column("schedule_id", sa.Integer(), nullable=True),
        sa.Column("job_key", sa.String(200), nullable=True),
        sa.Column("script_id", sa.Integer(), nullable=True),
        sa.Column("script_version", sa.Integer(), nullable=True),
        sa.Column("trigger", sa.String(10), nullable=False),
        _ts("scheduled_for"),
        _ts("created_at"),
        _ts("started_at", nullable=True),
        _ts("finished_at", nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.String(200), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_line", sa.Integer(), nullable=True),
        sa.Column("logs", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("lease_token", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("occurrence_id", "attempt", name="uq_runs_occurrence_id_attempt"),
        schema=S,
    )
    op.create_index("ix_runs_schedule_id_id", "runs", ["schedule_id", "id"], schema=S)
    op.create_index("ix_runs_job_key_id", "runs", ["job_key", "id"], schema=S)
    op.create_index("ix_runs_status_id", "runs", ["status", "id"], schema=S)


def downgrade() -> None:
    for table in ("runs", "occurrences", "jobs", "schedules", "events", "kv", "script_versions", "scripts"):
        op.drop_table(table, schema=S)
