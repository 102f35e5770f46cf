"""Tenant schema: an index on runs.created_at, for the daily run quotas (today's runs are counted at claim).

Revision ID: t0004_quotas
Revises: t0003_delivery
"""

from alembic import op

revision = "t0004_quotas"
down_revision = "t0003_delivery"
branch_labels = None
depends_on = None

S = "tenant"


def upgrade() -> None:
    op.create_index("ix_runs_created_at", "runs", ["created_at"], schema=S)


def downgrade() -> None:
    op.drop_index("ix_runs_created_at", table_name="runs", schema=S)
