-- 0015: operators' verdicts on error groups (resolved or ignored), one row
-- a group. Only ErrorGroupTriageSet writes here: a death writes nothing,
-- and whether a resolved group came back is read from its jobs.
CREATE TABLE IF NOT EXISTS {s}.error_group_triage (
    queue   text   COLLATE "C" NOT NULL,
    kind    text   COLLATE "C" NOT NULL,
    pattern text   COLLATE "C" NOT NULL,
    status  text   NOT NULL CHECK (status IN ('resolved', 'ignored')),
    note    text   NOT NULL DEFAULT '',
    actor   text   NOT NULL DEFAULT '',
    at      bigint NOT NULL,
    PRIMARY KEY (queue, kind, pattern)
);
