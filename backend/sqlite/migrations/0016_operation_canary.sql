-- 0016: a canary bulk retry keeps its stage with the operation, so a
-- restart resumes it where it was: canary holds the request, the stage,
-- the sample's ids and the outcomes last read (JSON, '' for a run
-- without a canary); canary_recent the ids of the window it watches,
-- joined by the unit separator, which each batch appends to in its own
-- transaction. Rows written before have neither.
ALTER TABLE operations ADD COLUMN canary TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN canary_recent TEXT NOT NULL DEFAULT '';
