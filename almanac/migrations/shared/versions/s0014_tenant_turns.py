"""Shared schema: `tenant_turns`, when each tenant's due rows were last claimed by any process.

The pick across tenants (PostgreSQL) serves, within each round of its round robin, the tenants
served least recently first, by every process alike (`TenantTurn`). Made on SQLite too, like
`due_index`, so that the models and both backends' schemas agree; unused there.

Revision ID: s0014_tenant_turns
Revises: s0013_sql_functions_v2
"""

import sqlalchemy as sa
from alembic import op

from almanac.db import UTCDateTime

revision = "s0014_tenant_turns"
down_revision = "s0013_sql_functions_v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenant_turns",
        sa.Column("tenant_slug", sa.String(40), nullable=False),
        sa.Column("served_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_slug", name=op.f("pk_tenant_turns")),
    )


def downgrade() -> None:
    op.drop_table("tenant_turns")
