"""PostgreSQL: the tenant's occurrences keep the shared due index (s0007_due_index) in their own transactions.

Two row triggers call the shared function `almanac_due_index()`: one on INSERT and DELETE,
one on an UPDATE that really changes `due_at` or `priority` (a claim's `run_id` update, say,
costs nothing). The tenant's existing occurrences with a `due_at` are copied into the index.
On SQLite nothing happens: a tenant is a file of its own and the timer looks at each tenant.

Revision ID: t0014_due_index
Revises: t0012_retention
"""

import sqlalchemy as sa
from alembic import op

from almanac.migrations.pg_names import tenant_names

revision = "t0014_due_index"
down_revision = "t0012_retention"
branch_labels = None
depends_on = None



def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, slug = tenant_names()
    op.execute(f"CREATE TRIGGER due_index_write AFTER INSERT OR DELETE ON {schema}.occurrences "
               f"FOR EACH ROW EXECUTE FUNCTION {shared}.almanac_due_index()")
    op.execute(f"CREATE TRIGGER due_index_move AFTER UPDATE OF due_at, priority ON {schema}.occurrences "
               "FOR EACH ROW WHEN (OLD.due_at IS DISTINCT FROM NEW.due_at OR OLD.priority IS DISTINCT FROM NEW.priority) "
               f"EXECUTE FUNCTION {shared}.almanac_due_index()")
    op.get_bind().execute(sa.text(
        f"INSERT INTO {shared}.due_index (tenant_slug, occurrence_id, due_at, priority) "
        f"SELECT :slug, id, due_at, priority FROM {schema}.occurrences WHERE due_at IS NOT NULL "
        "ON CONFLICT DO NOTHING"), {"slug": slug})


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, slug = tenant_names()
    op.execute(f"DROP TRIGGER IF EXISTS due_index_move ON {schema}.occurrences")
    op.execute(f"DROP TRIGGER IF EXISTS due_index_write ON {schema}.occurrences")
    op.get_bind().execute(sa.text(f"DELETE FROM {shared}.due_index WHERE tenant_slug = :slug"), {"slug": slug})
