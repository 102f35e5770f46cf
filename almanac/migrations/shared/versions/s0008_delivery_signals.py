"""Shared schema: signals that a tenant has delivery work, and (PostgreSQL) the trigger function that writes them.

Every tenant's `events` and `deliveries` get a trigger calling `almanac_delivery_signal()`
(tenant revision t0015_delivery_signals): a new event, or a delivery whose `next_attempt_at`
changes (a new delivery, a retry planned, a lease taken, an end that may release the events
held back behind it), adds a row `(tenant, at)` here in the same transaction. The dispatchers take the rows that have fallen due (`almanac.delivery.signals`)
and look only at those tenants, instead of every tenant every second. A row is only ever
inserted by a writer and deleted by the dispatcher that takes it, so neither waits for the
other and a signal written while a dispatcher looks is never lost. Unused on SQLite.

Revision ID: s0008_delivery_signals
Revises: s0007_due_index
"""

import sqlalchemy as sa
from alembic import op

from almanac.migrations.pg_names import shared_schema

from almanac.db import UTCDateTime

revision = "s0008_delivery_signals"
down_revision = "s0007_due_index"
branch_labels = None
depends_on = None

FUNCTION = """
CREATE OR REPLACE FUNCTION {shared}.almanac_delivery_signal() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    -- Two statements, not a CASE: each branch names a column only its own table has.
    IF TG_TABLE_NAME = 'events' THEN
        INSERT INTO {shared}.delivery_signals (tenant_slug, at) VALUES (slug, NEW.created_at);
    ELSE
        -- A delivery that ended (NULL) may release the later events held back behind it: look now.
        INSERT INTO {shared}.delivery_signals (tenant_slug, at)
        VALUES (slug, COALESCE(NEW.next_attempt_at, NEW.updated_at));
    END IF;
    RETURN NULL;
END
$$
"""



def upgrade() -> None:
    op.create_table(
        "delivery_signals",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("tenant_slug", sa.String(40), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery_signals")),
    )
    op.create_index(op.f("ix_delivery_signals_at"), "delivery_signals", ["at"])
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(FUNCTION.format(shared=shared_schema()))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS {shared_schema()}.almanac_delivery_signal() CASCADE")
    op.drop_index(op.f("ix_delivery_signals_at"), table_name="delivery_signals")
    op.drop_table("delivery_signals")
