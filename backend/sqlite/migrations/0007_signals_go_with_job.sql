-- 0007: a job's buffered signals go with it, whoever deletes it, as its
-- events do (jobs_delete_events); before this a deleted job's signals
-- stayed, and a new job under its id would have taken them. Signals
-- already orphaned that way are dropped.
DELETE FROM job_signals WHERE job_id NOT IN (SELECT id FROM jobs);

CREATE TRIGGER jobs_delete_signals AFTER DELETE ON jobs
BEGIN
    DELETE FROM job_signals WHERE job_id = OLD.id;
END;
