-- 0004 down: the buffered signals.
DROP TABLE IF EXISTS {s}.job_signals;
