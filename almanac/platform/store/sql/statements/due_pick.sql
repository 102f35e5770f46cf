-- After `due_ranked.sql`, in the claim's transaction: the rows it will claim, locked (rows another
-- process holds are skipped, not waited for).
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
