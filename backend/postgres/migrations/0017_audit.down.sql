-- 0017 down: the audit trail is dropped with its records.
DROP TABLE IF EXISTS {s}.audit_log;
DROP FUNCTION IF EXISTS {s}.audit_log_append_only();
