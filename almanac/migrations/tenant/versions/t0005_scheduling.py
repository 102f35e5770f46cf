"""Schedules pause themselves after failures in a row (SPEC section 7).

`pause_after_failures` (none by default), the count of final failures in a row,
and the reason a schedule paused itself.

Revision ID: t0005_scheduling
Revises: t0003_delivery
"""

import sqlalchemy as sa
from alembic import op

revision = "t0005_scheduling"
down_revision = "t0004_quotas"
branch_labels = None
depends_on = None



def _schema() -> str:
    """The tenant's real schema: ALTER TABLE is rendered by Alembic itself, without the schema map."""
    return op.get_bind().get_execution_options()["schema_translate_map"]["tenant"]


def upgrade() -> None:
    S = _schema()
    op.add_column("schedules", sa.Column("pause_after_failures", sa.Integer(), nullable=True), schema=S)
    op.add_column("schedules", sa.Column("failures_in_row", sa.Integer(), nullable=False, server_default="0"),
                  schema=S)
    op.add_column("schedules", sa.Column("paused_reason", sa.String(200), nullable=True), schema=S)


def downgrade() -> None:
    S = _schema()
    for name in ("paused_reason", "failures_in_row", "pause_after_failures"):
        op.drop_column("schedules", name, schema=S)
