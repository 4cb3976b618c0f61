-- 0007 down: the database's collation again.
ALTER TABLE {s}.job_counts
    ALTER COLUMN queue TYPE text COLLATE "default",
    ALTER COLUMN state TYPE text COLLATE "default";
ALTER TABLE {s}.job_signals ALTER COLUMN job_id TYPE text COLLATE "default";
ALTER TABLE {s}.job_events ALTER COLUMN job_id TYPE text COLLATE "default";
ALTER TABLE {s}.jobs
    ALTER COLUMN id TYPE text COLLATE "default",
    ALTER COLUMN queue TYPE text COLLATE "default",
    ALTER COLUMN kind TYPE text COLLATE "default",
    ALTER COLUMN state TYPE text COLLATE "default",
    ALTER COLUMN error_pattern TYPE text COLLATE "default",
    ALTER COLUMN superseded_by TYPE text COLLATE "default";
