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

// Waits: the signals buffered for waiting workflows and the fenced wake
// of a waiting job (backend.WaitStore).

const (
	sqlSignalJobState = `SELECT state FROM jobs WHERE id = ?`
	// ?1 job, ?2 name, ?3 payload, ?4 now.
	sqlSignalInsert = `INSERT INTO job_signals (job_id, name, payload, sent_at) VALUES (?1, ?2, ?3, ?4) RETURNING seq`
	// ?1 job, ?2 name or '' for all.
	sqlSignalList = `SELECT seq, job_id, name, payload, sent_at FROM job_signals
	WHERE job_id = ?1 AND (?2 = '' OR name = ?2) ORDER BY seq`
	sqlSignalDelete = `DELETE FROM job_signals WHERE seq = ?1 AND job_id = ?2 AND name = ?3`
	// ?1 id, ?2 lease id, ?3 fence, ?4 now, ?5 checkpoint: as sqlCheckpoint.
	sqlSignalCheckpoint = sqlCheckpoint
	// ?1 id, ?2 from, ?3 fence, ?4 to, ?5 now.
	sqlWake = `UPDATE jobs SET state = ?4, scheduled_at = ?5, state_changed_at = ?5, version = version + 1
	WHERE id = ?1 AND state = ?2 AND fence = ?3`
)

// SignalSend buffers one signal for a job.
func (s *Store) SignalSend(ctx context.Context, p *backend.SignalSendParams) (*sluicetype.Signal, error) {
	st, err := s.stmts(ctx, sqlSignalJobState, sqlSignalInsert, sqlWake, sqlInsertEvent)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.Signal
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		var state string
		err := tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.JobID).Scan(&state)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %s: %w", p.JobID, sluicetype.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: signal job %s: %w", p.JobID, err)
		}
		if sluicetype.State(state).Terminal() {
			return &sluicetype.StateError{Action: "signal", ID: p.JobID, State: sluicetype.State(state), Allowed: backend.SignalStates()}
		}
		var seq int64
		if err := tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, p.JobID, p.Name, string(p.Payload), now.UnixNano()).Scan(&seq); err != nil {
			return fmt.Errorf("sqlite: signal job %s: %w", p.JobID, err)
		}
		out = &sluicetype.Signal{JobID: p.JobID, Name: p.Name, Seq: seq, Payload: p.Payload, SentAt: now}
		if p.Wake == nil {
			return nil
		}
		woke, err := s.wake(ctx, tx, st[2], st[3], p.Wake, now.UnixNano())
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
	st, err := s.readStmt(ctx, sqlSignalList)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, p.JobID, p.Name)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list signals of job %s: %w", p.JobID, err)
	}
	defer rows.Close()
	var out []*sluicetype.Signal
	for rows.Next() {
		var sg sluicetype.Signal
		var payload string
		var at int64
		if err := rows.Scan(&sg.Seq, &sg.JobID, &sg.Name, &payload, &at); err != nil {
			return nil, fmt.Errorf("sqlite: list signals of job %s: %w", p.JobID, err)
		}
		sg.Payload = []byte(payload)
		sg.SentAt = time.Unix(0, at).UTC()
		out = append(out, &sg)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list signals of job %s: %w", p.JobID, err)
	}
	return out, nil
}

// SignalConsume takes one signal and writes the checkpoint under the
// lease, in one transaction.
func (s *Store) SignalConsume(ctx context.Context, p *backend.SignalConsumeParams) error {
	st, err := s.stmts(ctx, sqlSignalCheckpoint, sqlSignalDelete)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.ID, p.LeaseID, p.Fence, now.UnixNano(), string(p.Checkpoint))
		if err != nil {
			return fmt.Errorf("sqlite: take signal of job %s: %w", p.ID, err)
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("take signal of job %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		r, err = tx.StmtContext(ctx, st[1]).ExecContext(ctx, p.Seq, p.ID, p.Name)
		if err != nil {
			return fmt.Errorf("sqlite: take signal of job %s: %w", p.ID, err)
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("signal %q #%d of job %s: %w", p.Name, p.Seq, p.ID, sluicetype.ErrNotFound)
		}
		return nil
	})
}

// JobWake moves a job still in From at Fence to To, scheduled now.
func (s *Store) JobWake(ctx context.Context, p *backend.JobWakeParams) (bool, error) {
	st, err := s.stmts(ctx, sqlWake, sqlInsertEvent)
	if err != nil {
		return false, err
	}
	moved := false
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		var err error
		moved, err = s.wake(ctx, tx, st[0], st[1], p, now.UnixNano())
		return err
	})
	if err != nil {
		return false, err
	}
	return moved, nil
}

// wake is JobWake's write inside tx (wakeSt is sqlWake, eventSt
// sqlInsertEvent); it reports whether the job moved.
func (s *Store) wake(ctx context.Context, tx *wtx, wakeSt, eventSt *sql.Stmt, p *backend.JobWakeParams, nowNs int64) (bool, error) {
	r, err := tx.StmtContext(ctx, wakeSt).ExecContext(ctx, p.ID, string(p.From), p.Fence, string(p.To), nowNs)
	if err != nil {
		return false, fmt.Errorf("sqlite: wake job %s: %w", p.ID, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: wake job %s: %w", p.ID, err)
	}
	if n == 0 {
		return false, nil
	}
	if w := p.Event; w.Kind != "" {
		if _, err := tx.StmtContext(ctx, eventSt).ExecContext(ctx, p.ID, string(w.Kind), nowNs, w.Actor,
			string(w.From), string(w.To), w.Attempt, w.Message); err != nil {
			return false, fmt.Errorf("sqlite: wake job %s: event: %w", p.ID, err)
		}
	}
	return true, s.applyCounts(ctx, tx, countsOf(p.Counts))
}
