-- 0013: operators' verdicts on error groups (resolved or ignored), one row
-- a group. Only ErrorGroupTriageSet writes here: a death writes nothing,
-- and whether a resolved group came back is read from its jobs.
CREATE TABLE IF NOT EXISTS error_group_triage (
	queue TEXT NOT NULL,
	kind TEXT NOT NULL,
	pattern TEXT NOT NULL,
	status TEXT NOT NULL,
	note TEXT NOT NULL DEFAULT '',
	actor TEXT NOT NULL DEFAULT '',
	at INTEGER NOT NULL,
	PRIMARY KEY (queue, kind, pattern)
);
