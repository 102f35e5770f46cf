"""PostgreSQL: a tenant's claim writes as a function of its schema, so that a backend plans them once.

A claim pass across tenants writes each tenant's next occurrences, its schedules'
`next_run_at`, its runs and the claimed occurrences' compare-and-set
(`due_index.writes`). Written as data-modifying CTEs of one statement naming every
tenant's schema, that text was new at every pass: PostgreSQL parsed, analysed and planned
four writes a tenant every time, a third of the statement's time (docs/decisions/
0007-per-tenant-functions.md). `almanac_claim_writes()` holds the same four writes as static SQL
in the tenant's schema: PL/pgSQL keeps a plan per statement per backend, and
`plan_cache_mode = force_generic_plan` makes the first plan the one kept (without it the
first five calls of every tenant in every backend would be planned afresh). The lanes
(`ALMANAC_PG_LANES`) keep a tenant on one backend of a process, so those plans are met
again; `ALMANAC_PG_TENANTS_PER_CONNECTION` bounds how many a backend keeps (~0.3 MB a
tenant).

The arguments are the columns' arrays in the order `due_index.writes` gives them; the
result is one row per occurrence written: kind 0 a new one, kind 1 a claimed one with its
run's id, each with its new due time and priority for the shared due index (which the
caller moves once for the statement, its triggers off: t0019).

This text is what every tenant's schema was given; the current one, under a versioned name,
is in `almanac/platform/store/sql/tenant/` (t0025).
On SQLite nothing happens.

Revision ID: t0020_claim_writes_function
Revises: t0019_due_index_by_statement
"""

from alembic import op

from almanac.migrations.pg_names import create_planned_once, tenant_names

revision = "t0020_claim_writes_function"
down_revision = "t0019_due_index_by_statement"
branch_labels = None
depends_on = None

ARGUMENTS = """
    pl_scheduled_for timestamptz[], pl_due_at timestamptz[], pl_priority int[], pl_trigger varchar[],
    pl_status varchar[], pl_attempt int[], pl_created_at timestamptz[], pl_schedule_id int[],
    pl_schedule_version int[],
    nx_id int[], nx_next timestamptz[],
    ru_occurrence_id int[], ru_schedule_id int[], ru_job_key varchar[], ru_script_id int[],
    ru_script_version int[], ru_trigger varchar[], ru_scheduled_for timestamptz[], ru_created_at timestamptz[],
    ru_started_at timestamptz[], ru_status varchar[], ru_attempt int[], ru_lease_token varchar[],
    cas_id int[], cas_status varchar[], cas_attempt int[], cas_token varchar[], cas_lease timestamptz[],
    running varchar"""

RETURNS = "TABLE (kind int, id int, run_id int, due_at timestamptz, priority int)"

BODY = """
BEGIN
    RETURN QUERY
    WITH pl AS (
        INSERT INTO {schema}.occurrences (scheduled_for, due_at, priority, trigger, status, attempt, created_at,
                                          schedule_id, schedule_version)
        SELECT * FROM unnest(pl_scheduled_for, pl_due_at, pl_priority, pl_trigger, pl_status, pl_attempt,
                             pl_created_at, pl_schedule_id, pl_schedule_version)
        ON CONFLICT DO NOTHING
        RETURNING occurrences.id, occurrences.due_at, occurrences.priority
    ), nx AS (
        UPDATE {schema}.schedules AS x SET next_run_at = v.next
        FROM unnest(nx_id, nx_next) AS v(id, next)
        WHERE x.id = ANY(nx_id) AND x.id = v.id
    ), ru AS (
        INSERT INTO {schema}.runs (occurrence_id, schedule_id, job_key, script_id, script_version, trigger,
                                   scheduled_for, created_at, started_at, status, attempt, lease_token)
        SELECT * FROM unnest(ru_occurrence_id, ru_schedule_id, ru_job_key, ru_script_id, ru_script_version,
                             ru_trigger, ru_scheduled_for, ru_created_at, ru_started_at, ru_status, ru_attempt,
                             ru_lease_token)
        RETURNING runs.id, runs.occurrence_id
    ), cas AS (
        UPDATE {schema}.occurrences AS o SET status = running, attempt = v.attempt + 1, lease_token = v.token,
            lease_until = v.lease, due_at = v.lease, run_id = ru.id
        FROM unnest(cas_id, cas_status, cas_attempt, cas_token, cas_lease) AS v(id, status, attempt, token, lease)
        JOIN ru ON ru.occurrence_id = v.id
        WHERE o.id = ANY(cas_id) AND o.id = v.id AND o.status = v.status AND o.attempt = v.attempt
        RETURNING o.id, o.run_id, o.due_at, o.priority
    )
    SELECT 0, pl.id, NULL::int, pl.due_at, pl.priority FROM pl
    UNION ALL
    SELECT 1, cas.id, cas.run_id, cas.due_at, cas.priority FROM cas;
END
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    create_planned_once(schema, "almanac_claim_writes", ARGUMENTS, RETURNS, BODY.format(schema=schema))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    op.execute(f"DROP FUNCTION IF EXISTS {schema}.almanac_claim_writes")
