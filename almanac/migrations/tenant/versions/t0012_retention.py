"""Indexes for history retention: events oldest first, and ended occurrences oldest first.

The occurrences index is partial (status 'done'): planned, queued and running rows, the ones the
timer claims, never enter it.

Revision ID: t0012_retention
Revises: t0009_egress_secrets
"""

import sqlalchemy as sa
from alembic import op

from almanac.db import TENANT_SCHEMA as S

revision = "t0012_retention"
down_revision = "t0009_egress_secrets"
branch_labels = None
depends_on = None

DONE = sa.text("status = 'done'")


def upgrade() -> None:
    op.create_index("ix_events_created_at", "events", ["created_at"], schema=S)
    op.create_index("ix_occurrences_done_scheduled_for", "occurrences", ["scheduled_for"], schema=S,
                    postgresql_where=DONE, sqlite_where=DONE)


def downgrade() -> None:
    op.drop_index("ix_occurrences_done_scheduled_for", table_name="occurrences", schema=S)
    op.drop_index("ix_events_created_at", table_name="events", schema=S)
