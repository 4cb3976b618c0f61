-- 0009: concurrency limits across processes (backend.LimitStore). A claim
-- counts the running jobs a limit covers in its own write transaction; no
-- row here is written by claims or finishes.
CREATE TABLE IF NOT EXISTS limits (
	scope TEXT NOT NULL,
	name TEXT NOT NULL,
	concurrency INTEGER NOT NULL,
	partition_key TEXT NOT NULL DEFAULT '',
	updated_at INTEGER NOT NULL,
	updated_by TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (scope, name)
);
