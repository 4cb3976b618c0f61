package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Worker outcomes: completions, finishes and lease renewals.

const (
	// ?1 now, ?2 JSON array of [id, lease id, fence]. The unary + keeps the
	// planner from walking the state index: each item is one id lookup.
	sqlComplete = `UPDATE OR FAIL jobs SET state = 'completed', finalized_at = ?1, state_changed_at = ?1,
		lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL, version = version + 1
	FROM (SELECT value ->> 0 AS id, value ->> 1 AS lease_id, value ->> 2 AS fence FROM json_each(?2)) AS j
	WHERE jobs.id = j.id AND jobs.lease_id = j.lease_id AND jobs.fence = j.fence AND +jobs.state = 'running'
	RETURNING jobs.id, jobs.fence, jobs.fingerprint, jobs.queue`
	// ?1 JSON array of [id, lease id, fence].
	sqlCompleteDelete = `DELETE FROM jobs WHERE rowid IN (
		SELECT jobs.rowid FROM json_each(?1) AS j CROSS JOIN jobs ON jobs.id = j.value ->> 0
		WHERE jobs.lease_id = j.value ->> 1 AND jobs.fence = j.value ->> 2 AND +jobs.state = 'running')
	RETURNING id, fence, fingerprint, queue`
	sqlAnyProbation = `SELECT EXISTS(SELECT 1 FROM fingerprints WHERE status = 'probation')`
	sqlEndProbation = `DELETE FROM fingerprints WHERE status = 'probation' AND fingerprint IN (SELECT value FROM json_each(?))`
)

type refKey struct {
	id    string
	fence int64
}

