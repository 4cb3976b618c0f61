-- 0011: periodic jobs' schedules (engine.Periodic, backend.ScheduleStore).
-- One row per schedule a program declared; last_tick only moves forward
-- (compare and set in ScheduleMarkFired). Times are Unix nanoseconds;
-- trigger_at 0 means no run now is pending.
CREATE TABLE IF NOT EXISTS {s}.schedules (
    name       text    COLLATE "C" NOT NULL PRIMARY KEY,
    spec       text    NOT NULL,
    zone       text    NOT NULL,
    last_tick  bigint  NOT NULL,
    last_job   text    NOT NULL DEFAULT '',
    fired_at   bigint  NOT NULL DEFAULT 0,
    paused     boolean NOT NULL DEFAULT false,
    trigger_at bigint  NOT NULL DEFAULT 0,
    seen_at    bigint  NOT NULL,
    created_at bigint  NOT NULL
);
