-- 0008: a job's fingerprint is indexed in a table of its own,
-- job_fingerprints (the fingerprint's 64-bit hash, the job's id), written
-- when a job is inserted or its fingerprint changes and deleted with the
-- job, instead of in jobs_fingerprint on the jobs table.
--
-- A claim and a completion change a job's state, which the partial
-- indexes name, so neither is a HOT update: each wrote a new entry in
-- every index on jobs, jobs_fingerprint among them, for a fingerprint
-- that never changes. That index was the largest single cost of the hot
-- path's index writes (throughput ran 14-28% faster without it). Here a
-- job's fingerprint costs one row and one entry when it is inserted, and
-- nothing when it runs. Every lookup by fingerprint (quarantine, hold,
-- release, the fingerprint: filter) reads the job ids here and checks
-- the jobs' own fingerprint column, which a hash collision fails.
--
-- Triggers keep the table, so every writer of jobs (and every test that
-- inserts rows by hand) keeps it alike: one statement trigger per INSERT
-- over the inserted rows, a row trigger on an UPDATE that sets the
-- fingerprint to another value (a payload edited, a dead letter's retry),
-- and the DELETE trigger of 0005, which now also deletes the rows of the
-- deleted jobs.
CREATE TABLE {s}.job_fingerprints (
    fp     bigint NOT NULL,
    job_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (fp, job_id)
);
INSERT INTO {s}.job_fingerprints (fp, job_id)
    SELECT hashtextextended(fingerprint, 0), id FROM {s}.jobs WHERE fingerprint <> '';
DROP INDEX IF EXISTS {s}.jobs_fingerprint;

CREATE FUNCTION {s}.jobs_insert_fingerprints() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.job_fingerprints (fp, job_id)
        SELECT hashtextextended(fingerprint, 0), id FROM born WHERE fingerprint <> '';
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_insert_fingerprints AFTER INSERT ON {s}.jobs
    REFERENCING NEW TABLE AS born FOR EACH STATEMENT
    EXECUTE FUNCTION {s}.jobs_insert_fingerprints();

CREATE FUNCTION {s}.jobs_update_fingerprint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {s}.job_fingerprints WHERE fp = hashtextextended(OLD.fingerprint, 0) AND job_id = OLD.id;
    IF NEW.fingerprint <> '' THEN
        INSERT INTO {s}.job_fingerprints (fp, job_id) VALUES (hashtextextended(NEW.fingerprint, 0), NEW.id)
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_update_fingerprint AFTER UPDATE OF fingerprint ON {s}.jobs
    FOR EACH ROW WHEN (OLD.fingerprint IS DISTINCT FROM NEW.fingerprint)
    EXECUTE FUNCTION {s}.jobs_update_fingerprint();

CREATE OR REPLACE FUNCTION {s}.jobs_delete_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {s}.job_events WHERE job_id IN (SELECT id FROM gone);
    DELETE FROM {s}.job_fingerprints f USING gone g
        WHERE g.fingerprint <> '' AND f.fp = hashtextextended(g.fingerprint, 0) AND f.job_id = g.id;
    RETURN NULL;
END
$$;
