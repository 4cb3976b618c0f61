-- 0009: concurrency limits across processes (backend.LimitStore). A claim
-- counts the running jobs a limit covers in its own write transaction; no
-- row here is written by claims or finishes.
CREATE TABLE IF NOT EXISTS limits (
	scope TEXT NOT NULL,
	name TEXT NOT NULL,
	concurrency INTEGER NOT NULL,
	partition_key TEXT NOT NULL DEFAULT '',
	rate INTEGER NOT NULL DEFAULT 0,
	rate_window INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER NOT NULL,
	updated_by TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (scope, name)
);

-- One row per start under a rate limit, written by the claim that starts
-- the job (inserts, never an update of one row), read for the limit's
-- window and pruned past it by the same claims.
CREATE TABLE IF NOT EXISTS limit_starts (
	scope TEXT NOT NULL,
	name TEXT NOT NULL,
	at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS limit_starts_at ON limit_starts (scope, name, at);
