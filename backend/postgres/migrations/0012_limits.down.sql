-- 0011 down: claims of an older build ignore limits.
DROP TABLE IF EXISTS {s}.limit_starts;
DROP TABLE IF EXISTS {s}.limits;
