-- 0014: a bulk operation may wait for a start time (start_at, the store's
-- clock in nanoseconds; NULL starts at once): it stays pending and no
-- runner claims it before then, so a run scheduled for the night survives
-- restarts like any other operation. Rows written before start at once.
ALTER TABLE operations ADD COLUMN start_at INTEGER;
