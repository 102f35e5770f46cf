-- Row trigger of a tenant's occurrences on DELETE and on an UPDATE that moves `due_at` or `priority`:
-- the occurrence's entry in the shared due index is deleted and, if it is still due, inserted anew.
-- A new row, never an updated one: a pick whose snapshot predates the move skips a deleted version
-- without locking it. The INSERT keeps ON CONFLICT for an entry written outside this trigger.
CREATE OR REPLACE FUNCTION {shared}.almanac_due_index_v2() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM {shared}.due_index WHERE tenant_slug = slug AND occurrence_id = OLD.id;
    END IF;
    IF TG_OP = 'DELETE' OR NEW.due_at IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO {shared}.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    VALUES (slug, NEW.id, NEW.due_at, NEW.priority)
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    RETURN NULL;
END
$$
