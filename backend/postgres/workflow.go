package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Workflows: step checkpoints under the lease, the dead-letter route
// written with a death, and the replay of a job from a step.

var (
	// $1 ids, $2 lease ids, $3 fences, $4 checkpoints. A lease that has
	// expired no longer records steps: the reaper may take the job.
	// The state is a column of the items, not a literal, for the reason
	// completeSQL gives: a literal matches jobs_running's predicate, and
	// that index holds every job claimed since the last VACUUM.
	sqlCheckpoint = `WITH items AS MATERIALIZED (SELECT u.*, 'running'::text AS running
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS u(id, lease_id, fence, cp))
	UPDATE {s}.jobs j SET checkpoint = i.cp::jsonb, version = j.version + 1
	FROM items i
	WHERE j.id = ANY($1::text[]) AND j.id = i.id AND j.lease_id = i.lease_id AND j.fence = i.fence
		AND j.state = i.running AND j.lease_expires_at >= ` + sqlNow + `
	RETURNING j.id, j.fence, j.lease_id`
	sqlSetCheckpoint  = `UPDATE {s}.jobs SET checkpoint = $2::jsonb WHERE id = $1`
	sqlDeadLetterRead = `SELECT state, attempt FROM {s}.jobs WHERE id = $1 FOR UPDATE`
	// $1 id, $2 queue, $3 kind, $4 payload, $5 schema version, $6
	// metadata, $7 priority, $8 state, $9 max attempts, $10 fingerprint,
	// $11 scheduled_at, $12 deadline, $13 timeout, $14 now, $15
	// dead_letter_of.
	sqlDeadLetterInsert = `INSERT INTO {s}.jobs (id, queue, kind, payload, schema_version, metadata, tags, priority, state,
		max_attempts, fingerprint, scheduled_at, deadline, timeout_ns, created_at, state_changed_at, dead_letter_of)
	VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb, '{}', $7, $8, $9, $10, $11, $12, $13, $14, $14, $15)`
	// $1 id, $2 payload, $3 fingerprint, $4 now, $5 dead_letter_of.
	sqlDeadLetterRetry = `UPDATE {s}.jobs SET state = 'available', payload = $2::jsonb, fingerprint = $3,
		scheduled_at = $4, state_changed_at = $4, finalized_at = NULL, terminal_reason = '',
		max_attempts = greatest(max_attempts, attempt + 1), dead_letter_of = $5, version = version + 1
	WHERE id = $1
	RETURNING queue`
	// $1 original, $2 the copy's id, $3 now, $4 the copy's checkpoint.
	// The copy carries the original's unique key, as a retry with input's.
	sqlInsertForkCopy = `INSERT INTO {s}.jobs (id, queue, kind, payload, schema_version, metadata, tags, priority,
		state, max_attempts, fingerprint, scheduled_at, timeout_ns, created_at, state_changed_at, checkpoint,
		unique_key, unique_states)
	SELECT $2, queue, kind, payload, schema_version, metadata, tags, priority,
		'available', max_attempts, fingerprint, $3, timeout_ns, $3, $3, $4::jsonb, unique_key, unique_states
	FROM {s}.jobs WHERE id = $1
	ON CONFLICT (id) DO NOTHING`
	sqlForkOriginal = `UPDATE {s}.jobs SET checkpoint = $2::jsonb, superseded_by = $3, version = version + 1 WHERE id = $1`
)

