-- 0008 down: jobs_fingerprint of 0006 again, and the DELETE trigger of
-- 0005 as it was.
CREATE OR REPLACE FUNCTION {s}.jobs_delete_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {s}.job_events WHERE job_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS jobs_update_fingerprint ON {s}.jobs;
DROP FUNCTION IF EXISTS {s}.jobs_update_fingerprint();
DROP TRIGGER IF EXISTS jobs_insert_fingerprints ON {s}.jobs;
DROP FUNCTION IF EXISTS {s}.jobs_insert_fingerprints();
DROP TABLE IF EXISTS {s}.job_fingerprints;
CREATE INDEX jobs_fingerprint ON {s}.jobs (hashtextextended(fingerprint, 0));
