-- 0011 down: no unique jobs; the keys are dropped with their columns.
DROP INDEX IF EXISTS {s}.jobs_unique_key;
ALTER TABLE {s}.jobs DROP COLUMN IF EXISTS unique_states;
ALTER TABLE {s}.jobs DROP COLUMN IF EXISTS unique_key;
