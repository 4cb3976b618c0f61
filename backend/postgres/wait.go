package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Waits: the signals buffered for waiting workflows and the fenced wake
// of a waiting job (backend.WaitStore).

const (
	// The row lock orders a signal against a finish writing the job's
	// wait: the engine reads the job after this commits.
	sqlSignalJobState = `SELECT state FROM {s}.jobs WHERE id = $1 FOR SHARE`
	// With a wake in the same transaction the row is updated: locked for
	// it at once, so two signals' shared locks cannot deadlock upgrading.
	sqlSignalJobStateWake = `SELECT state FROM {s}.jobs WHERE id = $1 FOR NO KEY UPDATE`
	// $1 job, $2 name, $3 payload, $4 now.
	sqlSignalInsert = `INSERT INTO {s}.job_signals (job_id, name, payload, sent_at) VALUES ($1, $2, $3::jsonb, $4)
	RETURNING seq`
	// $1 job, $2 name or '' for all.
	sqlSignalList = `SELECT seq, job_id, name, payload::text, sent_at FROM {s}.job_signals
	WHERE job_id = $1 AND ($2 = '' OR name = $2) ORDER BY seq`
	// $1 id, $2 lease id, $3 fence, $4 checkpoint.
	sqlSignalCheckpoint = `UPDATE {s}.jobs SET checkpoint = $4::jsonb, version = version + 1
	WHERE id = $1 AND lease_id = $2 AND fence = $3 AND state = 'running' AND lease_expires_at >= ` + sqlNow
	sqlSignalDelete = `DELETE FROM {s}.job_signals WHERE seq = $1 AND job_id = $2 AND name = $3`
	// $1 id, $2 from, $3 fence, $4 to, $5 now.
	sqlWake = `UPDATE {s}.jobs SET state = $4, scheduled_at = $5, state_changed_at = $5, version = version + 1
	WHERE id = $1 AND state = $2 AND fence = $3
	RETURNING queue`
)

// SignalSend buffers one signal for a job.
func (s *Store) SignalSend(ctx context.Context, p *backend.SignalSendParams) (*sluicetype.Signal, error) {
	var out *sluicetype.Signal
	err := s.writeTx(ctx, func(tx *wtx) error {
		var state string
		lock := sqlSignalJobState
		if p.Wake != nil {
			lock = sqlSignalJobStateWake
		}
		err := tx.QueryRow(ctx, tx.q(lock), p.JobID).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("job %s: %w", p.JobID, sluicetype.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("postgres: signal job %s: %w", p.JobID, err)
		}
		if sluicetype.State(state).Terminal() {
			return &sluicetype.StateError{Action: "signal", ID: p.JobID, State: sluicetype.State(state), Allowed: backend.SignalStates()}
		}
		var seq int64
		if err := tx.QueryRow(ctx, tx.q(sqlSignalInsert), p.JobID, p.Name, string(p.Payload), tx.nowNs).Scan(&seq); err != nil {
			return fmt.Errorf("postgres: signal job %s: %w", p.JobID, err)
		}
		out = &sluicetype.Signal{JobID: p.JobID, Name: p.Name, Seq: seq, Payload: p.Payload, SentAt: tx.now}
		if p.Wake == nil {
			return nil
		}
		woke, err := s.wake(ctx, tx, p.Wake)
		out.Woke = woke
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SignalList returns a job's buffered signals, oldest first.
func (s *Store) SignalList(ctx context.Context, p *backend.SignalListParams) ([]*sluicetype.Signal, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.sql(sqlSignalList), p.JobID, p.Name)
	if err != nil {
		return nil, fmt.Errorf("postgres: list signals of job %s: %w", p.JobID, err)
	}
	defer rows.Close()
	var out []*sluicetype.Signal
	for rows.Next() {
		var sg sluicetype.Signal
		var payload string
		var at int64
		if err := rows.Scan(&sg.Seq, &sg.JobID, &sg.Name, &payload, &at); err != nil {
			return nil, fmt.Errorf("postgres: list signals of job %s: %w", p.JobID, err)
		}
		sg.Payload = []byte(payload)
		sg.SentAt = fromNanos(at)
		out = append(out, &sg)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list signals of job %s: %w", p.JobID, err)
	}
	return out, nil
}

// SignalConsume takes one signal and writes the checkpoint under the
// lease, in one transaction.
func (s *Store) SignalConsume(ctx context.Context, p *backend.SignalConsumeParams) error {
	return s.writeTx(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, tx.q(sqlSignalCheckpoint), p.ID, p.LeaseID, p.Fence, string(p.Checkpoint))
		if err != nil {
			return fmt.Errorf("postgres: take signal of job %s: %w", p.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("take signal of job %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		tag, err = tx.Exec(ctx, tx.q(sqlSignalDelete), p.Seq, p.ID, p.Name)
		if err != nil {
			return fmt.Errorf("postgres: take signal of job %s: %w", p.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("signal %q #%d of job %s: %w", p.Name, p.Seq, p.ID, sluicetype.ErrNotFound)
		}
		return nil
	})
}

// JobWake moves a job still in From at Fence to To, scheduled now.
func (s *Store) JobWake(ctx context.Context, p *backend.JobWakeParams) (bool, error) {
	moved := false
	err := s.writeTx(ctx, func(tx *wtx) error {
		var err error
		moved, err = s.wake(ctx, tx, p)
		return err
	})
	if err != nil {
		return false, err
	}
	return moved, nil
}

// wake is JobWake's write inside tx; it reports whether the job moved.
func (s *Store) wake(ctx context.Context, tx *wtx, p *backend.JobWakeParams) (bool, error) {
	var queue string
	err := tx.QueryRow(ctx, tx.q(sqlWake), p.ID, string(p.From), p.Fence, string(p.To), tx.nowNs).Scan(&queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("postgres: wake job %s: %w", p.ID, err)
	}
	if w := p.Event; w.Kind != "" {
		if _, err := tx.Exec(ctx, tx.q(sqlInsertEvent), p.ID, string(w.Kind), tx.nowNs, w.Actor,
			string(w.From), string(w.To), w.Attempt, w.Message); err != nil {
			return false, fmt.Errorf("postgres: wake job %s: event: %w", p.ID, err)
		}
	}
	return true, s.applyCounts(ctx, tx, countsOf(p.Counts))
}
