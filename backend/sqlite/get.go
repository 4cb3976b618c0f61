package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Reading one job and its timeline.

// JobGetByID returns one job, with its payload only when asked.
func (s *Store) JobGetByID(ctx context.Context, p *backend.JobGetByIDParams) (*sluicetype.Job, error) {
	q := sqlGetJobNoPayload
	if p.IncludePayload {
		q = sqlGetJob
	}
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	j, err := scanJob(st.QueryRowContext(ctx, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get job %s: %w", p.ID, err)
	}
	return j, nil
}

// JobEventList returns a job's stored events, oldest first.
func (s *Store) JobEventList(ctx context.Context, p *backend.JobEventListParams) ([]sluicetype.Event, error) {
	st, err := s.readStmt(ctx, `SELECT job_id, kind, at, actor, from_state, to_state, attempt, message
		FROM job_events WHERE job_id = ? ORDER BY id`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, p.JobID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events of job %s: %w", p.JobID, err)
	}
	defer rows.Close()
	var out []sluicetype.Event
	for rows.Next() {
		var e sluicetype.Event
		var at int64
		var kind, from, to string
		if err := rows.Scan(&e.JobID, &kind, &at, &e.Actor, &from, &to, &e.Attempt, &e.Message); err != nil {
			return nil, fmt.Errorf("sqlite: events of job %s: %w", p.JobID, err)
		}
		e.Kind, e.From, e.To, e.At = sluicetype.EventKind(kind), sluicetype.State(from), sluicetype.State(to), fromNanos(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: events of job %s: %w", p.JobID, err)
	}
	return out, nil
}
