-- 0011 down: the schedules of periodic jobs.
DROP TABLE IF EXISTS {s}.schedules;
