package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// JobGetByID returns one job, with its payload only when asked.
func (s *Store) JobGetByID(ctx context.Context, p *backend.JobGetByIDParams) (*sluicetype.Job, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	q := sqlGetJobNoPay
	if p.IncludePayload {
		q = sqlGetJob
	}
	j, err := scanJob(s.pool.QueryRow(ctx, s.sql(q), p.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get job %s: %w", p.ID, err)
	}
	return j, nil
}

// JobEventList returns a job's stored events, oldest first.
func (s *Store) JobEventList(ctx context.Context, p *backend.JobEventListParams) ([]sluicetype.Event, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT job_id, kind, at, actor, from_state, to_state, attempt, message
		FROM {s}.job_events WHERE job_id = $1 ORDER BY id`), p.JobID)
	if err != nil {
		return nil, fmt.Errorf("postgres: events of job %s: %w", p.JobID, err)
	}
	defer rows.Close()
	var out []sluicetype.Event
	for rows.Next() {
		var e sluicetype.Event
		var at int64
		var attempt int32
		var kind, from, to string
		if err := rows.Scan(&e.JobID, &kind, &at, &e.Actor, &from, &to, &attempt, &e.Message); err != nil {
			return nil, fmt.Errorf("postgres: events of job %s: %w", p.JobID, err)
		}
		e.Kind, e.From, e.To, e.At, e.Attempt = sluicetype.EventKind(kind), sluicetype.State(from), sluicetype.State(to), fromNanos(at), int(attempt)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: events of job %s: %w", p.JobID, err)
	}
	return out, nil
}
