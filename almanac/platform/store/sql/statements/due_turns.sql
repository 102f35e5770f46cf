-- The tenants a claim pass claimed from have had their turn (`tenant_turns`, `due_pick.sql`): at the
-- end of the pass's transaction, in the order of their names (two passes never wait on each other
-- in a cycle), with the database's clock, one time for the whole pass.
INSERT INTO tenant_turns (tenant_slug, served_at)
SELECT slug, (SELECT clock_timestamp()) FROM unnest(CAST(:slugs AS varchar[])) AS s(slug) ORDER BY slug
ON CONFLICT (tenant_slug) DO UPDATE SET served_at = EXCLUDED.served_at
