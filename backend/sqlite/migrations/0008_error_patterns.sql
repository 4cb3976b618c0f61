-- 0008: error patterns are normalised again, from each job's last error,
-- by the build that applies this migration (renormalizeErrorPatterns in
-- migrate.go): ids of any alphabet read as ids (req_aabdbebe groups with
-- req_36652661) and schema names are kept (column "decade" and column
-- "facade" part), so the jobs that died before the upgrade group as the
-- ones that die after it.
SELECT 1;
