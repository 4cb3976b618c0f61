-- 0006: signals buffered for waiting workflows (engine/wait.go), per
-- (job, name) in the order sent; a wait takes the oldest of its name in
-- the write that records it. seq orders them and names one.
CREATE TABLE job_signals (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id  TEXT NOT NULL,
	name    TEXT NOT NULL,
	payload TEXT NOT NULL,
	sent_at INTEGER NOT NULL
);
CREATE INDEX job_signals_job ON job_signals (job_id, name, seq);
