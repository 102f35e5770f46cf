"""PostgreSQL: the pending jobs counted under the tenant's lock of that quota, in one call.

A new job is counted against the pending-jobs quota and inserted in one transaction; two
concurrent requests each counted the other's job as not there yet and both inserted, past the
quota. Now a writer first waits for a transaction-scoped advisory lock of (tenant, quota)
(`quotas.hold`) and counts after it. A single PUT of a new key is one statement
(`platform.job_create`), whose own snapshot is taken before any lock it waits for inside it;
`almanac_pending_jobs_held_v1(a_tenant_key, a_quota_key)` takes the lock and then counts by a
query of its own, which (the function being VOLATILE) reads with a fresh snapshot: what every
earlier holder committed. The lock is kept until the caller's transaction ends. On SQLite nothing
happens (a write transaction there begins IMMEDIATE: writers are serialised already).

Revision ID: t0023_pending_jobs_held
Revises: t0022_claim_reads_function
"""

from alembic import op

from almanac.migrations.pg_names import install_frozen, tenant_names

revision = "t0023_pending_jobs_held"
down_revision = "t0022_claim_reads_function"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    install_frozen("t0023", "almanac_pending_jobs_held_v1", tenant=schema)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema, _, _ = tenant_names()
    op.execute(f"DROP FUNCTION IF EXISTS {schema}.almanac_pending_jobs_held_v1(int, int)")
