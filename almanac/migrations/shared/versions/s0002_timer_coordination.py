"""Shared schema: worker heartbeats and per-tenant timer leases (PostgreSQL scale-out).

Revision ID: s0002
Revises: s0001
"""

import sqlalchemy as sa
from alembic import op

from almanac.db import UTCDateTime

revision = "s0002"
down_revision = "s0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_heartbeats",
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("seen_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("owner", name=op.f("pk_worker_heartbeats")),
    )
    op.create_table(
        "timer_leases",
        sa.Column("tenant_slug", sa.String(40), nullable=False),
        sa.Column("owner", sa.String(100), nullable=True),
        sa.Column("token", sa.String(32), nullable=True),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_slug", name=op.f("pk_timer_leases")),
    )
    op.create_index(op.f("ix_timer_leases_owner"), "timer_leases", ["owner"])


def downgrade() -> None:
    op.drop_index(op.f("ix_timer_leases_owner"), table_name="timer_leases")
    op.drop_table("timer_leases")
    op.drop_table("worker_heartbeats")
