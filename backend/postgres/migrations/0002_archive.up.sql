-- 0002: the cold archive. Terminal jobs of the queues that opt in are
-- copied here by the retention sweep, in the transaction that deletes
-- them, for audit (not redrive). Partitioned by the month of eviction
-- (evicted_at, unix nanoseconds): the sweep creates the partitions ahead,
-- and a closed month past the archive's retention is dropped whole,
-- never vacuumed row by row. Partitions are named job_archive_YYYYMM.
CREATE TABLE {s}.job_archive (
    evicted_at       bigint  NOT NULL,
    id               text    NOT NULL,
    queue            text    NOT NULL,
    kind             text    NOT NULL,
    payload          jsonb,
    schema_version   integer NOT NULL,
    metadata         jsonb,
    tags             text[]  NOT NULL,
    priority         integer NOT NULL,
    state            text    NOT NULL,
    attempt          integer NOT NULL,
    max_attempts     integer NOT NULL,
    crash_attempt    integer NOT NULL,
    fingerprint      text    NOT NULL,
    fence            bigint  NOT NULL,
    scheduled_at     bigint  NOT NULL,
    deadline         bigint,
    timeout_ns       bigint  NOT NULL,
    created_at       bigint  NOT NULL,
    attempted_at     bigint,
    attempted_by     text    NOT NULL,
    state_changed_at bigint  NOT NULL,
    finalized_at     bigint,
    terminal_reason  text    NOT NULL,
    errors           jsonb   NOT NULL,
    version          bigint  NOT NULL,
    dead_letter_of   text    NOT NULL,
    retry_of         text    NOT NULL,
    superseded_by    text    NOT NULL,
    last_error       text    NOT NULL,
    error_pattern    text    NOT NULL,
    PRIMARY KEY (id, evicted_at)
) PARTITION BY RANGE (evicted_at);
CREATE INDEX job_archive_queue ON {s}.job_archive (queue, evicted_at, id);
