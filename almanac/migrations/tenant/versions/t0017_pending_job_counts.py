"""PostgreSQL: the tenant's pending jobs are kept counted, not counted on every PUT.

The pending-jobs quota was checked by counting the tenant's pending jobs: O(pending) per new
job, tens of milliseconds a PUT at the default quota of 100,000. Now every statement that
changes the jobs table adds one row to `pending_job_counts` with its net change (a statement
trigger over its transition tables), and the count is `sum(n)`.

Writers only ever insert there, so they never wait for each other on a counter row. Every
128th row folds the rows it can lock into one (`FOR UPDATE SKIP LOCKED`, so a fold never waits
either, and rows of transactions not yet committed are invisible to it and kept): the sum keeps
its value and is read over a few hundred rows at most. The rows start at the count of today's
pending jobs: the triggers are made first, which locks out writers of `jobs` until the
migration commits, so nothing is counted twice or missed. On SQLite nothing happens (one
process writes a tenant's file; the quota counts its jobs as before).

Revision ID: t0017_pending_job_counts
Revises: t0016_due_index_in_bulk
"""

from alembic import op

from almanac.migrations.pg_names import tenant_names

revision = "t0017_pending_job_counts"
down_revision = "t0016_due_index_in_bulk"
branch_labels = None
depends_on = None

FOLD_EVERY = 128

_FUNCTION = """
CREATE FUNCTION {schema}.almanac_pending_jobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    change bigint := 0;
    made bigint;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT change + count(*) INTO change FROM changed_new WHERE state = 'pending';
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        SELECT change - count(*) INTO change FROM changed_old WHERE state = 'pending';
    END IF;
    IF change <> 0 THEN
        INSERT INTO {schema}.pending_job_counts (n) VALUES (change) RETURNING id INTO made;
        IF mod(made, {fold}) = 0 THEN
            WITH folded AS (
                DELETE FROM {schema}.pending_job_counts WHERE id IN (
                    SELECT id FROM {schema}.pending_job_counts FOR UPDATE SKIP LOCKED)
                RETURNING n)
            INSERT INTO {schema}.pending_job_counts (n) SELECT sum(n) FROM folded HAVING count(*) > 0;
        END IF;
    END IF;
    RETURN NULL;
END $$
"""

_TRIGGERS = {
    "INSERT": "REFERENCING NEW TABLE AS changed_new",
    "UPDATE": "REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new",
    "DELETE": "REFERENCING OLD TABLE AS changed_old",
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    op.execute(f"CREATE TABLE {schema}.pending_job_counts (id bigserial PRIMARY KEY, n integer NOT NULL)")
    op.execute(_FUNCTION.format(schema=schema, fold=FOLD_EVERY))
    for event, referencing in _TRIGGERS.items():
        op.execute(f"CREATE TRIGGER pending_jobs_{event.lower()} AFTER {event} ON {schema}.jobs {referencing} "
                   f"FOR EACH STATEMENT EXECUTE FUNCTION {schema}.almanac_pending_jobs_changed()")
    op.execute(f"INSERT INTO {schema}.pending_job_counts (n) "
               f"SELECT count(*) FROM {schema}.jobs WHERE state = 'pending'")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    for event in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS pending_jobs_{event.lower()} ON {schema}.jobs")
    op.execute(f"DROP FUNCTION IF EXISTS {schema}.almanac_pending_jobs_changed()")
    op.execute(f"DROP TABLE IF EXISTS {schema}.pending_job_counts")
