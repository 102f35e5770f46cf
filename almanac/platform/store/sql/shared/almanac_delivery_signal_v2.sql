-- Row trigger of a tenant's events (INSERT) and deliveries (a `next_attempt_at` set, moved or cleared):
-- one row `(tenant, at)` tells the dispatchers to look at the tenant from `at` on.
CREATE OR REPLACE FUNCTION {shared}.almanac_delivery_signal_v2() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    slug text := replace(substr(TG_TABLE_SCHEMA, 3), '_', '-');
BEGIN
    -- Two statements, not a CASE: each branch names a column only its own table has.
    IF TG_TABLE_NAME = 'events' THEN
        INSERT INTO {shared}.delivery_signals (tenant_slug, at) VALUES (slug, NEW.created_at);
    ELSE
        -- A delivery that ended (NULL) may release the later events held back behind it: look now.
        INSERT INTO {shared}.delivery_signals (tenant_slug, at)
        VALUES (slug, COALESCE(NEW.next_attempt_at, NEW.updated_at));
    END IF;
    RETURN NULL;
END
$$
