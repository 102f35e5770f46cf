-- Statement trigger of a tenant's occurrences on INSERT (or COPY): the statement's new rows, as the
-- transition table `inserted`, reach the shared due index by one INSERT instead of one upsert a row.
CREATE OR REPLACE FUNCTION {shared}.almanac_due_index_inserted_v2() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {shared}.due_index AS d (tenant_slug, occurrence_id, due_at, priority)
    SELECT replace(substr(TG_TABLE_SCHEMA, 3), '_', '-'), id, due_at, priority FROM inserted
    WHERE due_at IS NOT NULL
    ON CONFLICT (tenant_slug, occurrence_id) DO UPDATE SET due_at = EXCLUDED.due_at, priority = EXCLUDED.priority;
    RETURN NULL;
END
$$
