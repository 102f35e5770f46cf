-- The due index's entries of many occurrences replaced at once, called by the claim and record
-- statements across tenants (their tenants' triggers off for the statement). Each (slug, id) given
-- loses its entry; those with a due time get a new one. VOLATILE: its statements take a snapshot of
-- their own when they run, so an entry moved by a writer the caller waited for is not missed.
-- Returns how many entries were written.
CREATE OR REPLACE FUNCTION {shared}.almanac_due_index_moved_v2(
    p_slugs varchar[], p_ids integer[], p_dues timestamptz[], p_priorities integer[]) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    written integer;
BEGIN
    DELETE FROM {shared}.due_index AS d USING unnest(p_slugs, p_ids) AS g(slug, id)
    WHERE d.tenant_slug = g.slug AND d.occurrence_id = g.id;
    INSERT INTO {shared}.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    SELECT slug, id, due, priority FROM unnest(p_slugs, p_ids, p_dues, p_priorities) AS n(slug, id, due, priority)
    WHERE due IS NOT NULL
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END
$$
