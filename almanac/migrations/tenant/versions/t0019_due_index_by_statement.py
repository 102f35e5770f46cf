"""PostgreSQL: a claim or a record that writes the due index itself turns off the tenant's triggers for its statement.

The triggers of t0014 / t0016 keep the shared due index from every write of a tenant's
occurrences. On the hot path they were a third of a claim statement's time: `due_index_move`
is a PL/pgSQL row trigger, compiled again for every tenant's table in every backend (~0.25 ms
the first time) and then run once per row (a DELETE and an INSERT each time), twice per run
(claimed, released); `due_index_insert` ran once per tenant part of a claim. The claim and
record statements across tenants (`due_index.writes`, `due_index.record`) now move the
index rows of every tenant they write by one call of `almanac_due_index_moved()` (shared
revision s0011), and set `almanac.due_index_by_statement` to `on` for just that statement
(`tenant_parts.due_index_by_statement`). Both triggers skip while it is on (a WHEN condition,
evaluated without calling the function); every other writer leaves it unset and keeps the
triggers.
On SQLite nothing happens.

Revision ID: t0019_due_index_by_statement
Revises: t0018_analyze_later
"""

from alembic import op

from almanac.migrations.pg_names import tenant_names

revision = "t0019_due_index_by_statement"
down_revision = "t0018_analyze_later"
branch_labels = None
depends_on = None

UNLESS_BY_STATEMENT = "current_setting('almanac.due_index_by_statement', true) IS DISTINCT FROM 'on'"
_MOVED = "(OLD.due_at IS DISTINCT FROM NEW.due_at OR OLD.priority IS DISTINCT FROM NEW.priority)"


def _create(schema: str, shared: str, when: str) -> None:
    op.execute(f"DROP TRIGGER IF EXISTS due_index_move ON {schema}.occurrences")
    op.execute(f"DROP TRIGGER IF EXISTS due_index_insert ON {schema}.occurrences")
    move_when = f"{_MOVED} AND {when}" if when else _MOVED
    op.execute(f"CREATE TRIGGER due_index_move AFTER UPDATE OF due_at, priority ON {schema}.occurrences "
               f"FOR EACH ROW WHEN ({move_when}) EXECUTE FUNCTION {shared}.almanac_due_index()")
    insert_when = f"WHEN ({when}) " if when else ""
    op.execute(f"CREATE TRIGGER due_index_insert AFTER INSERT ON {schema}.occurrences "
               f"REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT {insert_when}"
               f"EXECUTE FUNCTION {shared}.almanac_due_index_inserted()")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, _ = tenant_names()
    _create(schema, shared, UNLESS_BY_STATEMENT)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, _ = tenant_names()
    _create(schema, shared, "")
