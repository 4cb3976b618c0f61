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

// Workflows: step checkpoints under the lease, and the dead-letter route
// written with a death.

const (
	// ?1 id, ?2 lease id, ?3 fence, ?4 now, ?5 checkpoint. A lease that
	// has expired no longer records steps: the reaper may take the job.
	sqlCheckpoint = `UPDATE jobs SET checkpoint = ?5, version = version + 1
	WHERE id = ?1 AND lease_id = ?2 AND fence = ?3 AND state = 'running' AND lease_expires_at >= ?4`
	sqlSetCheckpoint  = `UPDATE jobs SET checkpoint = ?2 WHERE id = ?1`
	sqlDeadLetterRead = `SELECT state, attempt FROM jobs WHERE id = ?`
	// As sqlInsertJob, with dead_letter_of (?16).
	sqlDeadLetterInsert = `INSERT INTO jobs (id, queue, kind, payload, schema_version, metadata, tags, priority, state,
		max_attempts, fingerprint, scheduled_at, deadline, timeout_ns, created_at, state_changed_at,
		checkpoint, dead_letter_of, retry_of)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15, NULL, ?16, '')`
	// ?1 id, ?2 payload, ?3 fingerprint, ?4 now, ?5 dead_letter_of.
	sqlDeadLetterRetry = `UPDATE jobs SET state = 'available', payload = ?2, fingerprint = ?3,
		scheduled_at = ?4, state_changed_at = ?4, finalized_at = NULL, terminal_reason = '',
		max_attempts = max(max_attempts, attempt + 1), dead_letter_of = ?5, version = version + 1
	WHERE id = ?1
	RETURNING queue`
)

