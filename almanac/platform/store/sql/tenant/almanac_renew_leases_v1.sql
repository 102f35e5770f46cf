-- A tenant's leases renewed, as static SQL that a backend plans once (`due_index.record.renew_leases`):
-- each occurrence still holding its attempt's token and running gets its new lease end, which is also
-- its due time. One row per occurrence renewed, for the shared due index (moved by the caller, triggers
-- off). Rows are locked in the order of their ids (the index scan of `id = ANY(...)`), as the record's are.
-- Plan settings as in almanac_claim_writes_v2.
CREATE OR REPLACE FUNCTION {tenant}.almanac_renew_leases_v1(
    a_ids int[], a_tokens varchar[], a_leases timestamptz[], a_running varchar)
RETURNS TABLE (w_id int, w_due_at timestamptz, w_priority int)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET random_page_cost = 1.1
AS $body$
BEGIN
    RETURN QUERY
    UPDATE {tenant}.occurrences AS o SET lease_until = v.lease, due_at = v.lease
    FROM unnest(a_ids, a_tokens, a_leases) AS v(id, token, lease)
    WHERE o.id = ANY(a_ids) AND o.id = v.id AND o.lease_token = v.token AND o.status = a_running
    RETURNING o.id, o.due_at, o.priority;
END
$body$
