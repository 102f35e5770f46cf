CREATE SCHEMA {tenant};

CREATE FUNCTION {tenant}.almanac_claim_reads(a_ids integer[], a_now timestamp with time zone, a_day timestamp with time zone, a_running character varying) RETURNS TABLE(kind integer, o_id integer, o_schedule_id integer, o_job_id integer, o_schedule_version integer, o_scheduled_for timestamp with time zone, o_trigger character varying, o_status character varying, o_attempt integer, o_lease_token character varying, o_priority integer, o_due_at timestamp with time zone, s_id integer, s_script_id integer, s_input_kind character varying, s_rrule text, s_payload text, s_enabled boolean, s_misfire character varying, s_catchup_window_s integer, s_overlap character varying, s_expire_after_s integer, s_max_attempts integer, s_retry_backoff_s integer, s_priority integer, s_version integer, j_id integer, j_key character varying, j_script_id integer, j_run_at timestamp with time zone, j_payload text, j_expire_after_s integer, j_max_attempts integer, j_state character varying, j_root_key character varying, j_depth integer, c_id integer, c_timeout_ms integer, c_memory_mb integer, c_current_version integer, d_runs bigint, d_ms bigint)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET random_page_cost TO '1.1'
    AS $$
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
$$;

CREATE FUNCTION {tenant}.almanac_claim_reads_v2(a_ids integer[], a_now timestamp with time zone, a_day timestamp with time zone, a_running character varying) RETURNS TABLE(kind integer, o_id integer, o_schedule_id integer, o_job_id integer, o_schedule_version integer, o_scheduled_for timestamp with time zone, o_trigger character varying, o_status character varying, o_attempt integer, o_lease_token character varying, o_priority integer, o_due_at timestamp with time zone, s_id integer, s_script_id integer, s_input_kind character varying, s_rrule text, s_payload text, s_enabled boolean, s_misfire character varying, s_catchup_window_s integer, s_overlap character varying, s_expire_after_s integer, s_max_attempts integer, s_retry_backoff_s integer, s_priority integer, s_version integer, j_id integer, j_key character varying, j_script_id integer, j_run_at timestamp with time zone, j_payload text, j_expire_after_s integer, j_max_attempts integer, j_state character varying, j_root_key character varying, j_depth integer, c_id integer, c_timeout_ms integer, c_memory_mb integer, c_current_version integer, d_runs bigint, d_ms bigint)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET random_page_cost TO '1.1'
    AS $$
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
$$;

CREATE FUNCTION {tenant}.almanac_claim_writes(pl_scheduled_for timestamp with time zone[], pl_due_at timestamp with time zone[], pl_priority integer[], pl_trigger character varying[], pl_status character varying[], pl_attempt integer[], pl_created_at timestamp with time zone[], pl_schedule_id integer[], pl_schedule_version integer[], nx_id integer[], nx_next timestamp with time zone[], ru_occurrence_id integer[], ru_schedule_id integer[], ru_job_key character varying[], ru_script_id integer[], ru_script_version integer[], ru_trigger character varying[], ru_scheduled_for timestamp with time zone[], ru_created_at timestamp with time zone[], ru_started_at timestamp with time zone[], ru_status character varying[], ru_attempt integer[], ru_lease_token character varying[], cas_id integer[], cas_status character varying[], cas_attempt integer[], cas_token character varying[], cas_lease timestamp with time zone[], running character varying) RETURNS TABLE(kind integer, id integer, run_id integer, due_at timestamp with time zone, priority integer)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET random_page_cost TO '1.1'
    AS $$
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
$$;

CREATE FUNCTION {tenant}.almanac_claim_writes_v2(pl_scheduled_for timestamp with time zone[], pl_due_at timestamp with time zone[], pl_priority integer[], pl_trigger character varying[], pl_status character varying[], pl_attempt integer[], pl_created_at timestamp with time zone[], pl_schedule_id integer[], pl_schedule_version integer[], nx_id integer[], nx_next timestamp with time zone[], ru_occurrence_id integer[], ru_schedule_id integer[], ru_job_key character varying[], ru_script_id integer[], ru_script_version integer[], ru_trigger character varying[], ru_scheduled_for timestamp with time zone[], ru_created_at timestamp with time zone[], ru_started_at timestamp with time zone[], ru_status character varying[], ru_attempt integer[], ru_lease_token character varying[], cas_id integer[], cas_status character varying[], cas_attempt integer[], cas_token character varying[], cas_lease timestamp with time zone[], running character varying) RETURNS TABLE(kind integer, id integer, run_id integer, due_at timestamp with time zone, priority integer)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET random_page_cost TO '1.1'
    AS $$
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
$$;

