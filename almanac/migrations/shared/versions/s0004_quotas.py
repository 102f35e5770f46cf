"""Shared schema: per-tenant quota overrides (NULL: the default of almanac.platform.store.quotas).

Revision ID: s0004_quotas
Revises: s0002
"""

import sqlalchemy as sa
from alembic import op

from almanac.db import UTCDateTime

revision = "s0004_quotas"
down_revision = "s0003_people_sessions_audit"
branch_labels = None
depends_on = None

NAMES = ("kv_mb", "kv_keys", "schedules", "pending_jobs", "runs_per_day", "cpu_seconds_per_day")


def upgrade() -> None:
    op.create_table(
        "tenant_quotas",
        sa.Column("tenant_slug", sa.String(40), nullable=False),
        *[sa.Column(name, sa.Integer(), nullable=True) for name in NAMES],
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_slug", name=op.f("pk_tenant_quotas")),
    )


def downgrade() -> None:
    op.drop_table("tenant_quotas")
