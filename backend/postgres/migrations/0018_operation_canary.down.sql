-- 0018 down: canary runs are forgotten; an operation halted by its
-- canary stays halted (no runner takes it) until it is cancelled.
ALTER TABLE {s}.operations DROP COLUMN IF EXISTS canary_recent;
ALTER TABLE {s}.operations DROP COLUMN IF EXISTS canary;
