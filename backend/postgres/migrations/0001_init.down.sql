-- 0001 down: every table of the schema (the schema itself stays).
DROP TABLE IF EXISTS {s}.idempotency_steps, {s}.idempotency_keys, {s}.operations, {s}.job_counts,
    {s}.queues, {s}.leaders, {s}.workers, {s}.fingerprints, {s}.job_events, {s}.jobs;
