"""Shared schema: a tenant's history retention in days, beside its quota overrides (NULL: the default,
ALMANAC_RETENTION_DAYS).

Revision ID: s0006_retention
Revises: s0004_quotas
"""

import sqlalchemy as sa
from alembic import op

revision = "s0006_retention"
down_revision = "s0004_quotas"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tenant_quotas", sa.Column("retention_days", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("tenant_quotas", "retention_days")
