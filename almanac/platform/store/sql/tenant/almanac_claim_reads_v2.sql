-- A tenant's reads of a claim pass, as static SQL that a backend plans once (`store_claim_reads`):
--   kind 0  a due occurrence it locked (FOR UPDATE SKIP LOCKED), its schedule's or job's row, their
--           script's (LEFT JOINs: NULL where there is none)
--   kind 1  a running attempt of one of those schedules (id, schedule id, lease end in `o_scheduled_for`)
--   kind 2  the day's use: runs started since `a_day`, and their milliseconds
-- Columns are prefixed by what they come from (o_ occurrence, s_ schedule, j_ job, c_ script, d_ day),
-- each named as its table's column; the caller reads them by name (`sql.functions.CLAIM_READS`).
-- Plan settings as in almanac_claim_writes_v2.
CREATE OR REPLACE FUNCTION {tenant}.almanac_claim_reads_v2(a_ids int[], a_now timestamptz, a_day timestamptz, a_running varchar)
RETURNS TABLE (kind int,
    o_id int, o_schedule_id int, o_job_id int, o_schedule_version int, o_scheduled_for timestamptz,
    o_trigger varchar, o_status varchar, o_attempt int, o_lease_token varchar, o_priority int, o_due_at timestamptz,
    s_id int, s_script_id int, s_input_kind varchar, s_rrule text, s_payload text, s_enabled boolean,
    s_misfire varchar, s_catchup_window_s int, s_overlap varchar, s_expire_after_s int, s_max_attempts int,
    s_retry_backoff_s int, s_priority int, s_version int,
    j_id int, j_key varchar, j_script_id int, j_run_at timestamptz, j_payload text, j_expire_after_s int,
    j_max_attempts int, j_state varchar, j_root_key varchar, j_depth int,
    c_id int, c_timeout_ms int, c_memory_mb int, c_current_version int,
    d_runs bigint, d_ms bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET random_page_cost = 1.1
AS $body$
BEGIN
    RETURN QUERY
    WITH l AS (
        SELECT o.id, o.schedule_id, o.job_id, o.schedule_version, o.scheduled_for, o.trigger, o.status, o.attempt,
               o.lease_token, o.priority, o.due_at
        FROM {tenant}.occurrences AS o
        WHERE o.id = ANY(a_ids) AND o.due_at <= a_now
        FOR UPDATE SKIP LOCKED
    )
    SELECT 0, l.*,
           s.id, s.script_id, s.input_kind, s.rrule, s.payload, s.enabled, s.misfire, s.catchup_window_s, s.overlap,
           s.expire_after_s, s.max_attempts, s.retry_backoff_s, s.priority, s.version,
           j.id, j.key, j.script_id, j.run_at, j.payload, j.expire_after_s, j.max_attempts, j.state, j.root_key,
           j.depth,
           c.id, c.timeout_ms, c.memory_mb, c.current_version,
           NULL::bigint, NULL::bigint
    FROM l
    LEFT JOIN {tenant}.schedules AS s ON s.id = l.schedule_id
    LEFT JOIN {tenant}.jobs AS j ON j.id = l.job_id
    LEFT JOIN {tenant}.scripts AS c ON c.id = coalesce(s.script_id, j.script_id)
    UNION ALL
    SELECT 1, r.id, r.schedule_id, NULL, NULL, r.lease_until, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL
    FROM {tenant}.occurrences AS r
    WHERE r.schedule_id = ANY(ARRAY(SELECT l.schedule_id FROM l WHERE l.schedule_id IS NOT NULL))
      AND r.status = a_running
    UNION ALL
    SELECT 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL,
           count(*), coalesce(sum(u.duration_ms), 0)
    FROM {tenant}.runs AS u
    WHERE u.created_at >= a_day AND u.status NOT IN ('skipped', 'expired');
END
$body$
