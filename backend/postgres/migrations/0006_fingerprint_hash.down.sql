-- 0006 down: the text index of 0001 again.
DROP INDEX IF EXISTS {s}.jobs_fingerprint;
CREATE INDEX jobs_fingerprint ON {s}.jobs (fingerprint);
