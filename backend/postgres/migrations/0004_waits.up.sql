-- 0004: signals buffered for waiting workflows (engine/wait.go), per
-- (job, name) in the order sent; a wait takes the oldest of its name in
-- the write that records it. They go with their job.
CREATE TABLE {s}.job_signals (
    seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id  text   NOT NULL REFERENCES {s}.jobs (id) ON DELETE CASCADE,
    name    text   NOT NULL,
    payload jsonb  NOT NULL,
    sent_at bigint NOT NULL
);
CREATE INDEX job_signals_job ON {s}.job_signals (job_id, name, seq);