CREATE FUNCTION {tenant}.almanac_pending_jobs_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    change bigint := 0;
    made bigint;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT change + count(*) INTO change FROM changed_new WHERE state = 'pending';
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        SELECT change - count(*) INTO change FROM changed_old WHERE state = 'pending';
    END IF;
    IF change <> 0 THEN
        INSERT INTO {tenant}.pending_job_counts (n) VALUES (change) RETURNING id INTO made;
        IF mod(made, 128) = 0 THEN
            WITH folded AS (
                DELETE FROM {tenant}.pending_job_counts WHERE id IN (
                    SELECT id FROM {tenant}.pending_job_counts FOR UPDATE SKIP LOCKED)
                RETURNING n)
            INSERT INTO {tenant}.pending_job_counts (n) SELECT sum(n) FROM folded HAVING count(*) > 0;
        END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION {tenant}.almanac_pending_jobs_changed_v2() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    change bigint := 0;
    made bigint;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT change + count(*) INTO change FROM changed_new WHERE state = 'pending';
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        SELECT change - count(*) INTO change FROM changed_old WHERE state = 'pending';
    END IF;
    IF change <> 0 THEN
        INSERT INTO {tenant}.pending_job_counts (n) VALUES (change) RETURNING id INTO made;
        IF mod(made, 128) = 0 THEN
            WITH folded AS (
                DELETE FROM {tenant}.pending_job_counts WHERE id IN (
                    SELECT id FROM {tenant}.pending_job_counts FOR UPDATE SKIP LOCKED)
                RETURNING n)
            INSERT INTO {tenant}.pending_job_counts (n) SELECT sum(n) FROM folded HAVING count(*) > 0;
        END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION {tenant}.almanac_pending_jobs_held_v1(a_tenant_key integer, a_quota_key integer) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(a_tenant_key, a_quota_key);
    RETURN (SELECT coalesce(sum(c.n), 0) FROM {tenant}.pending_job_counts AS c);
END
$$;

CREATE FUNCTION {tenant}.almanac_record_plain(a_occurrence_ids integer[], a_tokens character varying[], a_run_ids integer[], a_status character varying[], a_reason character varying[], a_started_at timestamp with time zone[], a_finished_at timestamp with time zone[], a_output text[], a_error text[], a_error_line integer[], a_logs text[], a_duration_ms integer[], a_event text[], a_cpu_ms integer[], a_http text[], a_job_ids integer[], a_job_run_at timestamp with time zone[], a_job_at timestamp with time zone[], a_schedule_ids integer[], a_queued_due timestamp with time zone, a_done character varying, a_running character varying, a_queued character varying, a_job_done character varying, a_job_pending character varying) RETURNS TABLE(w_kind integer, w_id integer, w_due_at timestamp with time zone, w_priority integer)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET random_page_cost TO '1.1'
    AS $$
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
$$;

CREATE FUNCTION {tenant}.almanac_record_plain_v2(a_occurrence_ids integer[], a_tokens character varying[], a_run_ids integer[], a_status character varying[], a_reason character varying[], a_started_at timestamp with time zone[], a_finished_at timestamp with time zone[], a_output text[], a_error text[], a_error_line integer[], a_logs text[], a_duration_ms integer[], a_event text[], a_cpu_ms integer[], a_http text[], a_job_ids integer[], a_job_run_at timestamp with time zone[], a_job_at timestamp with time zone[], a_schedule_ids integer[], a_queued_due timestamp with time zone, a_done character varying, a_running character varying, a_queued character varying, a_job_done character varying, a_job_pending character varying) RETURNS TABLE(w_kind integer, w_id integer, w_due_at timestamp with time zone, w_priority integer)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET random_page_cost TO '1.1'
    AS $$
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
$$;

