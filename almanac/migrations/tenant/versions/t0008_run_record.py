"""Runs keep what their page shows: the event the script was given and the CPU time it used.

Until now the run page rebuilt the event from the schedule's payload as it is today, which
may have changed since; the event as given is now stored with the run (SPEC section 9).

Revision ID: t0008_run_record
Revises: t0013_jobs_root_key
"""

import sqlalchemy as sa
from alembic import context, op

revision = "t0008_run_record"
down_revision = "t0013_jobs_root_key"
branch_labels = None
depends_on = None


def _schema() -> str:
    # ALTER TABLE is not rewritten by the connection's schema_translate_map: name the real schema.
    return context.config.attributes["schema"]


def upgrade() -> None:
    op.add_column("runs", sa.Column("event", sa.Text(), nullable=True), schema=_schema())
    op.add_column("runs", sa.Column("cpu_ms", sa.Integer(), nullable=True), schema=_schema())


def downgrade() -> None:
    op.drop_column("runs", "cpu_ms", schema=_schema())
    op.drop_column("runs", "event", schema=_schema())
