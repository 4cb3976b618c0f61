-- 0009: the GIN indexes of payloads and metadata leave out the rows no
-- payload. or meta. filter can match: an empty object, or none (NULL).
--
-- Every such filter names a path, so it matches only a document holding
-- that path's first key; the filters (filter.go, addPath) say so in a
-- term of their own, col <> '{}'::jsonb, which is this predicate's and
-- lets the planner take the index. A GIN index gives an empty or NULL
-- document a placeholder entry all the same, which every completion paid
-- for: most jobs carry no metadata, and many no arguments.
DROP INDEX IF EXISTS {s}.jobs_payload;
DROP INDEX IF EXISTS {s}.jobs_metadata;
CREATE INDEX jobs_payload ON {s}.jobs USING gin (payload jsonb_path_ops)
    WHERE state NOT IN ('available', 'running') AND payload <> '{}'::jsonb;
CREATE INDEX jobs_metadata ON {s}.jobs USING gin (metadata jsonb_path_ops)
    WHERE state NOT IN ('available', 'running') AND metadata <> '{}'::jsonb;
