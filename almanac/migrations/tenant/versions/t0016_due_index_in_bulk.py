"""PostgreSQL: new occurrences reach the due index once per statement, not once per row (s0009).

The row trigger `due_index_write` (t0014) becomes `due_index_delete` (deletes only), and
`due_index_insert` calls `almanac_due_index_inserted()` once per INSERT or COPY with the
statement's new rows. Updates keep `due_index_move`. On SQLite nothing happens.

Revision ID: t0016_due_index_in_bulk
Revises: t0015_delivery_signals
"""

from alembic import op

from almanac.migrations.pg_names import tenant_names

revision = "t0016_due_index_in_bulk"
down_revision = "t0015_delivery_signals"
branch_labels = None
depends_on = None



def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, _ = tenant_names()
    op.execute(f"DROP TRIGGER IF EXISTS due_index_write ON {schema}.occurrences")
    op.execute(f"CREATE TRIGGER due_index_delete AFTER DELETE ON {schema}.occurrences "
               f"FOR EACH ROW EXECUTE FUNCTION {shared}.almanac_due_index()")
    op.execute(f"CREATE TRIGGER due_index_insert AFTER INSERT ON {schema}.occurrences "
               f"REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION {shared}.almanac_due_index_inserted()")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, _ = tenant_names()
    op.execute(f"DROP TRIGGER IF EXISTS due_index_insert ON {schema}.occurrences")
    op.execute(f"DROP TRIGGER IF EXISTS due_index_delete ON {schema}.occurrences")
    op.execute(f"CREATE TRIGGER due_index_write AFTER INSERT OR DELETE ON {schema}.occurrences "
               f"FOR EACH ROW EXECUTE FUNCTION {shared}.almanac_due_index()")
