-- 0016 down: operations start at once again; one still waiting for its
-- start time is claimed at the next maintenance.
ALTER TABLE {s}.operations DROP COLUMN IF EXISTS start_at;
