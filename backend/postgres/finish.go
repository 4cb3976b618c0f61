package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Worker outcomes: completions, finishes and lease renewals.

// maxCompleteBatch bounds the items of one completion statement. A
// batched UPDATE … FROM unnest() of several hundred ids can flip to a
// sequential scan of jobs under a custom plan right after ANALYZE (the
// simple protocol, which PgBouncer's transaction mode needs, always plans
// custom); moderate batches and the id = ANY() term keep it on the
// primary key (plan_test.go holds it to that under both protocols).
const maxCompleteBatch = 256

// completeSQL completes or deletes a batch of distinct ids, each fenced
// on its own: $1 ids, $2 lease ids, $3 fences, $4 delete flags, $5 end
// probation. It returns the (id, fence, lease id) of each job it
// finished. done and gone say which halves the batch needs: a batch of
// completions alone skips the delete's join (and its read of the jobs)
// entirely.
//
// The state is compared with the items' running column, not a literal:
// with a literal the planner matches jobs_running's predicate and,
// trusting its statistics (few running jobs), reads that index whole.
// Every claim adds an entry to it and only VACUUM removes them, so with
// autovacuum off or held back by an old snapshot it held every job ever
// claimed: a batch of 200 read 15,000 entries and 640 heap pages, and,
// expecting one row, joined the items by a nested loop (40,000 row
// comparisons). As a join term the state leaves the primary key's probe
// (the ANY term) expected at one row per item, and the items are hashed.
func completeSQL(done, gone bool) string {
	q := `WITH n AS MATERIALIZED (SELECT ` + sqlNow + ` AS t),
	shard AS MATERIALIZED (SELECT floor(random() * ` + fmt.Sprint(countShards) + `)::int AS k),
	items AS MATERIALIZED (SELECT i.*, 'running'::text AS running
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bool[]) AS i(id, lease_id, fence, del))`
	var out []string
	if done {
		q += `,
	done AS (
		UPDATE {s}.jobs j SET state = 'completed', finalized_at = n.t, state_changed_at = n.t,
			lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL, version = j.version + 1
		FROM n, items i
		WHERE j.id = ANY($1::text[]) AND j.id = i.id AND NOT i.del AND j.lease_id = i.lease_id AND j.fence = i.fence
			AND j.state = i.running
		RETURNING j.id, j.fence, i.lease_id, j.fingerprint, j.queue)`
		out = append(out, "done")
	}
	if gone {
		q += `,
	gone AS (
		DELETE FROM {s}.jobs j USING n, items i
		WHERE j.id = ANY($1::text[]) AND j.id = i.id AND i.del AND j.lease_id = i.lease_id AND j.fence = i.fence
			AND j.state = i.running
		RETURNING j.id, j.fence, i.lease_id, j.fingerprint, j.queue)`
		out = append(out, "gone")
	}
	// The counter deltas: each half's jobs counted by queue first (one
	// row a queue, hashed), then spread over the states they leave and
	// enter. Summing a delta row per job and state instead sorted twice
	// the batch's rows in every completion.
	var deltas, fps, rows []string
	for _, t := range out {
		moves := `(VALUES ('running', -1))`
		if t == "done" {
			moves = `(VALUES ('running', -1), ('completed', 1))`
		}
		deltas = append(deltas, `SELECT g.queue, m.st, m.k * g.n AS d FROM (SELECT queue, count(*) AS n FROM `+t+
			` GROUP BY queue) g, `+moves+` AS m(st, k)`)
		fps = append(fps, `SELECT fingerprint FROM `+t)
		rows = append(rows, `SELECT id, fence, lease_id FROM `+t)
	}
	return q + `,
	counted AS (
		INSERT INTO {s}.job_counts (queue, state, shard, n)
		SELECT c.queue, c.st, (SELECT k FROM shard), sum(c.d) FROM (
			` + strings.Join(deltas, "\n\t\t\tUNION ALL ") + `) c
		GROUP BY c.queue, c.st ORDER BY c.queue, c.st
		ON CONFLICT (queue, state, shard) DO UPDATE SET n = job_counts.n + excluded.n),
	probation AS (
		DELETE FROM {s}.fingerprints
		WHERE $5 AND EXISTS (SELECT 1 FROM {s}.fingerprints WHERE status = 'probation')
			AND status = 'probation'
			AND fingerprint IN (` + strings.Join(fps, " UNION ") + `))
` + strings.Join(rows, " UNION ALL ")
}

