-- 0009: unique jobs. A unique job carries its key (unique_key, '' for a
-- job without one) and the states it holds the key in, as the bitmask of
-- sluicetype.UniqueStatesMask (each state's place in AllStates). The key is
-- held by the unique index below, over the jobs with a key, on the key
-- and '' while the row's state has its bit set (its id otherwise, which
-- no other row shares): two rows may share a key only while at most one
-- of them holds it. So no transition statement has to clear or set the
-- key — a job that completes, dies or is cancelled gives it up by
-- changing state — and an operator's retry that would make a second
-- holder fails on the index (the store turns that into UniqueHeldError
-- naming the holder). An insert of a held key writes nothing. One index
-- serves the holder lookup and the unique: filter, so a unique insert
-- writes one index entry more than a plain one, not two. The CASE is the
-- mapping of sluicetype.UniqueStateBit; TestUniqueIndexMatchesStateBits
-- holds them together.
ALTER TABLE jobs ADD COLUMN unique_key TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN unique_states INTEGER NOT NULL DEFAULT 0;

CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key, (CASE WHEN (unique_states & (CASE state
        WHEN 'scheduled' THEN 1 WHEN 'available' THEN 2 WHEN 'running' THEN 4 WHEN 'retryable' THEN 8
        WHEN 'completed' THEN 16 WHEN 'archived' THEN 32 WHEN 'quarantined' THEN 64 WHEN 'undecodable' THEN 128
        WHEN 'cancelled' THEN 256 ELSE 0 END)) <> 0 THEN '' ELSE id END))
    WHERE unique_key <> '';
