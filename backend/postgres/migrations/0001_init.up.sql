-- 0001: the whole schema of the PostgreSQL store, in the schema named by
-- the store URL ({s} below is replaced by it, quoted).
--
-- Times are bigint unix nanoseconds (UTC), as on SQLite: the store's clock
-- is the server's clock_timestamp() (microseconds, times 1000), and times
-- the caller gives (a deadline, a schedule) are kept to the nanosecond, so
-- every comparison and keyset cursor is exact. JSON values are jsonb, so
-- payload.<path> and meta.<key> filters use jsonb operators and GIN.

CREATE TABLE {s}.jobs (
    id               text    NOT NULL PRIMARY KEY,
    queue            text    NOT NULL,
    kind             text    NOT NULL,
    payload          jsonb,
    schema_version   integer NOT NULL DEFAULT 1,
    metadata         jsonb,
    tags             text[]  NOT NULL DEFAULT '{}',
    priority         integer NOT NULL DEFAULT 0,
    state            text    NOT NULL,
    attempt          integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL DEFAULT 0,
    crash_attempt    integer NOT NULL DEFAULT 0,
    fingerprint      text    NOT NULL DEFAULT '',
    fence            bigint  NOT NULL DEFAULT 0,
    scheduled_at     bigint  NOT NULL,
    deadline         bigint,
    timeout_ns       bigint  NOT NULL DEFAULT 0,
    created_at       bigint  NOT NULL,
    attempted_at     bigint,
    attempted_by     text    NOT NULL DEFAULT '',
    state_changed_at bigint  NOT NULL,
    finalized_at     bigint,
    terminal_reason  text    NOT NULL DEFAULT '',
    lease_id         text,
    lease_worker     text,
    lease_expires_at bigint,
    errors           jsonb   NOT NULL DEFAULT '[]',
    version          bigint  NOT NULL DEFAULT 1,
    checkpoint       jsonb,
    dead_letter_of   text    NOT NULL DEFAULT '',
    retry_of         text    NOT NULL DEFAULT '',
    superseded_by    text    NOT NULL DEFAULT '',
    -- The last failed attempt's message and its normalised pattern
    -- (engine.NormalizeError), written with the error: the error filter
    -- reads last_error, error groups read error_pattern.
    last_error       text    NOT NULL DEFAULT '',
    error_pattern    text    NOT NULL DEFAULT ''
);

-- Claims: the next available jobs of a queue in priority order; suspects
-- (crash_attempt > 0) in their own small index. Partial indexes keep the
-- claim's scan to available rows: a claimed or finished job leaves them,
-- so a claim does not walk the dead tuples of jobs done long ago.
CREATE INDEX jobs_claim ON {s}.jobs (queue, priority, scheduled_at, id)
    WHERE state = 'available' AND crash_attempt = 0;
CREATE INDEX jobs_claim_suspect ON {s}.jobs (queue, priority, scheduled_at, id)
    WHERE state = 'available' AND crash_attempt > 0;
CREATE INDEX jobs_deadline ON {s}.jobs (queue, deadline)
    WHERE state = 'available' AND deadline IS NOT NULL;
CREATE INDEX jobs_due ON {s}.jobs (scheduled_at)
    WHERE state IN ('scheduled', 'retryable');
CREATE INDEX jobs_fingerprint ON {s}.jobs (fingerprint);
-- Listing newest first, and retention; the hot states are left out (every
-- claim and completion would write it).
CREATE INDEX jobs_state_changed ON {s}.jobs (state, state_changed_at, id)
    WHERE state NOT IN ('available', 'running');
-- Listing available jobs newest first: claims never write it (a claimed
-- row leaves the partial index); an enqueue or a retry adds one entry.
-- Without it the console's first page of a large backlog read and sorted
-- every available job, or the whole table.
CREATE INDEX jobs_available_listing ON {s}.jobs (state_changed_at, id)
    WHERE state = 'available';
-- The reaper's scan and listing running jobs (few: the concurrency).
CREATE INDEX jobs_running ON {s}.jobs (lease_expires_at)
    WHERE state = 'running';
CREATE INDEX jobs_error_groups ON {s}.jobs (state, queue, kind, error_pattern, state_changed_at, id)
    WHERE state IN ('archived', 'quarantined', 'undecodable');
CREATE INDEX jobs_superseded ON {s}.jobs (superseded_by) WHERE superseded_by <> '';
-- payload.<path> and meta.<key> filters: containment (@>) on these. The
-- hot states (available, running) are left out: a job then gets one GIN
-- entry in its life, when it finishes, instead of one at enqueue, one at
-- claim (every UPDATE writes a new row version) and one at completion;
-- measured, the GIN entry was a sixth of a claim's WAL at a tiny payload.
-- A filter on those states reads their listing index and tests each row.
CREATE INDEX jobs_payload ON {s}.jobs USING gin (payload jsonb_path_ops)
    WHERE state NOT IN ('available', 'running');