// The three shapes of a completion statement (see completeSQL).
var (
	sqlComplete       = completeSQL(true, true)
	sqlCompleteOnly   = completeSQL(true, false)
	sqlCompleteDelete = completeSQL(false, true)
)

// completeShape is the completion statement a batch with these delete
// flags needs.
func completeShape(dels []bool) string {
	var c, d bool
	for _, del := range dels {
		c, d = c || !del, d || del
	}
	switch {
	case c && d:
		return sqlComplete
	case d:
		return sqlCompleteDelete
	default:
		return sqlCompleteOnly
	}
}

type refKey struct {
	id, lease string
	fence     int64
}

// JobCompleteMany completes (or deletes) successful jobs; each item is
// fenced on its own. A batch of distinct ids up to maxCompleteBatch is one
// statement; more, or a repeated id, is one transaction of several.
func (s *Store) JobCompleteMany(ctx context.Context, p *backend.JobCompleteManyParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	// Rounds of distinct ids (a repeated id is a stale or a duplicate
	// acknowledgement), each cut into statements of maxCompleteBatch.
	var rounds [][]int
	seen := make(map[string]int, len(p.Items))
	for i, it := range p.Items {
		r := seen[it.ID]
		seen[it.ID] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], i)
	}
	var stmts [][]int
	for _, r := range rounds {
		for len(r) > 0 {
			n := min(len(r), maxCompleteBatch)
			stmts = append(stmts, r[:n])
			r = r[n:]
		}
	}
	done := make(map[refKey]bool, len(p.Items))
	run := func(q querier) error {
		clear(done)
		for _, idx := range stmts {
			ids, leases, fences, dels := make([]string, len(idx)), make([]string, len(idx)), make([]int64, len(idx)), make([]bool, len(idx))
			for k, i := range idx {
				it := &p.Items[i]
				ids[k], leases[k], fences[k], dels[k] = it.ID, it.LeaseID, it.Fence, it.Delete
			}
			rows, err := q.Query(ctx, s.sql(completeShape(dels)), ids, leases, fences, dels, p.EndProbation)
			if err != nil {
				return err
			}
			for rows.Next() {
				var k refKey
				if err := rows.Scan(&k.id, &k.fence, &k.lease); err != nil {
					rows.Close()
					return err
				}
				done[k] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if len(stmts) == 1 {
		err = s.single(ctx, run)
	} else {
		err = s.writeTx(ctx, func(tx *wtx) error {
			tx.cursorsKept = true // completes make nothing available
			return run(tx)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: complete jobs: %w", err)
	}
	for i, it := range p.Items {
		k := refKey{it.ID, it.LeaseID, it.Fence}
		if done[k] {
			delete(done, k) // a duplicate item is applied once
		} else {
			out[i] = fmt.Errorf("complete job %s: %w", it.ID, sluicetype.ErrLeaseLost)
		}
	}
	return out, nil
}

var (
	sqlFinishRead = `SELECT state, lease_id, fence, errors, fingerprint, coalesce(lease_expires_at, 0), coalesce(lease_worker, '')
		FROM {s}.jobs WHERE id = $1 FOR UPDATE`
	sqlFinishDelete = `DELETE FROM {s}.jobs WHERE id = $1`
	// $1 id, $2 state, $3 attempt charge, $4 crash charge, $5 scheduled_at
	// or NULL (kept), $6 finalized_at or NULL, $7 terminal_reason, $8
	// errors or NULL (kept), $9 now, $10 last error or NULL (kept), $11
	// error pattern or NULL (kept).
	sqlFinishUpdate = `UPDATE {s}.jobs SET state = $2, attempt = attempt + $3, crash_attempt = crash_attempt + $4,
		scheduled_at = coalesce($5, scheduled_at), finalized_at = $6, terminal_reason = $7,
		errors = coalesce($8::jsonb, errors), lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL,
		last_error = coalesce($10, last_error), error_pattern = coalesce($11, error_pattern),
		state_changed_at = $9, version = version + 1
	WHERE id = $1
	RETURNING ` + jobColumns
	// $1 fingerprint, $2 kind, $3 now, $4 last error, $5 last job id, $6
	// crashes to add. A new record counts the crashes of all the
	// fingerprint's jobs (this one's included: its row is written first).
	sqlQuarantine = `INSERT INTO {s}.fingerprints AS f (fingerprint, kind, status, since, crashes, last_error, last_job_id)
	VALUES ($1, $2, 'quarantined', $3,
		(SELECT coalesce(sum(crash_attempt), 0) FROM {s}.jobs WHERE ` + fingerprintIs("{s}.job_fingerprints", "", "$1") + `), $4, $5)
	ON CONFLICT (fingerprint) DO UPDATE SET
		kind = excluded.kind,
		since = CASE WHEN f.status = 'quarantined' THEN f.since ELSE excluded.since END,
		status = 'quarantined',
		crashes = f.crashes + $6,
		last_error = excluded.last_error,
		last_job_id = excluded.last_job_id`
	// $1 fingerprint, $2 crashes to add, $3 last error, $4 last job id.
	sqlCountCrash = `UPDATE {s}.fingerprints SET crashes = crashes + $2, last_error = $3, last_job_id = $4
	WHERE fingerprint = $1`
	// $1 fingerprint, $2 now, $3 from-states, $4 to-state, $5 terminal
	// reason, $6-$8 the event (kind, actor, message). It returns the
	// queue and former state of each job it moved.
	sqlHold = `WITH old AS (
		SELECT id, state, queue FROM {s}.jobs WHERE ` + fingerprintIs("{s}.job_fingerprints", "", "$1") + ` AND state = ANY($3::text[]) ORDER BY id FOR UPDATE),
	moved AS (
		UPDATE {s}.jobs j SET state = $4, terminal_reason = $5, finalized_at = $2, state_changed_at = $2,
			version = j.version + 1
		FROM old WHERE j.id = old.id
		RETURNING j.id, j.attempt, old.state, old.queue),
	ev AS (
		INSERT INTO {s}.job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
		SELECT id, $6, $2, $7, state, $4, attempt, $8 FROM moved)
	SELECT queue, state, count(*) FROM moved GROUP BY queue, state`
	sqlWorkerAlive = `SELECT EXISTS (SELECT 1 FROM {s}.workers WHERE id = $1 AND expires_at >= $2)`
)

// JobFinish applies one fenced transition out of running, as the engine
// resolved it.
func (s *Store) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*sluicetype.Job, error) {
	if p.To == sluicetype.StateRunning || (p.To != sluicetype.StateDeleted && !p.To.Valid()) {
		return nil, fmt.Errorf("finish job %s: %w: cannot go to %q", p.ID, sluicetype.ErrInvalidTransition, p.To)
	}
	var out *sluicetype.Job
	err := s.writeTx(ctx, func(tx *wtx) error {
		out = nil
		var (
			state, fingerprint, worker string
			leaseID                    *string
			errs                       []byte
			fence, expires             int64
		)
		err := tx.QueryRow(ctx, tx.q(sqlFinishRead), p.ID).Scan(&state, &leaseID, &fence, &errs, &fingerprint, &expires, &worker)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("finish job %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("postgres: finish job %s: %w", p.ID, err)
		}
		if state != string(sluicetype.StateRunning) || leaseID == nil || *leaseID != p.LeaseID || fence != p.Fence {
			return fmt.Errorf("finish job %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		now, nowNs := tx.now, tx.nowNs
		// The reaper's guards: a renewal or a heartbeat since its listing wins.
		if !p.IfBefore.IsZero() && now.After(p.IfBefore) {
			return fmt.Errorf("finish job %s: the write came after its bound %s: %w", p.ID, p.IfBefore.Format(time.RFC3339Nano), sluicetype.ErrLeaseLost)
		}
		if p.IfLeaseExpired && expires >= nowNs {
			return fmt.Errorf("finish job %s: lease renewed: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		if p.IfWorkerGone {
			var alive bool
			if err := tx.QueryRow(ctx, tx.q(sqlWorkerAlive), worker, nowNs).Scan(&alive); err != nil {
				return fmt.Errorf("postgres: finish job %s: read worker: %w", p.ID, err)
			}
			if alive {
				return fmt.Errorf("finish job %s: worker %s beats again: %w", p.ID, worker, sluicetype.ErrLeaseLost)
			}
		}
		counts := countsOf(p.Counts)
		if p.To == sluicetype.StateDeleted {
			if _, err := tx.Exec(ctx, tx.q(sqlFinishDelete), p.ID); err != nil {
				return fmt.Errorf("postgres: finish job %s: delete: %w", p.ID, err)
			}
			return s.applyCounts(ctx, tx, counts)
		}
		var attemptCharge, crashCharge int32
		switch p.Charge {
		case backend.ChargeAttempt:
			attemptCharge = 1
		case backend.ChargeCrash:
			crashCharge = 1
		}
		var scheduled, finalized *int64
		var newErrs, lastErr, pattern *string
		switch p.Schedule {
		case backend.ScheduleNow:
			scheduled = &nowNs
		case backend.ScheduleAfter:
			t := now.Add(p.Delay).UnixNano()
			scheduled = &t
		}
		if p.Finalize {
			finalized = &nowNs
		}
		if p.Error != nil {
			var list []sluicetype.AttemptError
			if len(errs) > 2 {
				if err := json.Unmarshal(errs, &list); err != nil {
					return fmt.Errorf("postgres: finish job %s: errors: %w", p.ID, err)
				}
			}
			e := p.Error.Entry
			e.At = now
			list = backend.TrimErrors(append(list, e), p.Error.Keep)
			b, err := json.Marshal(list)
			if err != nil {
				return fmt.Errorf("postgres: finish job %s: errors: %w", p.ID, err)
			}
			es := string(b)
			newErrs, lastErr, pattern = &es, &p.Error.LastError, &p.Error.Pattern
		}
		if err := finishCheckpoint(ctx, tx, p); err != nil {
			return err
		}
		j, err := scanJob(tx.QueryRow(ctx, tx.q(sqlFinishUpdate), p.ID, string(p.To), attemptCharge, crashCharge,
			scheduled, finalized, string(p.Reason), newErrs, nowNs, lastErr, pattern))
		if err != nil {
			return fmt.Errorf("postgres: finish job %s: %w", p.ID, err)
		}
		if w := p.Event; w != nil {
			if _, err := tx.Exec(ctx, tx.q(sqlInsertEvent), p.ID, string(w.Kind), nowNs, w.Actor,
				string(w.From), string(w.To), w.Attempt, w.Message); err != nil {
				return fmt.Errorf("postgres: finish job %s: event: %w", p.ID, err)
			}
		}
		if f := p.Fingerprint; f != nil && f.Fingerprint != "" {
			if f.Quarantine {
				if _, err := tx.Exec(ctx, tx.q(sqlQuarantine), f.Fingerprint, f.Kind, nowNs, f.LastError, f.LastJobID, f.AddCrashes); err != nil {
					return fmt.Errorf("postgres: finish job %s: quarantine: %w", p.ID, err)
				}
			} else if f.AddCrashes != 0 {
				if _, err := tx.Exec(ctx, tx.q(sqlCountCrash), f.Fingerprint, f.AddCrashes, f.LastError, f.LastJobID); err != nil {
					return fmt.Errorf("postgres: finish job %s: count crash: %w", p.ID, err)
				}
			}
			if f.Hold != nil {
				if err := s.holdJobs(ctx, tx, counts, f.Fingerprint, f.Hold); err != nil {
					return fmt.Errorf("postgres: finish job %s: hold: %w", p.ID, err)
				}
			}
		}
		if err := finishStepCrash(ctx, tx, p); err != nil {
			return err
		}
		dlq, err := finishDeadLetter(ctx, tx, p, counts)
		if err != nil {
			return err
		}
		out = j
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		woke := map[string]bool{}
		if p.To == sluicetype.StateAvailable {
			woke[j.Queue] = true
		}
		if dlq != "" {
			woke[dlq] = true
		}
		if len(woke) > 0 {
			return s.notifyQueues(ctx, tx, woke)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// holdJobs moves a fingerprint's jobs in h.From to h.To, each with h's
// event, and the counters with them.
func (s *Store) holdJobs(ctx context.Context, tx *wtx, counts countDeltas, fp string, h *backend.HoldWrite) error {
	rows, err := tx.Query(ctx, tx.q(sqlHold), fp, tx.nowNs, stateNames(h.From), string(h.To), string(h.Reason),
		string(h.Event.Kind), h.Event.Actor, h.Event.Message)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var queue, state string
		var n int64
		if err := rows.Scan(&queue, &state, &n); err != nil {
			return err
		}
		counts.move(queue, sluicetype.State(state), h.To, n)
	}
	return rows.Err()
}
