-- 0007: the text columns the hot indexes order by compare bytes
-- (COLLATE "C") instead of the database's collation. A claim, a
-- completion and a retry insert entries in btrees keyed by id, queue,
-- kind and state; under a libc collation (C.UTF-8 and en_US alike) each
-- comparison goes through strcoll, and the store's backends spent 7%
-- more CPU per job (BENCHMARKS.md). Byte order is also the order SQLite
-- (BINARY) and Redis (lex ranges) list ids in, and Go's. Only the
-- indexes are rebuilt: a change of collation does not rewrite the rows.
ALTER TABLE {s}.jobs
    ALTER COLUMN id TYPE text COLLATE "C",
    ALTER COLUMN queue TYPE text COLLATE "C",
    ALTER COLUMN kind TYPE text COLLATE "C",
    ALTER COLUMN state TYPE text COLLATE "C",
    ALTER COLUMN error_pattern TYPE text COLLATE "C",
    ALTER COLUMN superseded_by TYPE text COLLATE "C";
ALTER TABLE {s}.job_events ALTER COLUMN job_id TYPE text COLLATE "C";
ALTER TABLE {s}.job_signals ALTER COLUMN job_id TYPE text COLLATE "C";
ALTER TABLE {s}.job_counts
    ALTER COLUMN queue TYPE text COLLATE "C",
    ALTER COLUMN state TYPE text COLLATE "C";
