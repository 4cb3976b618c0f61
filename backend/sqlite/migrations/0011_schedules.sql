-- 0009: periodic jobs' schedules (engine.Periodic, backend.ScheduleStore).
-- One row per schedule a program declared; last_tick only moves forward
-- (compare and set in ScheduleMarkFired). Times are Unix nanoseconds;
-- trigger_at 0 means no run now is pending.
CREATE TABLE IF NOT EXISTS schedules (
	name       TEXT    NOT NULL PRIMARY KEY,
	spec       TEXT    NOT NULL,
	zone       TEXT    NOT NULL,
	last_tick  INTEGER NOT NULL,
	last_job   TEXT    NOT NULL DEFAULT '',
	fired_at   INTEGER NOT NULL DEFAULT 0,
	paused     INTEGER NOT NULL DEFAULT 0,
	trigger_at INTEGER NOT NULL DEFAULT 0,
	seen_at    INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