// JobCheckpoint replaces running jobs' checkpoints under their leases, in
// one statement; each item is fenced on its own.
func (s *Store) JobCheckpoint(ctx context.Context, p *backend.JobCheckpointParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	n := len(p.Items)
	ids, leases, fences, cps := make([]string, n), make([]string, n), make([]int64, n), make([]string, n)
	for i, it := range p.Items {
		ids[i], leases[i], fences[i], cps[i] = it.ID, it.LeaseID, it.Fence, string(it.Checkpoint)
	}
	written := map[refKey]bool{}
	err := s.single(ctx, func(q querier) error {
		clear(written)
		rows, err := q.Query(ctx, s.sql(sqlCheckpoint), ids, leases, fences, cps)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k refKey
			if err := rows.Scan(&k.id, &k.fence, &k.lease); err != nil {
				return err
			}
			written[k] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: checkpoint jobs: %w", err)
	}
	for i, it := range p.Items {
		if !written[refKey{it.ID, it.LeaseID, it.Fence}] {
			out[i] = fmt.Errorf("checkpoint job %s: %w", it.ID, sluicetype.ErrLeaseLost)
		}
	}
	return out, nil
}

// finishCheckpoint writes a finish plan's checkpoint, before the row's
// update so that the job it returns carries it.
func finishCheckpoint(ctx context.Context, tx *wtx, p *backend.JobFinishParams) error {
	if p.Checkpoint == nil {
		return nil
	}
	var cp *string
	if len(p.Checkpoint.Checkpoint) > 0 {
		v := string(p.Checkpoint.Checkpoint)
		cp = &v
	}
	if _, err := tx.Exec(ctx, tx.q(sqlSetCheckpoint), p.ID, cp); err != nil {
		return fmt.Errorf("postgres: finish job %s: checkpoint: %w", p.ID, err)
	}
	return nil
}

// finishDeadLetter applies a finish plan's dead-letter route in the
// death's transaction: insert the dead-letter job, or retry it when it
// exists and is terminal. It returns the queue that got work ("" none).
func finishDeadLetter(ctx context.Context, tx *wtx, p *backend.JobFinishParams, counts countDeltas) (string, error) {
	return writeDeadLetter(ctx, tx, p.ID, p.DeadLetter, counts)
}

// claimTx runs a claim's statement fn on its own (single) when the plan
// routes no deadline death; else in one transaction with the routes of
// the deaths it wrote in res.Dead, so that no death is left unrouted.
func (s *Store) claimTx(ctx context.Context, pd *backend.ClaimDeadlineWrite, res *backend.JobClaimResult, fn func(q querier) error) error {
	if pd.DeadLetter == nil {
		return s.single(ctx, fn)
	}
	return s.writeTx(ctx, func(tx *wtx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return s.claimDeadLetters(ctx, tx, pd, res.Dead)
	})
}

// claimDeadLetters routes a claim's deadline deaths as the plan's routes
// say. A death whose route cannot be built (DeadLetterFor refuses it)
// stays archived unrouted rather than failing every claim of the queue.
func (s *Store) claimDeadLetters(ctx context.Context, tx *wtx, pd *backend.ClaimDeadlineWrite, dead []*sluicetype.Job) error {
	if len(dead) == 0 {
		return nil
	}
	counts := countDeltas{}
	woke := map[string]bool{}
	for _, j := range dead {
		d, err := backend.DeadLetterFor(pd.DeadLetter.For(j.Kind), j, pd.LastError, pd.Reason)
		if err != nil {
			continue
		}
		q, err := writeDeadLetter(ctx, tx, j.ID, d, counts)
		if err != nil {
			return err
		}
		if q != "" {
			woke[q] = true
		}
	}
	if err := s.applyCounts(ctx, tx, counts); err != nil {
		return err
	}
	if len(woke) > 0 {
		return s.notifyQueues(ctx, tx, woke)
	}
	return nil
}

// writeDeadLetter writes the route d of the death of job id. It returns
// the queue that got work ("" none).
func writeDeadLetter(ctx context.Context, tx *wtx, id string, d *backend.DeadLetterWrite, counts countDeltas) (string, error) {
	if d == nil || d.Job == nil {
		return "", nil
	}
	jp := d.Job
	var state string
	var attempt int
	err := tx.QueryRow(ctx, tx.q(sqlDeadLetterRead), jp.ID).Scan(&state, &attempt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		st := sluicetype.StateAvailable
		if jp.Delay > 0 {
			st = sluicetype.StateScheduled
		}
		var meta *string
		if len(jp.Metadata) > 0 {
			m := string(jp.Metadata)
			meta = &m
		}
		var deadline *int64
		if jp.Deadline != nil {
			v := jp.Deadline.UnixNano()
			deadline = &v
		}
		if _, err := tx.Exec(ctx, tx.q(sqlDeadLetterInsert), jp.ID, jp.Queue, jp.Kind, string(jp.Payload), jp.SchemaVersion,
			meta, jp.Priority, string(st), jp.MaxAttempts, jp.Fingerprint, tx.nowNs+int64(jp.Delay), deadline,
			int64(jp.Timeout), tx.nowNs, id); err != nil {
			return "", fmt.Errorf("postgres: dead job %s: insert dead letter %s: %w", id, jp.ID, err)
		}
		counts.move(jp.Queue, "", st, 1)
		if st == sluicetype.StateAvailable {
			return jp.Queue, nil
		}
		return "", nil
	case err != nil:
		return "", fmt.Errorf("postgres: dead job %s: read dead letter %s: %w", id, jp.ID, err)
	}
	if !sluicetype.State(state).Terminal() {
		return "", nil
	}
	var queue string
	if err := tx.QueryRow(ctx, tx.q(sqlDeadLetterRetry), jp.ID, string(jp.Payload), jp.Fingerprint, tx.nowNs, id).Scan(&queue); err != nil {
		return "", fmt.Errorf("postgres: dead job %s: retry dead letter %s: %w", id, jp.ID, err)
	}
	counts.move(queue, sluicetype.State(state), sluicetype.StateAvailable, 1)
	ev := d.RetryEvent
	if _, err := tx.Exec(ctx, tx.q(sqlInsertEvent), jp.ID, string(ev.Kind), tx.nowNs, ev.Actor,
		state, string(sluicetype.StateAvailable), attempt, ev.Message); err != nil {
		return "", fmt.Errorf("postgres: dead job %s: retry dead letter %s: event: %w", id, jp.ID, err)
	}
	return queue, nil
}

// sqlStepCrash counts one crash of $1 fingerprint in $2 step.
const sqlStepCrash = `INSERT INTO {s}.fingerprint_step_crashes (fingerprint, step, crashes) VALUES ($1, $2, 1)
	ON CONFLICT (fingerprint, step) DO UPDATE SET crashes = {s}.fingerprint_step_crashes.crashes + 1`

// finishStepCrash counts a crash inside a workflow step against its
// (fingerprint, step), in the crash's transaction.
func finishStepCrash(ctx context.Context, tx *wtx, p *backend.JobFinishParams) error {
	f := p.Fingerprint
	if f == nil || f.Fingerprint == "" || f.StepCrash == "" {
		return nil
	}
	if _, err := tx.Exec(ctx, tx.q(sqlStepCrash), f.Fingerprint, f.StepCrash); err != nil {
		return fmt.Errorf("postgres: finish job %s: count step crash: %w", p.ID, err)
	}
	return nil
}

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
	rows, err := s.pool.Query(ctx, s.sql(`SELECT fingerprint, step, crashes FROM {s}.fingerprint_step_crashes
		WHERE fingerprint = ANY($1::text[])`), names)
	if err != nil {
		return fmt.Errorf("postgres: step crashes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var fp, step string
		var n int
		if err := rows.Scan(&fp, &step, &n); err != nil {
			return fmt.Errorf("postgres: step crashes: %w", err)
		}
		if f := by[fp]; f != nil {
			if f.StepCrashes == nil {
				f.StepCrashes = map[string]int{}
			}
			f.StepCrashes[step] = n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: step crashes: %w", err)
	}
	return nil
}
