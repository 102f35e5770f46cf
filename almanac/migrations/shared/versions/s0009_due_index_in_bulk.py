"""Shared schema (PostgreSQL): the due index takes a statement's new occurrences in one INSERT.

`almanac_due_index_inserted()` is called once per INSERT (or COPY) on a tenant's occurrences
(tenant revision t0016_due_index_in_bulk) with the statement's new rows as a transition table,
instead of once per row: a batch of 1,000 schedules copies 1,000 occurrences, and the row
trigger's 1,000 upserts cost PostgreSQL ~8-10 ms of CPU per batch. Deletes and updates keep
the row trigger (`almanac_due_index`, s0007).

Revision ID: s0009_due_index_in_bulk
Revises: s0008_delivery_signals
"""

from alembic import op

from almanac.migrations.pg_names import shared_schema

revision = "s0009_due_index_in_bulk"
down_revision = "s0008_delivery_signals"
branch_labels = None
depends_on = None

FUNCTION = """
CREATE OR REPLACE FUNCTION {shared}.almanac_due_index_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {shared}.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    SELECT replace(substr(TG_TABLE_SCHEMA, 3), '_', '-'), id, due_at, priority FROM inserted
    WHERE due_at IS NOT NULL
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    RETURN NULL;
END
$$
"""



def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(FUNCTION.format(shared=shared_schema()))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS {shared_schema()}.almanac_due_index_inserted() CASCADE")
