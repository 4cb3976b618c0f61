-- 0001: jobs, their timeline, quarantine records, workers and leader leases.
--
-- Times are INTEGER unix nanoseconds (UTC) from the store's clock, so
-- comparisons and keyset order are exact. JSON values (payload, metadata,
-- tags, errors, checkpoint) are stored as TEXT so SQLite's JSON functions
-- read them.

CREATE TABLE jobs (
    id               TEXT    NOT NULL PRIMARY KEY,
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    payload          TEXT,
    schema_version   INTEGER NOT NULL DEFAULT 1,
    metadata         TEXT,
    tags             TEXT    NOT NULL DEFAULT '[]',
    priority         INTEGER NOT NULL DEFAULT 0,
    state            TEXT    NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 0,
    crash_attempt    INTEGER NOT NULL DEFAULT 0,
    fingerprint      TEXT    NOT NULL DEFAULT '',
    fence            INTEGER NOT NULL DEFAULT 0,
    scheduled_at     INTEGER NOT NULL,
    deadline         INTEGER,
    timeout_ns       INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    attempted_at     INTEGER,
    attempted_by     TEXT    NOT NULL DEFAULT '',
    state_changed_at INTEGER NOT NULL,
    finalized_at     INTEGER,
    terminal_reason  TEXT    NOT NULL DEFAULT '',
    lease_id         TEXT,
    lease_worker     TEXT,
    lease_expires_at INTEGER,
    errors           TEXT    NOT NULL DEFAULT '[]',
    version          INTEGER NOT NULL DEFAULT 1,
    checkpoint       TEXT,
    dead_letter_of   TEXT    NOT NULL DEFAULT '',
    retry_of         TEXT    NOT NULL DEFAULT '',
    superseded_by    TEXT    NOT NULL DEFAULT ''
);

-- Claim: the next available jobs of a queue in priority order. Suspects
-- (crash_attempt > 0) have their own small index: they are taken only when
-- the non-suspects do not fill a batch.
CREATE INDEX jobs_claim ON jobs (queue, priority, scheduled_at, id)
    WHERE state = 'available' AND crash_attempt = 0;
CREATE INDEX jobs_claim_suspect ON jobs (queue, priority, scheduled_at, id)
    WHERE state = 'available' AND crash_attempt > 0;

-- Available jobs with a deadline, archived at claim once it has passed.
CREATE INDEX jobs_deadline ON jobs (queue, deadline)
    WHERE state = 'available' AND deadline IS NOT NULL;

-- Scheduled and retryable jobs coming due.
CREATE INDEX jobs_due ON jobs (scheduled_at)
    WHERE state IN ('scheduled', 'retryable');

-- Quarantine: a fingerprint's jobs. Without state, so transitions never
-- touch it.
CREATE INDEX jobs_fingerprint ON jobs (fingerprint);

-- Listing newest first by the time the job entered its state; retention
-- (a terminal job's state_changed_at is its finalized_at); the reaper's
-- scan of running jobs for expired leases (running jobs are few: at most
-- the workers' concurrency), which spares every claim and completion a
-- lease index write.
CREATE INDEX jobs_state_changed ON jobs (state, state_changed_at, id);

-- Stored timeline events (failures, crashes, operator actions). The happy
-- path is derived from the job's own columns.
CREATE TABLE job_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    actor      TEXT    NOT NULL DEFAULT '',
    from_state TEXT    NOT NULL DEFAULT '',
    to_state   TEXT    NOT NULL DEFAULT '',
    attempt    INTEGER NOT NULL DEFAULT 0,
    message    TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX job_events_job ON job_events (job_id, id);

-- A job's events go with it, whoever deletes it.
CREATE TRIGGER jobs_delete_events AFTER DELETE ON jobs
BEGIN
    DELETE FROM job_events WHERE job_id = OLD.id;
END;

-- Quarantine records, one per payload fingerprint.
CREATE TABLE fingerprints (
    fingerprint TEXT    NOT NULL PRIMARY KEY,
    kind        TEXT    NOT NULL DEFAULT '',
    status      TEXT    NOT NULL,
    since       INTEGER NOT NULL,
    crashes     INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT    NOT NULL DEFAULT '',
    last_job_id TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX fingerprints_status ON fingerprints (status, since);

-- Worker processes and their heartbeats.
CREATE TABLE workers (
    id           TEXT    NOT NULL PRIMARY KEY,
    host         TEXT    NOT NULL DEFAULT '',
    pid          INTEGER NOT NULL DEFAULT 0,
    queues       TEXT    NOT NULL DEFAULT '[]',
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);

-- Maintenance leases.
CREATE TABLE leaders (
    name       TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);
