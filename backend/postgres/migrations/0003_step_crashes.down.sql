-- 0005 down: the step crash counts.
DROP TABLE IF EXISTS {s}.fingerprint_step_crashes;
