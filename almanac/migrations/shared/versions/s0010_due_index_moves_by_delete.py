"""Shared schema (PostgreSQL): an occurrence whose due time moves gets a new due-index row, not an updated one.

`almanac_due_index()` (s0007), the row trigger of a tenant's occurrences on UPDATE and DELETE,
moved an entry with `INSERT ... ON CONFLICT DO UPDATE`: a new version of the same row. A pick
of another process whose snapshot predated that move (a claim, most often) followed the update
to the new version, locked it, found it no longer due and skipped it, keeping the lock until
its whole claim transaction committed; the claimer's release of that run, a few milliseconds
later, waited for it. Now the old entry is deleted and a new one inserted: a pick that meets
a deleted version skips it without locking anything
(tests/integration/platform_pg/test_due_index_locks.py).

Revision ID: s0010_due_index_moves_by_delete
Revises: s0009_due_index_in_bulk
"""

from alembic import op

from almanac.migrations.pg_names import shared_schema
from almanac.migrations.shared.versions.s0007_due_index import FUNCTION as UPSERTING_FUNCTION

revision = "s0010_due_index_moves_by_delete"
down_revision = "s0009_due_index_in_bulk"
branch_labels = None
depends_on = None

# The INSERT keeps its ON CONFLICT for an entry written outside this trigger (a restore, say):
# every write of one occurrence's entry otherwise holds that occurrence's row lock.
FUNCTION = """
CREATE OR REPLACE FUNCTION {shared}.almanac_due_index() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM {shared}.due_index WHERE tenant_slug = slug AND occurrence_id = OLD.id;
    END IF;
    IF TG_OP = 'DELETE' OR NEW.due_at IS NULL THEN
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
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FUNCTION.format(shared=shared_schema()))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(UPSERTING_FUNCTION.format(shared=shared_schema()))