// JobCompleteMany completes (or deletes) successful jobs in one
// transaction; each item is fenced on its own.
func (s *Store) JobCompleteMany(ctx context.Context, p *backend.JobCompleteManyParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	// Split into rounds with distinct ids (a repeated id is a stale or a
	// duplicate acknowledgement; each round's statement matches an id once).
	type round struct {
		complete, del []int
	}
	var rounds []round
	seen := make(map[string]int, len(p.Items)) // id -> round count
	for i, it := range p.Items {
		r := seen[it.ID]
		seen[it.ID] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, round{})
		}
		if it.Delete {
			rounds[r].del = append(rounds[r].del, i)
		} else {
			rounds[r].complete = append(rounds[r].complete, i)
		}
	}
	st, err := s.stmts(ctx, sqlComplete, sqlCompleteDelete, sqlAnyProbation, sqlEndProbation)
	if err != nil {
		return nil, err
	}
	encode := func(idx []int) string {
		b := make([]byte, 0, len(idx)*80)
		b = append(b, '[')
		for n, i := range idx {
			if n > 0 {
				b = append(b, ',')
			}
			it := &p.Items[i]
			b = append(b, '[')
			b = appendJSONString(b, it.ID)
			b = append(b, ',')
			b = appendJSONString(b, it.LeaseID)
			b = append(b, ',')
			b = strconv.AppendInt(b, it.Fence, 10)
			b = append(b, ']')
		}
		return string(append(b, ']'))
	}
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		done := make(map[refKey]bool, len(p.Items))
		fps := make(map[string]bool)
		counts := countDeltas{}
		run := func(st *sql.Stmt, to sluicetype.State, args ...any) error {
			rows, err := tx.StmtContext(ctx, st).QueryContext(ctx, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k refKey
				var fp, queue string
				if err := rows.Scan(&k.id, &k.fence, &fp, &queue); err != nil {
					return err
				}
				counts.move(queue, sluicetype.StateRunning, to, 1)
				done[k] = true
				if fp != "" {
					fps[fp] = true
				}
			}
			return rows.Err()
		}
		nowNs := now.UnixNano()
		for _, r := range rounds {
			if len(r.complete) > 0 {
				if err := run(st[0], sluicetype.StateCompleted, nowNs, encode(r.complete)); err != nil {
					return fmt.Errorf("sqlite: complete jobs: %w", err)
				}
			}
			if len(r.del) > 0 {
				if err := run(st[1], sluicetype.StateDeleted, encode(r.del)); err != nil {
					return fmt.Errorf("sqlite: complete jobs: %w", err)
				}
			}
		}
		for i, it := range p.Items {
			k := refKey{it.ID, it.Fence}
			if done[k] {
				delete(done, k) // a duplicate item is applied once
				out[i] = nil
			} else {
				out[i] = fmt.Errorf("complete job %s: %w", it.ID, sluicetype.ErrLeaseLost)
			}
		}
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		if len(fps) == 0 || !p.EndProbation {
			return nil
		}
		var probation bool
		if err := tx.StmtContext(ctx, st[2]).QueryRowContext(ctx).Scan(&probation); err != nil {
			return fmt.Errorf("sqlite: complete jobs: %w", err)
		}
		if !probation {
			return nil
		}
		list := make([]string, 0, len(fps))
		for fp := range fps {
			list = append(list, fp)
		}
		if _, err := tx.StmtContext(ctx, st[3]).ExecContext(ctx, jsonStrings(list)); err != nil {
			return fmt.Errorf("sqlite: complete jobs: end probation: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const (
	sqlFinishRead = `SELECT state, lease_id, fence, errors, fingerprint, coalesce(lease_expires_at, 0), coalesce(lease_worker, '')
		FROM jobs WHERE id = ?`
	sqlFinishDelete = `DELETE FROM jobs WHERE id = ?`
	// ?1 id, ?2 state, ?3 attempt charge, ?4 crash charge, ?5 scheduled_at
	// or NULL (kept), ?6 finalized_at or NULL, ?7 terminal_reason, ?8
	// errors or NULL (kept), ?9 now, ?10 last error or NULL (kept), ?11
	// error pattern or NULL (kept).
	sqlFinishUpdate = `UPDATE jobs SET state = ?2, attempt = attempt + ?3, crash_attempt = crash_attempt + ?4,
		scheduled_at = coalesce(?5, scheduled_at), finalized_at = ?6, terminal_reason = ?7,
		errors = coalesce(?8, errors), lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL,
		last_error = coalesce(?10, last_error), error_pattern = coalesce(?11, error_pattern),
		state_changed_at = ?9, version = version + 1
	WHERE id = ?1
	RETURNING ` + jobColumns
	// ?1 fingerprint, ?2 kind, ?3 now, ?4 last error, ?5 last job id, ?6
	// crashes to add. A new record counts the crashes of all the
	// fingerprint's jobs (this one's included: its row is written first).
	sqlQuarantine = `INSERT INTO fingerprints (fingerprint, kind, status, since, crashes, last_error, last_job_id)
	VALUES (?1, ?2, 'quarantined', ?3,
		(SELECT coalesce(sum(crash_attempt), 0) FROM jobs INDEXED BY jobs_fingerprint WHERE fingerprint = ?1), ?4, ?5)
	ON CONFLICT (fingerprint) DO UPDATE SET
		kind = excluded.kind,
		since = CASE WHEN fingerprints.status = 'quarantined' THEN fingerprints.since ELSE excluded.since END,
		status = 'quarantined',
		crashes = fingerprints.crashes + ?6,
		last_error = excluded.last_error,
		last_job_id = excluded.last_job_id`
	// ?1 fingerprint, ?2 crashes to add, ?3 last error, ?4 last job id.
	sqlCountCrash = `UPDATE fingerprints SET crashes = crashes + ?2, last_error = ?3, last_job_id = ?4
	WHERE fingerprint = ?1`
	// ?1 fingerprint, ?2 now, ?3 JSON array of from-states, ?4 to-state,
	// ?5 terminal reason.
	sqlHold = `UPDATE OR FAIL jobs SET state = ?4, terminal_reason = ?5, finalized_at = ?2,
		state_changed_at = ?2, version = version + 1
	WHERE fingerprint = ?1 AND state IN (SELECT value FROM json_each(?3))
	RETURNING id, attempt`
	// ?1 fingerprint, ?2 JSON array of from-states.
	sqlHoldStates = `SELECT id, state, queue FROM jobs
	WHERE fingerprint = ?1 AND state IN (SELECT value FROM json_each(?2))`
	sqlWorkerAlive = `SELECT EXISTS (SELECT 1 FROM workers WHERE id = ? AND expires_at >= ?)`
)

// JobFinish applies one fenced transition out of running, as the engine
// resolved it.
func (s *Store) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*sluicetype.Job, error) {
	if p.To == sluicetype.StateRunning || (p.To != sluicetype.StateDeleted && !p.To.Valid()) {
		return nil, fmt.Errorf("finish job %s: %w: cannot go to %q", p.ID, sluicetype.ErrInvalidTransition, p.To)
	}
	st, err := s.stmts(ctx, sqlFinishRead, sqlFinishDelete, sqlFinishUpdate, sqlInsertEvent,
		sqlQuarantine, sqlHoldStates, sqlHold, sqlCountCrash, sqlWorkerAlive)
	if err != nil {
		return nil, err
	}
	wst, err := s.stmts(ctx, finishWorkflowStmts...)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.Job
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		out = nil
		var (
			state, fingerprint, errs, worker string
			leaseID                          sql.NullString
			fence, expires                   int64
		)
		err := tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID).Scan(&state, &leaseID, &fence, &errs, &fingerprint, &expires, &worker)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("finish job %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("sqlite: finish job %s: %w", p.ID, err)
		}
		if state != string(sluicetype.StateRunning) || !leaseID.Valid || leaseID.String != p.LeaseID || fence != p.Fence {
			return fmt.Errorf("finish job %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		nowNs := now.UnixNano()
		// The reaper's guards: a renewal or a heartbeat since its listing wins.
		if !p.IfBefore.IsZero() && now.After(p.IfBefore) {
			return fmt.Errorf("finish job %s: the write came after its bound %s: %w", p.ID, p.IfBefore.Format(time.RFC3339Nano), sluicetype.ErrLeaseLost)
		}
		if p.IfLeaseExpired && expires >= nowNs {
			return fmt.Errorf("finish job %s: lease renewed: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		if p.IfWorkerGone {
			var alive bool
			if err := tx.StmtContext(ctx, st[8]).QueryRowContext(ctx, worker, nowNs).Scan(&alive); err != nil {
				return fmt.Errorf("sqlite: finish job %s: read worker: %w", p.ID, err)
			}
			if alive {
				return fmt.Errorf("finish job %s: worker %s beats again: %w", p.ID, worker, sluicetype.ErrLeaseLost)
			}
		}
		counts := countsOf(p.Counts)
		if p.To == sluicetype.StateDeleted {
			if _, err := tx.StmtContext(ctx, st[1]).ExecContext(ctx, p.ID); err != nil {
				return fmt.Errorf("sqlite: finish job %s: delete: %w", p.ID, err)
			}
			return s.applyCounts(ctx, tx, counts)
		}
		var attemptCharge, crashCharge int
		switch p.Charge {
		case backend.ChargeAttempt:
			attemptCharge = 1
		case backend.ChargeCrash:
			crashCharge = 1
		}
		var scheduled, finalized, newErrs, lastErr, pattern any
		switch p.Schedule {
		case backend.ScheduleNow:
			scheduled = nowNs
		case backend.ScheduleAfter:
			scheduled = now.Add(p.Delay).UnixNano()
		}
		if p.Finalize {
			finalized = nowNs
		}
		if p.Error != nil {
			var list []sluicetype.AttemptError
			if errs != "" && errs != "[]" {
				var err error
				if list, err = decodeAttemptErrors(errs); err != nil {
					return fmt.Errorf("sqlite: finish job %s: errors: %w", p.ID, err)
				}
			}
			e := p.Error.Entry
			e.At = now
			list = backend.TrimErrors(append(list, e), p.Error.Keep)
			b, err := json.Marshal(list)
			if err != nil {
				return fmt.Errorf("sqlite: finish job %s: errors: %w", p.ID, err)
			}
			newErrs = string(b)
			lastErr, pattern = p.Error.LastError, p.Error.Pattern
		}
		if err := finishCheckpoint(ctx, tx, wst, p); err != nil {
			return err
		}
		j, err := scanJob(tx.StmtContext(ctx, st[2]).QueryRowContext(ctx, p.ID, string(p.To), attemptCharge, crashCharge,
			scheduled, finalized, string(p.Reason), newErrs, nowNs, lastErr, pattern))
		if err != nil {
			return fmt.Errorf("sqlite: finish job %s: %w", p.ID, err)
		}
		ev := tx.StmtContext(ctx, st[3])
		if w := p.Event; w != nil {
			if _, err := ev.ExecContext(ctx, p.ID, string(w.Kind), nowNs, w.Actor,
				string(w.From), string(w.To), w.Attempt, w.Message); err != nil {
				return fmt.Errorf("sqlite: finish job %s: event: %w", p.ID, err)
			}
		}
		if f := p.Fingerprint; f != nil && f.Fingerprint != "" {
			if f.Quarantine {
				if _, err := tx.StmtContext(ctx, st[4]).ExecContext(ctx, f.Fingerprint, f.Kind, nowNs, f.LastError, f.LastJobID, f.AddCrashes); err != nil {
					return fmt.Errorf("sqlite: finish job %s: quarantine: %w", p.ID, err)
				}
			} else if f.AddCrashes != 0 {
				if _, err := tx.StmtContext(ctx, st[7]).ExecContext(ctx, f.Fingerprint, f.AddCrashes, f.LastError, f.LastJobID); err != nil {
					return fmt.Errorf("sqlite: finish job %s: count crash: %w", p.ID, err)
				}
			}
			if f.Hold != nil {
				if err := moveFingerprintJobs(ctx, tx, st[5], st[6], ev, counts, f.Fingerprint, f.Hold, nowNs); err != nil {
					return fmt.Errorf("sqlite: finish job %s: hold: %w", p.ID, err)
				}
			}
		}
		if err := finishStepCrash(ctx, tx, wst, p); err != nil {
			return err
		}
		if err := finishDeadLetter(ctx, tx, wst, p, counts, nowNs); err != nil {
			return err
		}
		out = j
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// countsOf turns a plan's counter deltas into this store's.
func countsOf(ds []backend.CountDelta) countDeltas {
	c := countDeltas{}
	for _, d := range ds {
		c.move(d.Queue, d.From, d.To, d.N)
	}
	return c
}

// stateList is a JSON array of states, for json_each.
func stateList(states []sluicetype.State) string {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	return jsonStrings(names)
}

// moveFingerprintJobs moves a fingerprint's jobs in h.From to h.To, each
// with h's event, and the counters with them.
func moveFingerprintJobs(ctx context.Context, tx *wtx, states, hold, ev *sql.Stmt, counts countDeltas, fp string, h *backend.HoldWrite, nowNs int64) error {
	from := stateList(h.From)
	type was struct{ state, queue string }
	prior := map[string]was{}
	rows, err := tx.StmtContext(ctx, states).QueryContext(ctx, fp, from)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var w was
		if err := rows.Scan(&id, &w.state, &w.queue); err != nil {
			rows.Close()
			return err
		}
		prior[id] = w
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(prior) == 0 {
		return nil
	}
	rows, err = tx.StmtContext(ctx, hold).QueryContext(ctx, fp, nowNs, from, string(h.To), string(h.Reason))
	if err != nil {
		return err
	}
	type held struct {
		id      string
		attempt int
	}
	var hs []held
	for rows.Next() {
		var x held
		if err := rows.Scan(&x.id, &x.attempt); err != nil {
			rows.Close()
			return err
		}
		hs = append(hs, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, x := range hs {
		w := prior[x.id]
		counts.move(w.queue, sluicetype.State(w.state), h.To, 1)
		if _, err := ev.ExecContext(ctx, x.id, string(h.Event.Kind), nowNs, h.Event.Actor,
			w.state, string(h.To), x.attempt, h.Event.Message); err != nil {
			return err
		}
	}
	return nil
}
