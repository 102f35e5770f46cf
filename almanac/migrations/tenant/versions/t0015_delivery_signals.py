"""PostgreSQL: the tenant's events and deliveries signal the dispatchers (s0008_delivery_signals).

A new event, and a delivery whose `next_attempt_at` is set, moved or cleared (it ended, which
may release later events held back behind it), add a signal row in the shared schema in their
own transaction. One signal now makes the dispatchers look at the
tenant once, for whatever it already had. On SQLite nothing happens: one process looks at
every tenant file.

Revision ID: t0015_delivery_signals
Revises: t0014_due_index
"""

import sqlalchemy as sa
from alembic import context, op

from almanac.migrations.pg_names import tenant_names

revision = "t0015_delivery_signals"
down_revision = "t0014_due_index"
branch_labels = None
depends_on = None



def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, slug = tenant_names()
    op.execute(f"CREATE TRIGGER delivery_signal_event AFTER INSERT ON {schema}.events "
               f"FOR EACH ROW EXECUTE FUNCTION {shared}.almanac_delivery_signal()")
    op.execute(f"CREATE TRIGGER delivery_signal_new AFTER INSERT ON {schema}.deliveries "
               f"FOR EACH ROW WHEN (NEW.next_attempt_at IS NOT NULL) EXECUTE FUNCTION {shared}.almanac_delivery_signal()")
    op.execute(f"CREATE TRIGGER delivery_signal_moved AFTER UPDATE OF next_attempt_at ON {schema}.deliveries "
               f"FOR EACH ROW WHEN (NEW.next_attempt_at IS DISTINCT FROM OLD.next_attempt_at) EXECUTE FUNCTION {shared}.almanac_delivery_signal()")
    # One look at what an existing tenant has, due whatever the dispatcher's clock says (not the
    # database's now()). The slug is worked out in SQL from the schema's name: a new tenant's schema
    # replays statements recorded on a template schema, with only the schema's name swapped.
    raw = context.config.attributes["schema"]
    op.execute(f"INSERT INTO {shared}.delivery_signals (tenant_slug, at) "
               f"SELECT replace(substr('{raw}', 3), '_', '-'), '2000-01-01T00:00:00Z' "
               f"WHERE EXISTS (SELECT 1 FROM {schema}.events)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, shared, slug = tenant_names()
    for name, table in (("delivery_signal_moved", "deliveries"), ("delivery_signal_new", "deliveries"),
                        ("delivery_signal_event", "events")):
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {schema}.{table}")
    op.get_bind().execute(sa.text(f"DELETE FROM {shared}.delivery_signals WHERE tenant_slug = :slug"), {"slug": slug})
