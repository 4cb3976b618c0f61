-- 0014 down: one row per start again; a row holding several is lost as
-- several (the window undercounts them until it passes).
ALTER TABLE {s}.limit_starts DROP COLUMN IF EXISTS n;
