"""Shared schema (PostgreSQL): `almanac_due_index_moved()`, the due index's entries of many occurrences replaced at once.

The claim and record statements across tenants (`due_index.writes`, `due_index.record`)
move their tenants' entries themselves, with the tenants' triggers off (tenant revision
t0019_due_index_by_statement). They call this function from the statement, after the
occurrences are written, rather than deleting with a CTE: a CTE deletes by the statement's
snapshot, taken before the statement waited for an occurrence's row lock, so when the lock
was held by a renewal of the same attempt, whose trigger moved the entry, the CTE missed the
moved entry and left it behind (an occurrence done, its entry due for ever). A VOLATILE
function's statements take a snapshot of their own when they run, as the trigger's do.
Not a trigger function, it is compiled once per backend, not once per tenant's table.

Each (slug, id) given loses its entry; those with a due time get a new one (s0010: a new
row, never an updated one). Returns how many entries were written.

Revision ID: s0011_due_index_moved
Revises: s0010_due_index_moves_by_delete
"""

from alembic import op

from almanac.migrations.pg_names import shared_schema

revision = "s0011_due_index_moved"
down_revision = "s0010_due_index_moves_by_delete"
branch_labels = None
depends_on = None

FUNCTION = """
CREATE OR REPLACE FUNCTION {shared}.almanac_due_index_moved(
    slugs varchar[], ids integer[], dues timestamptz[], priorities integer[]) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    written integer;
BEGIN
    DELETE FROM {shared}.due_index AS d USING unnest(slugs, ids) AS g(slug, id)
    WHERE d.tenant_slug = g.slug AND d.occurrence_id = g.id;
    INSERT INTO {shared}.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    SELECT slug, id, due, priority FROM unnest(slugs, ids, dues, priorities) AS n(slug, id, due, priority)
    WHERE due IS NOT NULL
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FUNCTION.format(shared=shared_schema()))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS {shared_schema()}.almanac_due_index_moved("
                   "varchar[], integer[], timestamptz[], integer[])")
