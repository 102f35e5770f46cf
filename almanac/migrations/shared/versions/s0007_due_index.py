"""Shared schema: the cross-tenant due index, and (PostgreSQL) the trigger function that keeps it.

Every tenant's `occurrences` table gets a trigger calling `almanac_due_index()` (tenant
revision t0014_due_index): an occurrence whose `due_at` is set has one row here, in the same
transaction as the write, whichever code path made it. The function names the tenant by its
schema (`t_<slug with _ for ->`, see `almanac.db.schema_for`). On SQLite the table exists (one
metadata for both backends) but stays empty: tenants are separate files there.

Revision ID: s0007_due_index
Revises: s0006_retention
"""

import sqlalchemy as sa
from alembic import op

from almanac.migrations.pg_names import shared_schema

from almanac.db import UTCDateTime

revision = "s0007_due_index"
down_revision = "s0006_retention"
branch_labels = None
depends_on = None

# `{shared}` is the shared schema's real name, quoted, read at migration time (the function runs
# with the caller's search_path, which on a tenant's connection need not find the shared schema).
FUNCTION = """
CREATE OR REPLACE FUNCTION {shared}.almanac_due_index() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    IF TG_OP = 'DELETE' OR NEW.due_at IS NULL THEN
        IF TG_OP <> 'INSERT' THEN
            DELETE FROM {shared}.due_index WHERE tenant_slug = slug AND occurrence_id = OLD.id;
        END IF;
        RETURN NULL;
    END IF;
    INSERT INTO {shared}.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    VALUES (slug, NEW.id, NEW.due_at, NEW.priority)
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "due_index",
        sa.Column("tenant_slug", sa.String(40), nullable=False),
        sa.Column("occurrence_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("due_at", UTCDateTime(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_slug", "occurrence_id", name=op.f("pk_due_index")),
    )
    op.create_index(op.f("ix_due_index_due_at"), "due_index", ["due_at"])
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(FUNCTION.format(shared=shared_schema()))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS {shared_schema()}.almanac_due_index() CASCADE")
    op.drop_index(op.f("ix_due_index_due_at"), table_name="due_index")
    op.drop_table("due_index")