CREATE FUNCTION {tenant}.almanac_renew_leases_v1(a_ids integer[], a_tokens character varying[], a_leases timestamp with time zone[], a_running character varying) RETURNS TABLE(w_id integer, w_due_at timestamp with time zone, w_priority integer)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET random_page_cost TO '1.1'
    AS $$
BEGIN
    RETURN QUERY
    UPDATE {tenant}.occurrences AS o SET lease_until = v.lease, due_at = v.lease
    FROM unnest(a_ids, a_tokens, a_leases) AS v(id, token, lease)
    WHERE o.id = ANY(a_ids) AND o.id = v.id AND o.lease_token = v.token AND o.status = a_running
    RETURNING o.id, o.due_at, o.priority;
END
$$;

CREATE TABLE {tenant}.alembic_version (
    version_num character varying(32) NOT NULL
);

CREATE TABLE {tenant}.calendars (
    name character varying(64) NOT NULL,
    body text NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    updated_by character varying(200) NOT NULL
);

CREATE TABLE {tenant}.deliveries (
    id integer NOT NULL,
    event_id integer NOT NULL,
    target_id integer NOT NULL,
    order_key character varying(220) NOT NULL,
    status character varying(12) NOT NULL,
    attempts integer NOT NULL,
    next_attempt_at timestamp with time zone,
    lease_token character varying(32),
    lease_until timestamp with time zone,
    last_status_code integer,
    last_error character varying(500),
    last_latency_ms integer,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE {tenant}.deliveries_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.deliveries_id_seq OWNED BY {tenant}.deliveries.id;

CREATE TABLE {tenant}.delivery_attempts (
    id integer NOT NULL,
    delivery_id integer NOT NULL,
    number integer NOT NULL,
    at timestamp with time zone NOT NULL,
    outcome character varying(12) NOT NULL,
    status_code integer,
    latency_ms integer NOT NULL,
    error character varying(500)
);

CREATE SEQUENCE {tenant}.delivery_attempts_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.delivery_attempts_id_seq OWNED BY {tenant}.delivery_attempts.id;

CREATE TABLE {tenant}.egress_hosts (
    entry character varying(300) NOT NULL,
    "position" integer NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE TABLE {tenant}.event_fanouts (
    event_id integer NOT NULL,
    public_id character varying(40) NOT NULL,
    schedule_id integer,
    job_key character varying(200),
    fanned_out_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE {tenant}.event_fanouts_event_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.event_fanouts_event_id_seq OWNED BY {tenant}.event_fanouts.event_id;

CREATE TABLE {tenant}.events (
    id integer NOT NULL,
    run_id integer,
    topic character varying(200) NOT NULL,
    data text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    delivered_at timestamp with time zone,
    attempts integer NOT NULL
);

CREATE SEQUENCE {tenant}.events_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.events_id_seq OWNED BY {tenant}.events.id;

CREATE TABLE {tenant}.jobs (
    id integer NOT NULL,
    key character varying(200) NOT NULL,
    script_id integer NOT NULL,
    run_at timestamp with time zone NOT NULL,
    payload text NOT NULL,
    expire_after_s integer,
    max_attempts integer NOT NULL,
    priority integer NOT NULL,
    state character varying(10) NOT NULL,
    root_key character varying(200) NOT NULL,
    depth integer NOT NULL,
    created_by_run_id integer,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
)
WITH (autovacuum_analyze_threshold='{spread}');

CREATE SEQUENCE {tenant}.jobs_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.jobs_id_seq OWNED BY {tenant}.jobs.id;

CREATE TABLE {tenant}.kv (
    key character varying(512) NOT NULL,
    value text NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE TABLE {tenant}.occurrences (
    id integer NOT NULL,
    schedule_id integer,
    job_id integer,
    schedule_version integer,
    scheduled_for timestamp with time zone NOT NULL,
    due_at timestamp with time zone,
    priority integer NOT NULL,
    trigger character varying(10) NOT NULL,
    status character varying(10) NOT NULL,
    attempt integer NOT NULL,
    lease_token character varying(32),
    lease_until timestamp with time zone,
    run_id integer,
    created_at timestamp with time zone NOT NULL
)
WITH (autovacuum_analyze_threshold='{spread}');

CREATE SEQUENCE {tenant}.occurrences_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.occurrences_id_seq OWNED BY {tenant}.occurrences.id;

CREATE TABLE {tenant}.pending_job_counts (
    id bigint NOT NULL,
    n integer NOT NULL
);

CREATE SEQUENCE {tenant}.pending_job_counts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.pending_job_counts_id_seq OWNED BY {tenant}.pending_job_counts.id;

CREATE TABLE {tenant}.runs (
    id integer NOT NULL,
    occurrence_id integer,
    schedule_id integer,
    job_key character varying(200),
    script_id integer,
    script_version integer,
    trigger character varying(10) NOT NULL,
    scheduled_for timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    status character varying(20) NOT NULL,
    reason character varying(200),
    attempt integer NOT NULL,
    output text,
    error text,
    error_line integer,
    logs text,
    duration_ms integer,
    lease_token character varying(32),
    event text,
    cpu_ms integer,
    http text
)
WITH (autovacuum_analyze_threshold='{spread}');

CREATE SEQUENCE {tenant}.runs_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.runs_id_seq OWNED BY {tenant}.runs.id;

CREATE TABLE {tenant}.schedules (
    id integer NOT NULL,
    name character varying(200) NOT NULL,
    script_id integer NOT NULL,
    rule_text text NOT NULL,
    input_kind character varying(10) NOT NULL,
    rrule text NOT NULL,
    timezone character varying(64) NOT NULL,
    payload text NOT NULL,
    enabled boolean NOT NULL,
    misfire character varying(10) NOT NULL,
    catchup_window_s integer NOT NULL,
    overlap character varying(10) NOT NULL,
    expire_after_s integer,
    max_attempts integer NOT NULL,
    retry_backoff_s integer NOT NULL,
    priority integer NOT NULL,
    version integer NOT NULL,
    next_run_at timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    pause_after_failures integer,
    failures_in_row integer DEFAULT 0 NOT NULL,
    paused_reason character varying(200),
    pause_note character varying(500),
    calendar character varying(64),
    calendar_policy character varying(10) DEFAULT 'skip'::character varying NOT NULL
)
WITH (autovacuum_analyze_threshold='{spread}');

CREATE SEQUENCE {tenant}.schedules_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.schedules_id_seq OWNED BY {tenant}.schedules.id;

CREATE TABLE {tenant}.script_versions (
    id integer NOT NULL,
    script_id integer NOT NULL,
    version integer NOT NULL,
    source text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    author character varying(320)
);

CREATE SEQUENCE {tenant}.script_versions_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.script_versions_id_seq OWNED BY {tenant}.script_versions.id;

CREATE TABLE {tenant}.scripts (
    id integer NOT NULL,
    name character varying(200) NOT NULL,
    current_version integer NOT NULL,
    timeout_ms integer NOT NULL,
    memory_mb integer NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE {tenant}.scripts_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.scripts_id_seq OWNED BY {tenant}.scripts.id;

CREATE TABLE {tenant}.secrets (
    name character varying(64) NOT NULL,
    value text NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE TABLE {tenant}.targets (
    id integer NOT NULL,
    kind character varying(10) NOT NULL,
    name character varying(200) NOT NULL,
    url character varying(2048),
    secret character varying(500),
    recipients text,
    topics text NOT NULL,
    subject_template text,
    body_template text,
    enabled boolean NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE {tenant}.targets_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE {tenant}.targets_id_seq OWNED BY {tenant}.targets.id;

ALTER TABLE ONLY {tenant}.deliveries ALTER COLUMN id SET DEFAULT nextval('{tenant}.deliveries_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.delivery_attempts ALTER COLUMN id SET DEFAULT nextval('{tenant}.delivery_attempts_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.event_fanouts ALTER COLUMN event_id SET DEFAULT nextval('{tenant}.event_fanouts_event_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.events ALTER COLUMN id SET DEFAULT nextval('{tenant}.events_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.jobs ALTER COLUMN id SET DEFAULT nextval('{tenant}.jobs_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.occurrences ALTER COLUMN id SET DEFAULT nextval('{tenant}.occurrences_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.pending_job_counts ALTER COLUMN id SET DEFAULT nextval('{tenant}.pending_job_counts_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.runs ALTER COLUMN id SET DEFAULT nextval('{tenant}.runs_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.schedules ALTER COLUMN id SET DEFAULT nextval('{tenant}.schedules_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.script_versions ALTER COLUMN id SET DEFAULT nextval('{tenant}.script_versions_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.scripts ALTER COLUMN id SET DEFAULT nextval('{tenant}.scripts_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.targets ALTER COLUMN id SET DEFAULT nextval('{tenant}.targets_id_seq'::regclass);

ALTER TABLE ONLY {tenant}.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);

ALTER TABLE ONLY {tenant}.pending_job_counts
    ADD CONSTRAINT pending_job_counts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.calendars
    ADD CONSTRAINT pk_calendars PRIMARY KEY (name);

ALTER TABLE ONLY {tenant}.deliveries
    ADD CONSTRAINT pk_deliveries PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.delivery_attempts
    ADD CONSTRAINT pk_delivery_attempts PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.egress_hosts
    ADD CONSTRAINT pk_egress_hosts PRIMARY KEY (entry);

ALTER TABLE ONLY {tenant}.event_fanouts
    ADD CONSTRAINT pk_event_fanouts PRIMARY KEY (event_id);

ALTER TABLE ONLY {tenant}.events
    ADD CONSTRAINT pk_events PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.jobs
    ADD CONSTRAINT pk_jobs PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.kv
    ADD CONSTRAINT pk_kv PRIMARY KEY (key);

ALTER TABLE ONLY {tenant}.occurrences
    ADD CONSTRAINT pk_occurrences PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.runs
    ADD CONSTRAINT pk_runs PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.schedules
    ADD CONSTRAINT pk_schedules PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.script_versions
    ADD CONSTRAINT pk_script_versions PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.scripts
    ADD CONSTRAINT pk_scripts PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.secrets
    ADD CONSTRAINT pk_secrets PRIMARY KEY (name);

ALTER TABLE ONLY {tenant}.targets
    ADD CONSTRAINT pk_targets PRIMARY KEY (id);

ALTER TABLE ONLY {tenant}.deliveries
    ADD CONSTRAINT uq_deliveries_event_id_target_id UNIQUE (event_id, target_id);

ALTER TABLE ONLY {tenant}.event_fanouts
    ADD CONSTRAINT uq_event_fanouts_public_id UNIQUE (public_id);

ALTER TABLE ONLY {tenant}.jobs
    ADD CONSTRAINT uq_jobs_key UNIQUE (key);

ALTER TABLE ONLY {tenant}.occurrences
    ADD CONSTRAINT uq_occurrences_job_id_scheduled_for UNIQUE (job_id, scheduled_for);

ALTER TABLE ONLY {tenant}.occurrences
    ADD CONSTRAINT uq_occurrences_schedule_id_scheduled_for UNIQUE (schedule_id, scheduled_for);

ALTER TABLE ONLY {tenant}.runs
    ADD CONSTRAINT uq_runs_occurrence_id_attempt UNIQUE (occurrence_id, attempt);

ALTER TABLE ONLY {tenant}.script_versions
    ADD CONSTRAINT uq_script_versions_script_id_version UNIQUE (script_id, version);

ALTER TABLE ONLY {tenant}.scripts
    ADD CONSTRAINT uq_scripts_name UNIQUE (name);

CREATE INDEX ix_deliveries_next_attempt_at ON {tenant}.deliveries USING btree (next_attempt_at);

CREATE INDEX ix_deliveries_status_id ON {tenant}.deliveries USING btree (status, id);

CREATE INDEX ix_deliveries_target_id_order_key_event_id ON {tenant}.deliveries USING btree (target_id, order_key, event_id);

CREATE INDEX ix_delivery_attempts_delivery_id_id ON {tenant}.delivery_attempts USING btree (delivery_id, id);

CREATE INDEX ix_events_created_at ON {tenant}.events USING btree (created_at);

CREATE INDEX ix_events_run_id ON {tenant}.events USING btree (run_id);

CREATE INDEX ix_jobs_root_key ON {tenant}.jobs USING btree (root_key);

CREATE INDEX ix_jobs_script_id ON {tenant}.jobs USING btree (script_id);

CREATE INDEX ix_occurrences_done_scheduled_for ON {tenant}.occurrences USING btree (scheduled_for) WHERE ((status)::text = 'done'::text);

CREATE INDEX ix_occurrences_due_at ON {tenant}.occurrences USING btree (due_at);

CREATE INDEX ix_occurrences_schedule_id_status ON {tenant}.occurrences USING btree (schedule_id, status);

CREATE INDEX ix_runs_created_at ON {tenant}.runs USING btree (created_at);

CREATE INDEX ix_runs_job_key_id ON {tenant}.runs USING btree (job_key, id);

CREATE INDEX ix_runs_schedule_id_id ON {tenant}.runs USING btree (schedule_id, id);

CREATE INDEX ix_runs_status_id ON {tenant}.runs USING btree (status, id);

CREATE INDEX ix_schedules_script_id ON {tenant}.schedules USING btree (script_id);

CREATE TRIGGER delivery_signal_event AFTER INSERT ON {tenant}.events FOR EACH ROW EXECUTE FUNCTION public.almanac_delivery_signal_v2();

CREATE TRIGGER delivery_signal_moved AFTER UPDATE OF next_attempt_at ON {tenant}.deliveries FOR EACH ROW WHEN ((new.next_attempt_at IS DISTINCT FROM old.next_attempt_at)) EXECUTE FUNCTION public.almanac_delivery_signal_v2();

CREATE TRIGGER delivery_signal_new AFTER INSERT ON {tenant}.deliveries FOR EACH ROW WHEN ((new.next_attempt_at IS NOT NULL)) EXECUTE FUNCTION public.almanac_delivery_signal_v2();

CREATE TRIGGER due_index_delete AFTER DELETE ON {tenant}.occurrences FOR EACH ROW EXECUTE FUNCTION public.almanac_due_index_v2();

CREATE TRIGGER due_index_insert AFTER INSERT ON {tenant}.occurrences REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT WHEN ((current_setting('almanac.due_index_by_statement'::text, true) IS DISTINCT FROM 'on'::text)) EXECUTE FUNCTION public.almanac_due_index_inserted_v2();

CREATE TRIGGER due_index_move AFTER UPDATE OF due_at, priority ON {tenant}.occurrences FOR EACH ROW WHEN ((((old.due_at IS DISTINCT FROM new.due_at) OR (old.priority IS DISTINCT FROM new.priority)) AND (current_setting('almanac.due_index_by_statement'::text, true) IS DISTINCT FROM 'on'::text))) EXECUTE FUNCTION public.almanac_due_index_v2();

CREATE TRIGGER pending_jobs_delete AFTER DELETE ON {tenant}.jobs REFERENCING OLD TABLE AS changed_old FOR EACH STATEMENT EXECUTE FUNCTION {tenant}.almanac_pending_jobs_changed_v2();

CREATE TRIGGER pending_jobs_insert AFTER INSERT ON {tenant}.jobs REFERENCING NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION {tenant}.almanac_pending_jobs_changed_v2();

CREATE TRIGGER pending_jobs_update AFTER UPDATE ON {tenant}.jobs REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION {tenant}.almanac_pending_jobs_changed_v2();

ALTER TABLE ONLY {tenant}.deliveries
    ADD CONSTRAINT fk_deliveries_target_id_targets FOREIGN KEY (target_id) REFERENCES {tenant}.targets(id) ON DELETE CASCADE;

ALTER TABLE ONLY {tenant}.delivery_attempts
    ADD CONSTRAINT fk_delivery_attempts_delivery_id_deliveries FOREIGN KEY (delivery_id) REFERENCES {tenant}.deliveries(id) ON DELETE CASCADE;

ALTER TABLE ONLY {tenant}.script_versions
    ADD CONSTRAINT fk_script_versions_script_id_scripts FOREIGN KEY (script_id) REFERENCES {tenant}.scripts(id) ON DELETE CASCADE;
