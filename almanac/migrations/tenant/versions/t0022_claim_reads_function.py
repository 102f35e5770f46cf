"""PostgreSQL: a tenant's claim reads as a function of its schema, planned once a backend, one call a pass.

As t0020 and t0021 did for the claim's writes and the record: a claim pass across tenants
(`due_index.reads`) read each kind of row for all its tenants by one statement naming every
tenant's schema (the due occurrences locked, their schedules, their jobs, the schedules'
running attempts, the scripts, the day's use): five statements a pass whose text was new
at every pass, so PostgreSQL parsed, analysed and planned each tenant's part every time.
`almanac_claim_reads()` makes the same reads as static SQL, planned once per backend
(generic plans, as in t0020), and returns them as one set of rows:

    kind 0  a due occurrence it locked (`FOR UPDATE SKIP LOCKED`), with its priority and due
            time (for the caller's order), its schedule's or its job's row, and their script's
            (LEFT JOINs: NULL where there is none)
    kind 1  a running attempt of one of those schedules (its id, schedule id and lease end in
            the occurrence's columns)
    kind 2  the day's use: runs started since `a_day`, and their milliseconds

The columns are prefixed by what they come from (`o_` the occurrence, `s_` the schedule, `j_` the
job, `c_` the script, `d_` the day), each named as its table's column, so that the caller's rows
(`due_index.reads`) unpack them by name; the arguments are prefixed `a_`. The scripts' sources,
read only when a process has not met a version yet, stay a statement of their own.
On SQLite nothing happens.

Revision ID: t0022_claim_reads_function
Revises: t0021_record_plain_function
"""

from alembic import op

from almanac.migrations.pg_names import create_planned_once, tenant_names

revision = "t0022_claim_reads_function"
down_revision = "t0021_record_plain_function"
branch_labels = None
depends_on = None

ARGUMENTS = "a_ids int[], a_now timestamptz, a_day timestamptz, a_running varchar"

RETURNS = """TABLE (kind int,
    o_id int, o_schedule_id int, o_job_id int, o_schedule_version int, o_scheduled_for timestamptz,
    o_trigger varchar, o_status varchar, o_attempt int, o_lease_token varchar, o_priority int, o_due_at timestamptz,
    s_id int, s_script_id int, s_input_kind varchar, s_rrule text, s_payload text, s_enabled boolean,
    s_misfire varchar, s_catchup_window_s int, s_overlap varchar, s_expire_after_s int, s_max_attempts int,
    s_retry_backoff_s int, s_priority int, s_version int,
    j_id int, j_key varchar, j_script_id int, j_run_at timestamptz, j_payload text, j_expire_after_s int,
    j_max_attempts int, j_state varchar, j_root_key varchar, j_depth int,
    c_id int, c_timeout_ms int, c_memory_mb int, c_current_version int,
    d_runs bigint, d_ms bigint)"""

BODY = """
BEGIN
    RETURN QUERY
    WITH l AS (
        SELECT o.id, o.schedule_id, o.job_id, o.schedule_version, o.scheduled_for, o.trigger, o.status, o.attempt,
               o.lease_token, o.priority, o.due_at
        FROM {schema}.occurrences AS o
        WHERE o.id = ANY(a_ids) AND o.due_at <= a_now
        FOR UPDATE SKIP LOCKED
    )
    SELECT 0, l.*,
           s.id, s.script_id, s.input_kind, s.rrule, s.payload, s.enabled, s.misfire, s.catchup_window_s, s.overlap,
           s.expire_after_s, s.max_attempts, s.retry_backoff_s, s.priority, s.version,
           j.id, j.key, j.script_id, j.run_at, j.payload, j.expire_after_s, j.max_attempts, j.state, j.root_key,
           j.depth,
           c.id, c.timeout_ms, c.memory_mb, c.current_version,
           NULL::bigint, NULL::bigint
    FROM l
    LEFT JOIN {schema}.schedules AS s ON s.id = l.schedule_id
    LEFT JOIN {schema}.jobs AS j ON j.id = l.job_id
    LEFT JOIN {schema}.scripts AS c ON c.id = coalesce(s.script_id, j.script_id)
    UNION ALL
    SELECT 1, r.id, r.schedule_id, NULL, NULL, r.lease_until, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL
    FROM {schema}.occurrences AS r
    WHERE r.schedule_id = ANY(ARRAY(SELECT l.schedule_id FROM l WHERE l.schedule_id IS NOT NULL))
      AND r.status = a_running
    UNION ALL
    SELECT 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL,
           count(*), coalesce(sum(u.duration_ms), 0)
    FROM {schema}.runs AS u
    WHERE u.created_at >= a_day AND u.status NOT IN ('skipped', 'expired');
END
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    create_planned_once(schema, "almanac_claim_reads", ARGUMENTS, RETURNS, BODY.format(schema=schema))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    op.execute(f"DROP FUNCTION IF EXISTS {schema}.almanac_claim_reads")
