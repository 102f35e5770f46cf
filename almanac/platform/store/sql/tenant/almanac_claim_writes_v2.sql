-- A tenant's claim writes of one pass, as static SQL that a backend plans once (`store_claim_across`):
--   pl   the schedules' next occurrences, INSERT ... ON CONFLICT DO NOTHING
--   nx   the schedules' `next_run_at`
--   ru   the runs, INSERT ... RETURNING their ids
--   cas  each occurrence claimed if its status and attempt are still as read, with its lease and run
-- One row per occurrence written, for the shared due index (moved by the caller, triggers off):
-- kind 0 a new one, kind 1 a claimed one with its run's id.
-- `force_generic_plan` keeps the first plan of each statement instead of planning five custom ones
-- first; `random_page_cost` is `across.RANDOM_PAGE_COST`, so that the kept plan looks rows up by key.
CREATE OR REPLACE FUNCTION {tenant}.almanac_claim_writes_v2(
    pl_scheduled_for timestamptz[], pl_due_at timestamptz[], pl_priority int[], pl_trigger varchar[],
    pl_status varchar[], pl_attempt int[], pl_created_at timestamptz[], pl_schedule_id int[],
    pl_schedule_version int[],
    nx_id int[], nx_next timestamptz[],
    ru_occurrence_id int[], ru_schedule_id int[], ru_job_key varchar[], ru_script_id int[],
    ru_script_version int[], ru_trigger varchar[], ru_scheduled_for timestamptz[], ru_created_at timestamptz[],
    ru_started_at timestamptz[], ru_status varchar[], ru_attempt int[], ru_lease_token varchar[],
    cas_id int[], cas_status varchar[], cas_attempt int[], cas_token varchar[], cas_lease timestamptz[],
    running varchar)
RETURNS TABLE (kind int, id int, run_id int, due_at timestamptz, priority int)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET random_page_cost = 1.1
AS $body$
BEGIN
    RETURN QUERY
    WITH pl AS (
        INSERT INTO {tenant}.occurrences (scheduled_for, due_at, priority, trigger, status, attempt, created_at,
                                          schedule_id, schedule_version)
        SELECT * FROM unnest(pl_scheduled_for, pl_due_at, pl_priority, pl_trigger, pl_status, pl_attempt,
                             pl_created_at, pl_schedule_id, pl_schedule_version)
        ON CONFLICT DO NOTHING
        RETURNING occurrences.id, occurrences.due_at, occurrences.priority
    ), nx AS (
        UPDATE {tenant}.schedules AS x SET next_run_at = v.next
        FROM unnest(nx_id, nx_next) AS v(id, next)
        WHERE x.id = ANY(nx_id) AND x.id = v.id
    ), ru AS (
        INSERT INTO {tenant}.runs (occurrence_id, schedule_id, job_key, script_id, script_version, trigger,
                                   scheduled_for, created_at, started_at, status, attempt, lease_token)
        SELECT * FROM unnest(ru_occurrence_id, ru_schedule_id, ru_job_key, ru_script_id, ru_script_version,
                             ru_trigger, ru_scheduled_for, ru_created_at, ru_started_at, ru_status, ru_attempt,
                             ru_lease_token)
        RETURNING runs.id, runs.occurrence_id
    ), cas AS (
        UPDATE {tenant}.occurrences AS o SET status = running, attempt = v.attempt + 1, lease_token = v.token,
            lease_until = v.lease, due_at = v.lease, run_id = ru.id
        FROM unnest(cas_id, cas_status, cas_attempt, cas_token, cas_lease) AS v(id, status, attempt, token, lease)
        JOIN ru ON ru.occurrence_id = v.id
        WHERE o.id = ANY(cas_id) AND o.id = v.id AND o.status = v.status AND o.attempt = v.attempt
        RETURNING o.id, o.run_id, o.due_at, o.priority
    )
    SELECT 0, pl.id, NULL::int, pl.due_at, pl.priority FROM pl
    UNION ALL
    SELECT 1, cas.id, cas.run_id, cas.due_at, cas.priority FROM cas;
END
$body$
