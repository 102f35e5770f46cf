-- A tenant's record of plain finished runs, as static SQL that a backend plans once (`store_record_across`):
--   rel  the fenced release of the attempts' occurrences (still holding their tokens, running)
--   run  the runs' record, row values from `unnest` of arrays
--   job  the jobs whose occurrence is done
--   que  the occurrences queued behind the schedules' runs, due at `a_queued_due`
--   rst  the schedules' failures in a row back to 0
-- One row per occurrence whose due time changed, for the shared due index: kind 0 released,
-- kind 1 requeued. Columns are prefixed `w_` and arguments `a_`, so no name means both.
-- Plan settings as in almanac_claim_writes_v2.
CREATE OR REPLACE FUNCTION {tenant}.almanac_record_plain_v2(
    a_occurrence_ids int[], a_tokens varchar[], a_run_ids int[],
    a_status varchar[], a_reason varchar[], a_started_at timestamptz[], a_finished_at timestamptz[],
    a_output text[], a_error text[], a_error_line int[], a_logs text[], a_duration_ms int[],
    a_event text[], a_cpu_ms int[], a_http text[],
    a_job_ids int[], a_job_run_at timestamptz[], a_job_at timestamptz[],
    a_schedule_ids int[], a_queued_due timestamptz,
    a_done varchar, a_running varchar, a_queued varchar, a_job_done varchar, a_job_pending varchar)
RETURNS TABLE (w_kind int, w_id int, w_due_at timestamptz, w_priority int)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET random_page_cost = 1.1
AS $body$
BEGIN
    RETURN QUERY
    WITH rel AS (
        UPDATE {tenant}.occurrences AS o SET status = a_done, due_at = NULL, lease_token = NULL, lease_until = NULL
        WHERE o.id = ANY(a_occurrence_ids) AND o.lease_token = ANY(a_tokens) AND o.status = a_running
        RETURNING o.id, o.due_at, o.priority
    ), run AS (
        UPDATE {tenant}.runs AS r SET status = v.status, reason = v.reason, started_at = v.started_at,
            finished_at = v.finished_at, output = v.output, error = v.error, error_line = v.error_line,
            logs = v.logs, duration_ms = v.duration_ms, event = v.event, cpu_ms = v.cpu_ms, http = v.http
        FROM unnest(a_run_ids, a_tokens, a_status, a_reason, a_started_at, a_finished_at, a_output, a_error,
                    a_error_line, a_logs, a_duration_ms, a_event, a_cpu_ms, a_http)
             AS v(id, token, status, reason, started_at, finished_at, output, error, error_line, logs,
                  duration_ms, event, cpu_ms, http)
        WHERE r.id = ANY(a_run_ids) AND r.id = v.id AND r.lease_token = v.token
    ), job AS (
        UPDATE {tenant}.jobs AS j SET state = a_job_done, updated_at = v.at
        FROM unnest(a_job_ids, a_job_run_at, a_job_at) AS v(id, run_at, at)
        WHERE j.id = ANY(a_job_ids) AND j.id = v.id AND j.state = a_job_pending AND j.run_at = v.run_at
    ), que AS (
        UPDATE {tenant}.occurrences AS q SET due_at = a_queued_due
        WHERE q.schedule_id = ANY(a_schedule_ids) AND q.status = a_queued
        RETURNING q.id, q.due_at, q.priority
    ), rst AS (
        UPDATE {tenant}.schedules AS s SET failures_in_row = 0
        WHERE s.id = ANY(a_schedule_ids) AND s.failures_in_row <> 0
    )
    SELECT 0, rel.id, rel.due_at, rel.priority FROM rel
    UNION ALL
    SELECT 1, que.id, que.due_at, que.priority FROM que;
END
$body$
