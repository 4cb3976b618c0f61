-- 0005: the events of a deleted job go with it by one statement-level
-- trigger instead of the foreign key of 0001 (job_events.job_id
-- REFERENCES jobs ON DELETE CASCADE).
--
-- The key checked every event row inserted: one lookup and row lock of
-- its job per row, run as a trigger each. A bulk retry writes one event
-- per job it retries, and that check was a sixth of its server time
-- (10 of ~60 µs of backend CPU per retried job, measured at 100,000 dead
-- jobs). Every event is written by a transaction that holds its job (it
-- changed or locked the job's row first), so the key caught nothing the
-- writes do not ensure already; what it also did, deleting a job's
-- events with it, the trigger does, once per DELETE statement, over the
-- deleted rows.
CREATE FUNCTION {s}.jobs_delete_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {s}.job_events WHERE job_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_delete_events AFTER DELETE ON {s}.jobs
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION {s}.jobs_delete_events();
ALTER TABLE {s}.job_events DROP CONSTRAINT job_events_job_id_fkey;
