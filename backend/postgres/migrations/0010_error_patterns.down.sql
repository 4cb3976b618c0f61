-- 0010 down: nothing to undo in the schema. The patterns stay as this
-- build wrote them; an older build groups new deaths its own way beside
-- them.
SELECT 1;
