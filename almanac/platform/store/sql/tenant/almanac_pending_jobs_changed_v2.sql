-- Statement trigger of a tenant's jobs: the statement's net change of pending jobs, one new row of
-- `pending_job_counts` (writers only insert, so they never wait on a counter row). Every 128th row
-- folds the rows it can lock into one (SKIP LOCKED: a fold never waits; uncommitted rows are kept).
CREATE OR REPLACE FUNCTION {tenant}.almanac_pending_jobs_changed_v2() RETURNS trigger LANGUAGE plpgsql AS $$
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
END $$
