-- 0011: unique jobs. A unique job carries its key (unique_key, '' for a
-- job without one) and the states it holds the key in, as the bitmask of
-- sluicetype.UniqueStatesMask (each state's place in AllStates). The key is
-- held by the unique index below, over the jobs with a key, on the key
-- and '' while the row's state has its bit set (its id otherwise, which
-- no other row shares): two rows may share a key only while at most one
-- of them holds it. So no transition statement has to clear or set the
-- key — a job that completes, dies or is cancelled gives it up by
-- changing state — and an operator's retry that would make a second
-- holder fails on the index (the store turns that into UniqueHeldError
-- naming the holder). An insert of a held key writes nothing (ON
-- CONFLICT DO NOTHING), however many sessions race. One index serves the
-- holder lookup and the unique: filter. The CASE is the mapping of
-- sluicetype.UniqueStateBit (uniqueHoldsSQL in insert.go spells the same
-- expression; TestUniqueIndexMatchesStateBits holds them together).
-- Both columns have constant defaults: adding them rewrites no row.
ALTER TABLE {s}.jobs ADD COLUMN IF NOT EXISTS unique_key text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE {s}.jobs ADD COLUMN IF NOT EXISTS unique_states integer NOT NULL DEFAULT 0;

CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique_key ON {s}.jobs (unique_key, (CASE WHEN (unique_states & (CASE state
        WHEN 'scheduled' THEN 1 WHEN 'available' THEN 2 WHEN 'running' THEN 4 WHEN 'retryable' THEN 8
        WHEN 'completed' THEN 16 WHEN 'archived' THEN 32 WHEN 'quarantined' THEN 64 WHEN 'undecodable' THEN 128
        WHEN 'cancelled' THEN 256 ELSE 0 END)) <> 0 THEN '' ELSE id END))
    WHERE unique_key <> '';
