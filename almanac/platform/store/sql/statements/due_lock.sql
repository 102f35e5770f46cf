-- A lane's part of a claim pass (`due_candidates.sql`): up to :limit of its candidates, in their
-- order, locked (rows another process holds are skipped, not waited for) and due still. Each
-- candidate is one primary-key lookup.
SELECT d.tenant_slug, d.occurrence_id FROM due_index d
JOIN unnest(CAST(:slugs AS varchar[]), CAST(:ids AS integer[])) WITH ORDINALITY AS c(tenant_slug, occurrence_id, place)
  ON d.tenant_slug = c.tenant_slug AND d.occurrence_id = c.occurrence_id
WHERE d.due_at + interval '0 s' <= :now
ORDER BY c.place
LIMIT :limit
FOR UPDATE OF d SKIP LOCKED
