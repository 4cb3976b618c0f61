-- 0015 down: an older build keeps no verdicts; every group reads as open.
DROP TABLE IF EXISTS {s}.error_group_triage;
