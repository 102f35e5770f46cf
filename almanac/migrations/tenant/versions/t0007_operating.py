"""Schedules keep the note of their last pause or resume (who and why), shown on the schedule.

Revision ID: t0007_operating
Revises: t0004_quotas
"""

import sqlalchemy as sa
from alembic import context, op

revision = "t0007_operating"
down_revision = "t0006_authoring"
branch_labels = None
depends_on = None



def _schema() -> str:
    # ALTER TABLE is not translated by the connection's schema map: name the tenant's real schema.
    return context.config.attributes["schema"]


def upgrade() -> None:
    op.add_column("schedules", sa.Column("pause_note", sa.String(length=500), nullable=True), schema=_schema())


def downgrade() -> None:
    op.drop_column("schedules", "pause_note", schema=_schema())
