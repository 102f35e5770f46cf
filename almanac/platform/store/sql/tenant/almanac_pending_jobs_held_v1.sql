-- The tenant's pending jobs counted under its transaction-scoped advisory lock of that quota
-- (`quotas.hold`). VOLATILE: the count is a query of its own with a fresh snapshot, taken after the
-- lock, so it sees what every earlier holder committed. The lock lasts until the caller's transaction ends.
CREATE FUNCTION {tenant}.almanac_pending_jobs_held_v1(a_tenant_key int, a_quota_key int) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $body$
BEGIN
    PERFORM pg_advisory_xact_lock(a_tenant_key, a_quota_key);
    RETURN (SELECT coalesce(sum(c.n), 0) FROM {tenant}.pending_job_counts AS c);
END
$body$
