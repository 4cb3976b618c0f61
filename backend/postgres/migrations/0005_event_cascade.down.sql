-- 0005 down: the foreign key of 0001 again, after the events of jobs that
-- are gone (none, if every writer kept the rule) are deleted.
DROP TRIGGER IF EXISTS jobs_delete_events ON {s}.jobs;
DROP FUNCTION IF EXISTS {s}.jobs_delete_events();
DELETE FROM {s}.job_events e WHERE NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.id = e.job_id);
ALTER TABLE {s}.job_events ADD CONSTRAINT job_events_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES {s}.jobs (id) ON DELETE CASCADE;
