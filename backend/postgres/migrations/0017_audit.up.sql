-- 0017: the audit trail, one row per operator action, appended in the
-- action's own transaction (or on its own for a refusal). The columns an
-- audit query filters on are columns; the rest of the record is JSON.
-- No route updates a row: the trigger refuses it, so a bug cannot
-- rewrite history. Only the retention sweep deletes, oldest first.
CREATE TABLE IF NOT EXISTS {s}.audit_log (
	id bigserial PRIMARY KEY,
	at bigint NOT NULL,
	actor text COLLATE "C" NOT NULL,
	action text COLLATE "C" NOT NULL,
	job_id text COLLATE "C" NOT NULL DEFAULT '',
	operation_id text COLLATE "C" NOT NULL DEFAULT '',
	record jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_at ON {s}.audit_log (at);
CREATE INDEX IF NOT EXISTS audit_log_job ON {s}.audit_log (job_id, id) WHERE job_id <> '';
CREATE INDEX IF NOT EXISTS audit_log_op ON {s}.audit_log (operation_id, id) WHERE operation_id <> '';
-- The jobs of an action given several (an apply, a batch enqueue): a job
-- filter reads job_id or this, by containment.
CREATE INDEX IF NOT EXISTS audit_log_ids ON {s}.audit_log USING gin ((record->'ids'));
CREATE OR REPLACE FUNCTION {s}.audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'audit records are append-only';
END;
$$;
DROP TRIGGER IF EXISTS audit_log_append_only ON {s}.audit_log;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE ON {s}.audit_log
	FOR EACH ROW EXECUTE FUNCTION {s}.audit_log_append_only();
