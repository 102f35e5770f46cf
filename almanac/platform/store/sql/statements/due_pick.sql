-- The pick of a claim pass across tenants (`due_index.claim`): the due rows it will claim, in the
-- order it wants them, locked. `{lane}` is empty, or the lane's condition when
-- the pass takes one lane's tenants (`connection_lanes`): a dead process's runs (due before :taken)
-- are taken by the first lane's pick whatever their lane, rather than when the lanes' turns come.
-- Ranked by due time within the tenant's own priority order, taken round robin in chunks per tenant,
-- and within each round: the rows of the tenants in :mine (`prefer`) before the others', then the
-- tenants whose rows any process claimed least recently (`tenant_turns`) first. A claimed row is no
-- longer due, so every pass of a burst meets every tenant in its first round again: without that
-- memory, which tenants a pass reached was a fresh draw each time, and tenants with equal backlogs
-- drained at paces up to 1.5 times apart. Before every round, the rows due before :taken: a dead
-- process's runs in flight (made due a day early when it was reaped), of every tenant.
-- Tenants tied still are ordered by a hash seeded per pass: processes claiming at once mostly
-- reach for different rows. The hash is PostgreSQL's own `hashtextextended` (what its hash indexes
-- use on text): computed for every ranked row, `md5(tenant || salt)` was half of a pick's time with
-- 8,000 rows due (14 ms against 7 ms, EXPLAIN ANALYZE), for the same purpose.
WITH due AS (
    SELECT tenant_slug, occurrence_id, due_at, priority FROM due_index
    WHERE due_at <= :now{lane} ORDER BY due_at LIMIT :scan
), ranked AS (
    SELECT tenant_slug, occurrence_id, due_at,
           row_number() OVER (PARTITION BY tenant_slug ORDER BY priority DESC, due_at, occurrence_id) AS rn
    FROM due
), wanted AS (
    SELECT r.tenant_slug, r.occurrence_id, r.due_at, r.rn,
           NOT (r.tenant_slug = ANY(CAST(:mine AS varchar[]))) AS theirs, r.due_at >= :taken AS new,
           coalesce(t.served_at, '-infinity') AS served_at
    FROM ranked r LEFT JOIN tenant_turns t ON t.tenant_slug = r.tenant_slug
    WHERE r.rn <= :cap
    ORDER BY new, (r.rn - 1) / :chunk, theirs, served_at, r.due_at, hashtextextended(r.tenant_slug, :seed), r.rn
    LIMIT :want
)
-- The outer query locks what it can of the rows wanted (rows another process holds are skipped, not
-- waited for).
-- The outer `due_at` test is written so that no index can serve it: the index's statistics lag
-- behind a burst (a thousand rows fall due between two ANALYZEs), and with a bare `due_at <= :now`
-- the planner drove the join from the `due_at` index, comparing every due row with every wanted
-- one (474 ms a pass with 8,000 due); this way each wanted row is one primary-key lookup (17 ms).
SELECT d.tenant_slug, d.occurrence_id FROM due_index d
JOIN wanted w ON w.tenant_slug = d.tenant_slug AND w.occurrence_id = d.occurrence_id
WHERE d.due_at + interval '0 s' <= :now
ORDER BY w.new, (w.rn - 1) / :chunk, w.theirs, w.served_at, w.due_at, hashtextextended(w.tenant_slug, :seed), w.rn
LIMIT :limit
FOR UPDATE OF d SKIP LOCKED
