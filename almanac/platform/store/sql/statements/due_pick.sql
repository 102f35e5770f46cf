-- The pick of a claim pass across tenants (`store_due`): the due rows it will claim, locked.
-- `{lane}` is empty, or the lane's condition when the pass takes one lane's tenants (`lanes`).
-- Ranked by due time within the tenant's own priority order, taken round robin in chunks per tenant,
-- and within each round the rows of the tenants in :mine (the process's, `prefer`) before the others';
-- before every round, the rows due before :taken: a dead process's runs in flight (made due a day
-- early when it was reaped), of every tenant, before any tenant's next row;
-- the outer query locks what it can of them (rows another process holds are skipped, not waited for).
-- Tenants due at the same time are ordered by a hash seeded per pass: no tenant is always first
-- when a round is cut short, and processes claiming at once mostly reach for different rows.
-- The hash is PostgreSQL's own `hashtextextended` (what its hash indexes use on text): computed for
-- every ranked row, `md5(tenant || salt)` was half of a pick's time with 8,000 rows due (14 ms
-- against 7 ms, EXPLAIN ANALYZE), for the same purpose.
-- The outer `due_at` test is written so that no index can serve it: the index's statistics lag
-- behind a burst (a thousand rows fall due between two ANALYZEs), and with a bare `due_at <= :now`
-- the planner drove the join from the `due_at` index, comparing every due row with every wanted
-- one (474 ms a pass with 8,000 due); this way each wanted row is one primary-key lookup (17 ms).
WITH due AS (
    SELECT tenant_slug, occurrence_id, due_at, priority FROM due_index
    WHERE due_at <= :now{lane} ORDER BY due_at LIMIT :scan
), ranked AS (
    SELECT tenant_slug, occurrence_id, due_at,
           row_number() OVER (PARTITION BY tenant_slug ORDER BY priority DESC, due_at, occurrence_id) AS rn
    FROM due
), wanted AS (
    SELECT tenant_slug, occurrence_id, due_at, rn, NOT (tenant_slug = ANY(CAST(:mine AS varchar[]))) AS theirs,
           due_at >= :taken AS new
    FROM ranked WHERE rn <= :cap
    ORDER BY new, (rn - 1) / :chunk, theirs, due_at, hashtextextended(tenant_slug, :seed), rn LIMIT :want
)
SELECT d.tenant_slug, d.occurrence_id FROM due_index d
JOIN wanted w ON w.tenant_slug = d.tenant_slug AND w.occurrence_id = d.occurrence_id
WHERE d.due_at + interval '0 s' <= :now
ORDER BY w.new, (w.rn - 1) / :chunk, w.theirs, w.due_at, hashtextextended(w.tenant_slug, :seed), w.rn
LIMIT :limit
FOR UPDATE OF d SKIP LOCKED
