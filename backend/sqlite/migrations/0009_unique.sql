-- 0009: unique jobs. A unique job carries its key (unique_key, '' for a
-- job without one) and the states it holds the key in, as the bitmask of
-- sluicetype.UniqueStatesMask (each state's place in AllStates). The key is
-- held by the partial unique index below: a row is in it only while its
-- state's bit is set, so no transition statement has to clear or set the
-- key — a job that completes, dies or is cancelled leaves the index by
-- changing state, and an operator's retry that would bring a second
-- holder into it fails on the index (the store turns that into
-- UniqueHeldError naming the holder). Inserts hold the key atomically:
-- a second insert of a held key writes nothing. The CASE is the mapping
-- of sluicetype.UniqueStateBit; TestUniqueIndexMatchesStateBits holds
-- them together.
ALTER TABLE jobs ADD COLUMN unique_key TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN unique_states INTEGER NOT NULL DEFAULT 0;

CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key)
    WHERE unique_key <> '' AND (unique_states & (CASE state WHEN 'scheduled' THEN 1 WHEN 'available' THEN 2
        WHEN 'running' THEN 4 WHEN 'retryable' THEN 8 WHEN 'completed' THEN 16 WHEN 'archived' THEN 32
        WHEN 'quarantined' THEN 64 WHEN 'undecodable' THEN 128 WHEN 'cancelled' THEN 256 ELSE 0 END)) <> 0;

-- A job's key, held or not: the holder lookup after a refused insert or
-- retry, and the console's unique: filter.
CREATE INDEX jobs_unique_key_all ON jobs (unique_key) WHERE unique_key <> '';
