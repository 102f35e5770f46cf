"""PostgreSQL: a tenant's busiest tables are analyzed after thousands of changes, each at a threshold of its own.

Autovacuum analyzes a table once 50 rows + 10 % of it have changed since the last time. A
tenant's occurrences, runs, schedules and jobs are small and change with every run (an
occurrence three times: planned, claimed, released), so a burst of 40 runs a tenant over 1,000
tenants sets off thousands of ANALYZEs at once. Each one sends the table's catalog changes to
every backend; backends that fall behind drop their whole catalog caches, and every tenant's
tables must be looked up again. Measured (`bench/pg_scale_bench.py --warm-burst 40000`, the
8,000 burst drained after one of 40,000): 265-795 runs/s in five of eight sittings with
autovacuum's defaults, against 1,587/s with autovacuum off and 1,712/s with analyses held back
(and ~1,600/s for a first burst).

So these tables are analyzed after 2,000-3,999 changed rows (plus autovacuum's 10 % of the
table, which still rules a big table): a tenant's threshold is fixed by a hash of its schema's
name, so that tenants with the same schedules do not all reach it in the same burst. The
queries on these tables look rows up by key or by index, which needs no fresh statistics of
a small table; VACUUM (which keeps the row counts) is left as it was. On SQLite nothing happens.

Revision ID: t0018_analyze_later
Revises: t0017_pending_job_counts
"""

from alembic import op

from almanac.migrations.pg_names import tenant_names

revision = "t0018_analyze_later"
down_revision = "t0017_pending_job_counts"
branch_labels = None
depends_on = None

TABLES = ("occurrences", "runs", "schedules", "jobs")
THRESHOLD_FROM, THRESHOLD_SPREAD = 2_000, 2_000

# A DO block, because the threshold is computed from the schema's name in SQL: a new tenant's schema
# is made by replaying the statements recorded on a template schema (`tenants.migrations`) with the
# name replaced, so a value computed here in Python would be the template's for every tenant.
# No '%' in it: the replay renders recorded statements without parameters.
_SET = """
DO $$
DECLARE
    threshold integer := {base} + mod(hashtext('{name}')::bigint + 2147483648, {spread});
BEGIN
{alters}
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    alters = "\n".join(f"    EXECUTE 'ALTER TABLE {schema}.{table} SET (autovacuum_analyze_threshold = ' "
                       f"|| threshold || ')';" for table in TABLES)
    op.execute(_SET.format(base=THRESHOLD_FROM, spread=THRESHOLD_SPREAD, name=schema.strip('"'), alters=alters))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    for table in TABLES:
        op.execute(f"ALTER TABLE {schema}.{table} RESET (autovacuum_analyze_threshold)")
