-- 0015: the audit trail, one row per operator action, appended in the
-- action's own transaction (or on its own for a refusal). The columns an
-- audit query filters on are columns; the rest of the record is JSON.
-- No route updates a row: the trigger refuses it, so a bug cannot
-- rewrite history. Only the retention sweep deletes, oldest first.
CREATE TABLE IF NOT EXISTS audit_log (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	at INTEGER NOT NULL,
	actor TEXT NOT NULL,
	action TEXT NOT NULL,
	job_id TEXT NOT NULL DEFAULT '',
	operation_id TEXT NOT NULL DEFAULT '',
	record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_at ON audit_log (at);
CREATE INDEX IF NOT EXISTS audit_log_job ON audit_log (job_id, id) WHERE job_id <> '';
CREATE INDEX IF NOT EXISTS audit_log_op ON audit_log (operation_id, id) WHERE operation_id <> '';
CREATE TRIGGER IF NOT EXISTS audit_log_append_only BEFORE UPDATE ON audit_log
BEGIN
	SELECT RAISE(ABORT, 'audit records are append-only');
END;