CREATE INDEX jobs_metadata ON {s}.jobs USING gin (metadata jsonb_path_ops)
    WHERE state NOT IN ('available', 'running');

-- Stored timeline events (failures, crashes, operator actions); they go
-- with their job.
CREATE TABLE {s}.job_events (
    id         bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     text    NOT NULL REFERENCES {s}.jobs (id) ON DELETE CASCADE,
    kind       text    NOT NULL,
    at         bigint  NOT NULL,
    actor      text    NOT NULL DEFAULT '',
    from_state text    NOT NULL DEFAULT '',
    to_state   text    NOT NULL DEFAULT '',
    attempt    integer NOT NULL DEFAULT 0,
    message    text    NOT NULL DEFAULT ''
);
CREATE INDEX job_events_job ON {s}.job_events (job_id, id);

CREATE TABLE {s}.fingerprints (
    fingerprint text    NOT NULL PRIMARY KEY,
    kind        text    NOT NULL DEFAULT '',
    status      text    NOT NULL,
    since       bigint  NOT NULL,
    crashes     integer NOT NULL DEFAULT 0,
    last_error  text    NOT NULL DEFAULT '',
    last_job_id text    NOT NULL DEFAULT ''
);
CREATE INDEX fingerprints_status ON {s}.fingerprints (status, since);

CREATE TABLE {s}.workers (
    id           text    NOT NULL PRIMARY KEY,
    host         text    NOT NULL DEFAULT '',
    pid          integer NOT NULL DEFAULT 0,
    queues       text[]  NOT NULL DEFAULT '{}',
    started_at   bigint  NOT NULL,
    heartbeat_at bigint  NOT NULL,
    expires_at   bigint  NOT NULL
);

CREATE TABLE {s}.leaders (
    name       text   NOT NULL PRIMARY KEY,
    holder     text   NOT NULL,
    expires_at bigint NOT NULL
);

CREATE TABLE {s}.queues (
    name      text    NOT NULL PRIMARY KEY,
    paused    boolean NOT NULL DEFAULT false,
    paused_at bigint,
    paused_by text    NOT NULL DEFAULT ''
);

-- Jobs per queue and state, kept exact in the transactions that move
-- jobs. Each transaction adds its deltas to one of 16 shards (chosen at
-- random), so concurrent claims and completions of one queue do not queue
-- up behind one counter row; a read sums the shards.
CREATE TABLE {s}.job_counts (
    queue text    NOT NULL,
    state text    NOT NULL,
    shard integer NOT NULL,
    n     bigint  NOT NULL,
    PRIMARY KEY (queue, state, shard)
);

CREATE TABLE {s}.operations (
    id               text    NOT NULL PRIMARY KEY,
    action           text    NOT NULL,
    selector         text    NOT NULL,
    status           text    NOT NULL,
    created_by       text    NOT NULL DEFAULT '',
    created_at       bigint  NOT NULL,
    started_at       bigint,
    finished_at      bigint,
    matched          bigint  NOT NULL DEFAULT 0,
    processed        bigint  NOT NULL DEFAULT 0,
    succeeded        bigint  NOT NULL DEFAULT 0,
    failed           bigint  NOT NULL DEFAULT 0,
    error            text    NOT NULL DEFAULT '',
    rate             integer NOT NULL DEFAULT 0,
    cursor_id        text    NOT NULL DEFAULT '',
    lease_holder     text    NOT NULL DEFAULT '',
    lease_fence      bigint  NOT NULL DEFAULT 0,
    lease_expires_at bigint  NOT NULL DEFAULT 0
);
CREATE INDEX operations_created ON {s}.operations (created_at, id);

-- Idempotency keys and the steps committed under them (see
-- engine.IdempotencyStore and backend/sqlite's migration 0003).
CREATE TABLE {s}.idempotency_keys (
    key              text   NOT NULL PRIMARY KEY,
    request_hash     text   NOT NULL,
    state            text   NOT NULL,
    token            text   NOT NULL DEFAULT '',
    claim_expires_at bigint NOT NULL DEFAULT 0,
    created_at       bigint NOT NULL,
    expires_at       bigint NOT NULL,
    response         bytea
);
CREATE INDEX idempotency_keys_expires ON {s}.idempotency_keys (expires_at);

CREATE TABLE {s}.idempotency_steps (
    key        text   NOT NULL,
    step       text   NOT NULL,
    result     text,
    applied_at bigint NOT NULL,
    PRIMARY KEY (key, step)
);
