-- 0002 down: the archive and every partition of it.
DROP TABLE IF EXISTS {s}.job_archive;
