package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Periodic jobs' schedules (backend.ScheduleStore): one row each in
// schedules, times in Unix nanoseconds.

const scheduleCols = `name, spec, zone, last_tick, last_job, fired_at, paused, trigger_at, seen_at, created_at`

const sqlScheduleUpsert = `INSERT INTO schedules (name, spec, zone, last_tick, seen_at, created_at)
	VALUES (?1, ?2, ?3, ?4, ?4, ?4)
	ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, zone = excluded.zone, seen_at = excluded.seen_at`

// ScheduleUpsert declares schedules, all in one transaction.
func (s *Store) ScheduleUpsert(ctx context.Context, p *backend.ScheduleUpsertParams) error {
	st, err := s.stmts(ctx, sqlScheduleUpsert)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		ins := tx.StmtContext(ctx, st[0])
		for _, d := range p.Schedules {
			if _, err := ins.ExecContext(ctx, d.Name, d.Spec, d.Zone, now.UnixNano()); err != nil {
				return fmt.Errorf("sqlite: declare schedule %s: %w", d.Name, err)
			}
		}
		return nil
	})
}

type rowScanner interface{ Scan(dest ...any) error }

func scanSchedule(r rowScanner) (*backend.ScheduleRow, error) {
	var row backend.ScheduleRow
	var last, fired, trig, seen, created int64
	if err := r.Scan(&row.Name, &row.Spec, &row.Zone, &last, &row.LastJob, &fired, &row.Paused, &trig, &seen, &created); err != nil {
		return nil, err
	}
	row.LastTick, row.SeenAt, row.CreatedAt = nanos(last), nanos(seen), nanos(created)
	if fired != 0 {
		row.FiredAt = nanos(fired)
	}
	if trig != 0 {
		row.TriggerAt = nanos(trig)
	}
	return &row, nil
}

func nanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// ScheduleList pages schedules by name.
func (s *Store) ScheduleList(ctx context.Context, p *backend.ScheduleListParams) ([]*backend.ScheduleRow, error) {
	limit := p.Limit
	if limit <= 0 || limit > backend.ScheduleListLimit {
		limit = backend.ScheduleListLimit
	}
	st, err := s.readStmt(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE name > ?1 ORDER BY name LIMIT ?2`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, p.After, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list schedules: %w", err)
	}
	defer rows.Close()
	var out []*backend.ScheduleRow
	for rows.Next() {
		row, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list schedules: %w", err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list schedules: %w", err)
	}
	return out, nil
}

// ScheduleGet returns one schedule.
func (s *Store) ScheduleGet(ctx context.Context, p *backend.ScheduleGetParams) (*backend.ScheduleRow, error) {
	st, err := s.readStmt(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE name = ?1`)
	if err != nil {
		return nil, err
	}
	row, err := scanSchedule(st.QueryRowContext(ctx, p.Name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("schedule %s: %w", p.Name, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get schedule %s: %w", p.Name, err)
	}
	return row, nil
}

// scheduleSet runs one update of a schedule and returns the row after it.
// The update takes the name as ?1 and, when withNow, the store's clock as
// ?2.
func (s *Store) scheduleSet(ctx context.Context, name, what, update string, withNow bool) (*backend.ScheduleRow, error) {
	st, err := s.stmts(ctx, update, `SELECT `+scheduleCols+` FROM schedules WHERE name = ?1`)
	if err != nil {
		return nil, err
	}
	var out *backend.ScheduleRow
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		args := []any{name}
		if withNow {
			args = append(args, now.UnixNano())
		}
		if _, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("sqlite: %s schedule %s: %w", what, name, err)
		}
		row, err := scanSchedule(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, name))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("schedule %s: %w", name, sluicetype.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: %s schedule %s: %w", what, name, err)
		}
		out = row
		return nil
	})
	return out, err
}

// SchedulePause pauses a schedule.
func (s *Store) SchedulePause(ctx context.Context, p *backend.SchedulePauseParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "pause", `UPDATE schedules SET paused = 1 WHERE name = ?1`, false)
}

// ScheduleResume resumes a schedule.
func (s *Store) ScheduleResume(ctx context.Context, p *backend.ScheduleResumeParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "resume", `UPDATE schedules SET paused = 0 WHERE name = ?1`, false)
}

// ScheduleTrigger records a run-now request unless one is pending.
func (s *Store) ScheduleTrigger(ctx context.Context, p *backend.ScheduleTriggerParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "trigger",
		`UPDATE schedules SET trigger_at = CASE WHEN trigger_at = 0 THEN ?2 ELSE trigger_at END WHERE name = ?1`, true)
}

const (
	sqlScheduleMark = `UPDATE schedules SET last_tick = ?3,
		last_job = CASE WHEN ?4 = '' THEN last_job ELSE ?4 END,
		fired_at = CASE WHEN ?4 = '' THEN fired_at ELSE ?5 END
		WHERE name = ?1 AND last_tick = ?2 AND ?3 > ?2`
	sqlScheduleClearTrigger = `UPDATE schedules SET trigger_at = 0,
		last_job = CASE WHEN ?3 = '' THEN last_job ELSE ?3 END,
		fired_at = CASE WHEN ?3 = '' THEN fired_at ELSE ?4 END
		WHERE name = ?1 AND trigger_at = ?2`
)

// ScheduleMarkFired moves schedules forward, each by compare and set, in
// one transaction.
func (s *Store) ScheduleMarkFired(ctx context.Context, p *backend.ScheduleMarkFiredParams) ([]bool, error) {
	st, err := s.stmts(ctx, sqlScheduleMark, sqlScheduleClearTrigger)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(p.Marks))
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		mark, clear := tx.StmtContext(ctx, st[0]), tx.StmtContext(ctx, st[1])
		for i, m := range p.Marks {
			out[i] = false
			if !m.To.IsZero() {
				res, err := mark.ExecContext(ctx, m.Name, m.From.UnixNano(), m.To.UnixNano(), m.Job, now.UnixNano())
				if err != nil {
					return fmt.Errorf("sqlite: mark schedule %s: %w", m.Name, err)
				}
				n, err := res.RowsAffected()
				if err != nil {
					return fmt.Errorf("sqlite: mark schedule %s: %w", m.Name, err)
				}
				out[i] = n == 1
			}
			if !m.Trigger.IsZero() {
				job := m.Job
				if !m.To.IsZero() && out[i] {
					job = "" // the tick's mark wrote it
				}
				if _, err := clear.ExecContext(ctx, m.Name, m.Trigger.UnixNano(), job, now.UnixNano()); err != nil {
					return fmt.Errorf("sqlite: clear schedule %s's run now: %w", m.Name, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