// JobCheckpoint replaces running jobs' checkpoints under their leases, in
// one transaction; each item is fenced on its own.
func (s *Store) JobCheckpoint(ctx context.Context, p *backend.JobCheckpointParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	st, err := s.stmts(ctx, sqlCheckpoint)
	if err != nil {
		return nil, err
	}
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		up := tx.StmtContext(ctx, st[0])
		for i, it := range p.Items {
			r, err := up.ExecContext(ctx, it.ID, it.LeaseID, it.Fence, now.UnixNano(), string(it.Checkpoint))
			if err != nil {
				return fmt.Errorf("sqlite: checkpoint job %s: %w", it.ID, err)
			}
			n, err := r.RowsAffected()
			if err != nil {
				return fmt.Errorf("sqlite: checkpoint job %s: %w", it.ID, err)
			}
			out[i] = nil
			if n == 0 {
				out[i] = fmt.Errorf("checkpoint job %s: %w", it.ID, sluicetype.ErrLeaseLost)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// finishWorkflowStmts are the statements finishCheckpoint and
// finishDeadLetter use, in that order.
var finishWorkflowStmts = []string{sqlSetCheckpoint, sqlDeadLetterRead, sqlDeadLetterInsert, sqlDeadLetterRetry, sqlInsertEvent, sqlStepCrash}

// sqlStepCrash counts one crash of ?1 fingerprint in ?2 step.
const sqlStepCrash = `INSERT INTO fingerprint_step_crashes (fingerprint, step, crashes) VALUES (?1, ?2, 1)
	ON CONFLICT (fingerprint, step) DO UPDATE SET crashes = crashes + 1`

// finishStepCrash counts a crash inside a workflow step against its
// (fingerprint, step), in the crash's transaction.
func finishStepCrash(ctx context.Context, tx *wtx, st []*sql.Stmt, p *backend.JobFinishParams) error {
	f := p.Fingerprint
	if f == nil || f.Fingerprint == "" || f.StepCrash == "" {
		return nil
	}
	if _, err := tx.StmtContext(ctx, st[5]).ExecContext(ctx, f.Fingerprint, f.StepCrash); err != nil {
		return fmt.Errorf("sqlite: finish job %s: count step crash: %w", p.ID, err)
	}
	return nil
}

// sqlStepCrashesOf reads the step counts of the fingerprints in the JSON
// array ?1.
const sqlStepCrashesOf = `SELECT fingerprint, step, crashes FROM fingerprint_step_crashes
	WHERE fingerprint IN (SELECT value FROM json_each(?1))`

// addStepCrashes fills each record's StepCrashes from the stored counts.
func (s *Store) addStepCrashes(ctx context.Context, fps []*sluicetype.Fingerprint) error {
	if len(fps) == 0 {
		return nil
	}
	names := make([]string, len(fps))
	by := make(map[string]*sluicetype.Fingerprint, len(fps))
	for i, f := range fps {
		names[i] = f.Fingerprint
		by[f.Fingerprint] = f
	}
	st, err := s.readStmt(ctx, sqlStepCrashesOf)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, jsonStrings(names))
	if err != nil {
		return fmt.Errorf("sqlite: step crashes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var fp, step string
		var n int
		if err := rows.Scan(&fp, &step, &n); err != nil {
			return fmt.Errorf("sqlite: step crashes: %w", err)
		}
		if f := by[fp]; f != nil {
			if f.StepCrashes == nil {
				f.StepCrashes = map[string]int{}
			}
			f.StepCrashes[step] = n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: step crashes: %w", err)
	}
	return nil
}

// finishCheckpoint writes a finish plan's checkpoint, before the row's
// update so that the job it returns carries it.
func finishCheckpoint(ctx context.Context, tx *wtx, st []*sql.Stmt, p *backend.JobFinishParams) error {
	if p.Checkpoint == nil {
		return nil
	}
	if _, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.ID, textOrNull(p.Checkpoint.Checkpoint)); err != nil {
		return fmt.Errorf("sqlite: finish job %s: checkpoint: %w", p.ID, err)
	}
	return nil
}

// finishDeadLetter applies a finish plan's dead-letter route in the
// death's transaction: insert the dead-letter job, or retry it when it
// exists and is terminal.
func finishDeadLetter(ctx context.Context, tx *wtx, st []*sql.Stmt, p *backend.JobFinishParams, counts countDeltas, nowNs int64) error {
	return writeDeadLetter(ctx, tx, st, p.ID, p.DeadLetter, counts, nowNs)
}

// claimDeadLetters routes a claim's deadline deaths as the plan's routes
// say, in the claim's transaction. A death whose route cannot be built
// (DeadLetterFor refuses it) stays archived unrouted rather than failing
// every claim of the queue.
func claimDeadLetters(ctx context.Context, tx *wtx, st []*sql.Stmt, pd *backend.ClaimDeadlineWrite, dead []*sluicetype.Job, counts countDeltas, nowNs int64) error {
	if pd.DeadLetter == nil {
		return nil
	}
	for _, j := range dead {
		d, err := backend.DeadLetterFor(pd.DeadLetter.For(j.Kind), j, pd.LastError, pd.Reason)
		if err != nil {
			continue
		}
		if err := writeDeadLetter(ctx, tx, st, j.ID, d, counts, nowNs); err != nil {
			return err
		}
	}
	return nil
}

// writeDeadLetter writes the route d of the death of job id.
func writeDeadLetter(ctx context.Context, tx *wtx, st []*sql.Stmt, id string, d *backend.DeadLetterWrite, counts countDeltas, nowNs int64) error {
	if d == nil || d.Job == nil {
		return nil
	}
	jp := d.Job
	var state string
	var attempt int
	err := tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, jp.ID).Scan(&state, &attempt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		tags := "[]"
		if len(jp.Tags) > 0 {
			tags = jsonStrings(jp.Tags)
		}
		due := nowNs + int64(jp.Delay)
		st8 := sluicetype.StateAvailable
		if jp.Delay > 0 {
			st8 = sluicetype.StateScheduled
		}
		if _, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx,
			jp.ID, jp.Queue, jp.Kind, string(jp.Payload), jp.SchemaVersion,
			textOrNull(jp.Metadata), tags, jp.Priority, string(st8),
			jp.MaxAttempts, jp.Fingerprint, due, nanosPtr(jp.Deadline),
			int64(jp.Timeout), nowNs, id); err != nil {
			return fmt.Errorf("sqlite: dead job %s: insert dead letter %s: %w", id, jp.ID, err)
		}
		counts.move(jp.Queue, "", st8, 1)
		return nil
	case err != nil:
		return fmt.Errorf("sqlite: dead job %s: read dead letter %s: %w", id, jp.ID, err)
	}
	if !sluicetype.State(state).Terminal() {
		return nil
	}
	var queue string
	if err := tx.StmtContext(ctx, st[3]).QueryRowContext(ctx, jp.ID, string(jp.Payload), jp.Fingerprint, nowNs, id).Scan(&queue); err != nil {
		return fmt.Errorf("sqlite: dead job %s: retry dead letter %s: %w", id, jp.ID, err)
	}
	counts.move(queue, sluicetype.State(state), sluicetype.StateAvailable, 1)
	ev := d.RetryEvent
	if _, err := tx.StmtContext(ctx, st[4]).ExecContext(ctx, jp.ID, string(ev.Kind), nowNs, ev.Actor,
		state, string(sluicetype.StateAvailable), attempt, ev.Message); err != nil {
		return fmt.Errorf("sqlite: dead job %s: retry dead letter %s: event: %w", id, jp.ID, err)
	}
	return nil
}
