-- 0012: a row of limit_starts holds a claim's starts under one rate
-- limit (n), not one start: a limit's window is read as sum(n), and a
-- window at 30,000 starts/s holds a claim's row per batch, not 30,000 rows
-- for every claim to count and prune. Rows written before hold one start.
ALTER TABLE limit_starts ADD COLUMN n INTEGER NOT NULL DEFAULT 1;
