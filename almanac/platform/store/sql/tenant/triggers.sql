-- The triggers of a tenant's tables, each statement ending with a line of its own ";".
-- The due index: deletes row by row, inserts once a statement, moves only when `due_at` or `priority`
-- change; the claim and record across tenants move the index themselves and turn the insert and move
-- triggers off for their statements (`almanac.due_index_by_statement`, `across.due_index_by_statement`).
CREATE OR REPLACE TRIGGER due_index_delete AFTER DELETE ON {tenant}.occurrences
FOR EACH ROW EXECUTE FUNCTION {shared}.almanac_due_index_v2()
;
CREATE OR REPLACE TRIGGER due_index_move AFTER UPDATE OF due_at, priority ON {tenant}.occurrences
FOR EACH ROW WHEN ((OLD.due_at IS DISTINCT FROM NEW.due_at OR OLD.priority IS DISTINCT FROM NEW.priority)
    AND current_setting('almanac.due_index_by_statement', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION {shared}.almanac_due_index_v2()
;
CREATE OR REPLACE TRIGGER due_index_insert AFTER INSERT ON {tenant}.occurrences
REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT
WHEN (current_setting('almanac.due_index_by_statement', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION {shared}.almanac_due_index_inserted_v2()
;
-- Delivery signals: a new event, a delivery whose next attempt is set, moved or cleared.
CREATE OR REPLACE TRIGGER delivery_signal_event AFTER INSERT ON {tenant}.events
FOR EACH ROW EXECUTE FUNCTION {shared}.almanac_delivery_signal_v2()
;
CREATE OR REPLACE TRIGGER delivery_signal_new AFTER INSERT ON {tenant}.deliveries
FOR EACH ROW WHEN (NEW.next_attempt_at IS NOT NULL) EXECUTE FUNCTION {shared}.almanac_delivery_signal_v2()
;
CREATE OR REPLACE TRIGGER delivery_signal_moved AFTER UPDATE OF next_attempt_at ON {tenant}.deliveries
FOR EACH ROW WHEN (NEW.next_attempt_at IS DISTINCT FROM OLD.next_attempt_at)
EXECUTE FUNCTION {shared}.almanac_delivery_signal_v2()
;
-- The kept count of pending jobs: every statement that changes jobs adds its net change.
CREATE OR REPLACE TRIGGER pending_jobs_insert AFTER INSERT ON {tenant}.jobs
REFERENCING NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION {tenant}.almanac_pending_jobs_changed_v2()
;
CREATE OR REPLACE TRIGGER pending_jobs_update AFTER UPDATE ON {tenant}.jobs
REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new FOR EACH STATEMENT
EXECUTE FUNCTION {tenant}.almanac_pending_jobs_changed_v2()
;
CREATE OR REPLACE TRIGGER pending_jobs_delete AFTER DELETE ON {tenant}.jobs
REFERENCING OLD TABLE AS changed_old FOR EACH STATEMENT EXECUTE FUNCTION {tenant}.almanac_pending_jobs_changed_v2()
;
