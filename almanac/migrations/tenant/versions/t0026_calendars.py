"""Business calendars: the tenant's named calendars, and the calendar a schedule runs under.

Revision ID: t0026_calendars
Revises: t0025_sql_functions_v2
"""

import sqlalchemy as sa
from alembic import context, op

from almanac.db import UTCDateTime

revision = "t0026_calendars"
down_revision = "t0025_sql_functions_v2"
branch_labels = None
depends_on = None


def _schema() -> str:
    # ALTER TABLE is not translated by the connection's schema map: name the tenant's real schema.
    return context.config.attributes["schema"]


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        "calendars",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_calendars")),
        schema=schema,
    )
    op.add_column("schedules", sa.Column("calendar", sa.String(length=64), nullable=True), schema=schema)
    op.add_column("schedules", sa.Column("calendar_policy", sa.String(length=10), nullable=False,
                                         server_default="skip"), schema=schema)


def downgrade() -> None:
    schema = _schema()
    with op.batch_alter_table("schedules", schema=schema) as batch:
        batch.drop_column("calendar_policy")
        batch.drop_column("calendar")
    op.drop_table("calendars", schema=schema)
