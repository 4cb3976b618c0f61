package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Periodic jobs' schedules (backend.ScheduleStore): one row each in
// schedules, times in Unix nanoseconds, names in byte order (COLLATE "C")
// as every store pages them.

const scheduleCols = `name, spec, zone, last_tick, last_job, fired_at, paused, trigger_at, seen_at, created_at`

// ScheduleUpsert declares schedules in one statement.
func (s *Store) ScheduleUpsert(ctx context.Context, p *backend.ScheduleUpsertParams) error {
	names := make([]string, len(p.Schedules))
	specs := make([]string, len(p.Schedules))
	zones := make([]string, len(p.Schedules))
	for i, d := range p.Schedules {
		names[i], specs[i], zones[i] = d.Name, d.Spec, d.Zone
	}
	return s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true
		if _, err := tx.Exec(ctx, tx.q(`INSERT INTO {s}.schedules (name, spec, zone, last_tick, seen_at, created_at)
			SELECT n, sp, z, $4, $4, $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS d(n, sp, z)
			ORDER BY n
			ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, zone = excluded.zone, seen_at = excluded.seen_at`),
			names, specs, zones, tx.nowNs); err != nil {
			return fmt.Errorf("postgres: declare schedules: %w", err)
		}
		return nil
	})
}

func scanSchedule(r pgx.Row) (*backend.ScheduleRow, error) {
	var row backend.ScheduleRow
	var last, fired, trig, seen, created int64
	if err := r.Scan(&row.Name, &row.Spec, &row.Zone, &last, &row.LastJob, &fired, &row.Paused, &trig, &seen, &created); err != nil {
		return nil, err
	}
	row.LastTick, row.SeenAt, row.CreatedAt = fromNanos(last), fromNanos(seen), fromNanos(created)
	if fired != 0 {
		row.FiredAt = fromNanos(fired)
	}
	if trig != 0 {
		row.TriggerAt = fromNanos(trig)
	}
	return &row, nil
}

// ScheduleList pages schedules by name.
func (s *Store) ScheduleList(ctx context.Context, p *backend.ScheduleListParams) ([]*backend.ScheduleRow, error) {
	limit := p.Limit
	if limit <= 0 || limit > backend.ScheduleListLimit {
		limit = backend.ScheduleListLimit
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+scheduleCols+` FROM {s}.schedules WHERE name > $1 ORDER BY name LIMIT $2`), p.After, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list schedules: %w", err)
	}
	defer rows.Close()
	var out []*backend.ScheduleRow
	for rows.Next() {
		row, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list schedules: %w", err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list schedules: %w", err)
	}
	return out, nil
}

// ScheduleGet returns one schedule.
func (s *Store) ScheduleGet(ctx context.Context, p *backend.ScheduleGetParams) (*backend.ScheduleRow, error) {
	row, err := scanSchedule(s.pool.QueryRow(ctx, s.sql(`SELECT `+scheduleCols+` FROM {s}.schedules WHERE name = $1`), p.Name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("schedule %s: %w", p.Name, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get schedule %s: %w", p.Name, err)
	}
	return row, nil
}

// scheduleSet runs one update of a schedule ($1 the name, and $2 the
// store's clock when withNow) and returns the row after it.
func (s *Store) scheduleSet(ctx context.Context, name, what, set string, withNow bool) (*backend.ScheduleRow, error) {
	var out *backend.ScheduleRow
	err := s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true
		args := []any{name}
		if withNow {
			args = append(args, tx.nowNs)
		}
		row, err := scanSchedule(tx.QueryRow(ctx, tx.q(`UPDATE {s}.schedules SET `+set+` WHERE name = $1 RETURNING `+scheduleCols), args...))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("schedule %s: %w", name, sluicetype.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("postgres: %s schedule %s: %w", what, name, err)
		}
		out = row
		return nil
	})
	return out, err
}

// SchedulePause pauses a schedule.
func (s *Store) SchedulePause(ctx context.Context, p *backend.SchedulePauseParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "pause", `paused = true`, false)
}

// ScheduleResume resumes a schedule.
func (s *Store) ScheduleResume(ctx context.Context, p *backend.ScheduleResumeParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "resume", `paused = false`, false)
}

// ScheduleTrigger records a run-now request unless one is pending.
func (s *Store) ScheduleTrigger(ctx context.Context, p *backend.ScheduleTriggerParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "trigger", `trigger_at = CASE WHEN trigger_at = 0 THEN $2::bigint ELSE trigger_at END`, true)
}

// ScheduleMarkFired moves schedules forward, each by compare and set, in
// one transaction: one statement for the ticks, one for the run-now
// requests. Rows are updated in name order, so two processes marking the
// same schedules wait for each other rather than deadlock.
func (s *Store) ScheduleMarkFired(ctx context.Context, p *backend.ScheduleMarkFiredParams) ([]bool, error) {
	var (
		names, jobs, tnames, tjobs []string
		froms, tos, trigs          []int64
		idx                        = map[string]int{}
	)
	for i, m := range p.Marks {
		if !m.To.IsZero() {
			names, froms, tos, jobs = append(names, m.Name), append(froms, m.From.UnixNano()), append(tos, m.To.UnixNano()), append(jobs, m.Job)
			idx[m.Name] = i
		}
		if !m.Trigger.IsZero() {
			tnames, trigs, tjobs = append(tnames, m.Name), append(trigs, m.Trigger.UnixNano()), append(tjobs, m.Job)
		}
	}
	out := make([]bool, len(p.Marks))
	err := s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true
		clear(out)
		if len(names) > 0 {
			rows, err := tx.Query(ctx, tx.q(`UPDATE {s}.schedules s SET last_tick = m.t,
					last_job = CASE WHEN m.j = '' THEN s.last_job ELSE m.j END,
					fired_at = CASE WHEN m.j = '' THEN s.fired_at ELSE $5 END
				FROM (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[]) AS m(n, f, t, j) ORDER BY n) m
				WHERE s.name = m.n AND s.last_tick = m.f AND m.t > m.f
				RETURNING s.name`), names, froms, tos, jobs, tx.nowNs)
			if err != nil {
				return fmt.Errorf("postgres: mark schedules: %w", err)
			}
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					rows.Close()
					return fmt.Errorf("postgres: mark schedules: %w", err)
				}
				out[idx[n]] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("postgres: mark schedules: %w", err)
			}
		}
		if len(tnames) > 0 {
			if _, err := tx.Exec(ctx, tx.q(`UPDATE {s}.schedules s SET trigger_at = 0,
					last_job = CASE WHEN m.j = '' THEN s.last_job ELSE m.j END,
					fired_at = CASE WHEN m.j = '' THEN s.fired_at ELSE $4 END
				FROM unnest($1::text[], $2::bigint[], $3::text[]) AS m(n, g, j)
				WHERE s.name = m.n AND s.trigger_at = m.g`), tnames, trigs, tjobs, tx.nowNs); err != nil {
				return fmt.Errorf("postgres: clear schedules' run now: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
