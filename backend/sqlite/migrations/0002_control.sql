-- 0002: the operator surface: last errors, paused queues, maintained
-- counters, bulk operations, and indexes for listing that spare the hot
-- path.

-- The last failed attempt's message and its normalised pattern
-- (engine.NormalizeError), written with the error by JobFinish: the error
-- filter reads last_error, error groups and errgroup selectors read
-- error_pattern. Earlier rows get their last message back from errors[];
-- their pattern stays '' (the normaliser is Go code).
ALTER TABLE jobs ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN error_pattern TEXT NOT NULL DEFAULT '';
UPDATE jobs SET last_error = coalesce(errors ->> '$[#-1].message', '') WHERE errors != '[]';

-- Listing newest first by the time the job entered its state, and
-- retention (a terminal job's state_changed_at is its finalized_at). The
-- hot states are left out: with them, every claim and every completion
-- rewrote an entry here. Listing available jobs walks jobs_claim and
-- jobs_claim_suspect and sorts; listing running jobs walks jobs_running
-- and sorts. A query uses this index only when it repeats the index's
-- WHERE term word for word (SQLite does not prove state = 'archived'
-- implies it), which the filter builder does.
DROP INDEX jobs_state_changed;
CREATE INDEX jobs_state_changed ON jobs (state, state_changed_at, id)
    WHERE state NOT IN ('available', 'running');

-- The reaper's scan for expired leases, and listing running jobs. Running
-- jobs are few (the workers' concurrency): a claim adds one small entry, a
-- completion removes it.
CREATE INDEX jobs_running ON jobs (lease_expires_at)
    WHERE state = 'running';

-- Error groups of dead jobs, and errgroup selectors. Counting a group and
-- its first and last death reads the index alone; listing a group's jobs
-- reads it in listing order (state_changed_at, id). Written only on the
-- way into and out of a dead state, but that is the bulk retry's whole
-- work: measured, it costs about a third of a bulk retry's throughput
-- (38k against 53k jobs/s) and saves error groups five times as much
-- (100 against 490 ms at 100k archived jobs).
-- The WHERE term is ORs, not IN: SQLite evaluates an IN list of three or
-- more constants through a temporary table built for every statement,
-- which every single-row INSERT and UPDATE of jobs would pay.
CREATE INDEX jobs_error_groups ON jobs (state, queue, kind, error_pattern, state_changed_at, id)
    WHERE (state = 'archived' OR state = 'quarantined' OR state = 'undecodable');

-- Queues an operator paused (or resumed: the row stays, paused = 0).
-- Workers do not claim from a paused queue.
CREATE TABLE queues (
    name      TEXT    NOT NULL PRIMARY KEY,
    paused    INTEGER NOT NULL DEFAULT 0,
    paused_at INTEGER,
    paused_by TEXT    NOT NULL DEFAULT ''
);

-- Jobs per queue and state, kept exact: every write that inserts, deletes
-- or moves jobs adds its deltas here in the same transaction, one upsert
-- per (queue, state) it touched. SQLite has one writer, so a row every
-- transaction updates is no point of contention. Rows may hold 0.
CREATE TABLE job_counts (
    queue TEXT    NOT NULL,
    state TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;

INSERT INTO job_counts (queue, state, n)
    SELECT queue, state, count(*) FROM jobs GROUP BY queue, state;

-- Bulk operations. selector is the engine.Filter as JSON; cursor_id is
-- the last job id a batch examined (ids are walked in order). The lease
-- (holder, fence, expiry) lets one engine at a time run an operation and
-- any engine resume it.
CREATE TABLE operations (
    id               TEXT    NOT NULL PRIMARY KEY,
    action           TEXT    NOT NULL,
    selector         TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    created_by       TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER,
    matched          INTEGER NOT NULL DEFAULT 0,
    processed        INTEGER NOT NULL DEFAULT 0,
    succeeded        INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    error            TEXT    NOT NULL DEFAULT '',
    rate             INTEGER NOT NULL DEFAULT 0,
    cursor_id        TEXT    NOT NULL DEFAULT '',
    lease_holder     TEXT    NOT NULL DEFAULT '',
    lease_fence      INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX operations_created ON operations (created_at, id);
