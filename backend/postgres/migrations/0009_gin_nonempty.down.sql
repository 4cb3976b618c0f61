-- 0009 down: the GIN indexes of 0001 again, over every finished row.
DROP INDEX IF EXISTS {s}.jobs_payload;
DROP INDEX IF EXISTS {s}.jobs_metadata;
CREATE INDEX jobs_payload ON {s}.jobs USING gin (payload jsonb_path_ops)
    WHERE state NOT IN ('available', 'running');
CREATE INDEX jobs_metadata ON {s}.jobs USING gin (metadata jsonb_path_ops)
    WHERE state NOT IN ('available', 'running');
