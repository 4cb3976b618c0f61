package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Maintenance: expired leases, due jobs, retention.

// JobListExpiredLeases lists running jobs whose lease has expired, oldest
// expiry first.
func (s *Store) JobListExpiredLeases(ctx context.Context, p *backend.JobListExpiredLeasesParams) ([]backend.ExpiredLease, error) {
	st, err := s.readStmt(ctx, `SELECT `+jobColumnsNoPayload+`,
		EXISTS(SELECT 1 FROM workers w WHERE w.id = jobs.lease_worker AND w.expires_at >= ?1)
	FROM jobs INDEXED BY jobs_running
	WHERE state = 'running' AND lease_expires_at < ?1
	ORDER BY lease_expires_at, id LIMIT ?2`)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := st.QueryContext(ctx, now().UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: expired leases: %w", err)
	}
	defer rows.Close()
	var out []backend.ExpiredLease
	for rows.Next() {
		var alive bool
		j, err := scanJob(rows, &alive)
		if err != nil {
			return nil, fmt.Errorf("sqlite: expired leases: %w", err)
		}
		out = append(out, backend.ExpiredLease{Job: j, WorkerAlive: alive})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: expired leases: %w", err)
	}
	return out, nil
}

// sqlScheduleDue moves the due jobs of one state (?3: scheduled or
// retryable; RETURNING gives only new values, so the state the counters
// need is fixed per statement) to ?4. ?1 now, ?2 limit. JobScheduleDue runs it
// for retryable jobs first: when more than Limit jobs are due, retries go
// before first runs (each state in scheduled_at order).
const sqlScheduleDue = `UPDATE OR FAIL jobs SET state = ?4, state_changed_at = ?1, version = version + 1
	WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_due
		WHERE state IN ('scheduled', 'retryable') AND state = ?3 AND scheduled_at <= ?1
		ORDER BY scheduled_at LIMIT ?2)
	RETURNING queue`

// JobScheduleDue makes due scheduled and retryable jobs available and
// returns the queues that got work, sorted.
func (s *Store) JobScheduleDue(ctx context.Context, p *backend.JobScheduleDueParams) ([]string, error) {
	st, err := s.stmts(ctx, sqlScheduleDue)
	if err != nil {
		return nil, err
	}
	if p.To == "" {
		return nil, fmt.Errorf("schedule due: %w: no target state", sluicetype.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	var queues []string
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		queues = queues[:0]
		seen := map[string]bool{}
		counts := countDeltas{}
		moved := 0
		for _, from := range p.From {
			if moved >= limit {
				break
			}
			rows, err := tx.StmtContext(ctx, st[0]).QueryContext(ctx, now.UnixNano(), limit-moved, string(from), string(p.To))
			if err != nil {
				return fmt.Errorf("sqlite: schedule due: %w", err)
			}
			for rows.Next() {
				var q string
				if err := rows.Scan(&q); err != nil {
					rows.Close()
					return fmt.Errorf("sqlite: schedule due: %w", err)
				}
				moved++
				counts.move(q, from, p.To, 1)
				if !seen[q] {
					seen[q] = true
					queues = append(queues, q)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: schedule due: %w", err)
			}
		}
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(queues)
	return queues, nil
}

const (
	// ?1 state, ?2 cutoff (exclusive), ?3 queues to leave alone (JSON
	// array), ?4 limit. A terminal job's state_changed_at is its
	// finalized_at, so the state index finds them in order (the index's
	// own WHERE term, repeated, lets the planner use the partial index).
	sqlDeleteExpired = `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_state_changed
		WHERE state = ?1 AND ` + sqlListable + ` AND state_changed_at < ?2 AND finalized_at < ?2
		AND queue NOT IN (SELECT value FROM json_each(?3))
		LIMIT ?4)
	RETURNING queue`
	// ?1 state, ?2 cutoff (exclusive), ?3 queue, ?4 limit.
	sqlDeleteExpiredQueue = `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_state_changed
		WHERE state = ?1 AND ` + sqlListable + ` AND state_changed_at < ?2 AND finalized_at < ?2 AND queue = ?3
		LIMIT ?4)
	RETURNING queue`
)

// JobDeleteExpired deletes terminal jobs past their retention (with their
// events), at most Limit in all. A retention of 0 deletes at once; a
// negative one, like a missing state, keeps the jobs.
func (s *Store) JobDeleteExpired(ctx context.Context, p *backend.JobDeleteExpiredParams) (int, error) {
	st, err := s.stmts(ctx, sqlDeleteExpired, sqlDeleteExpiredQueue)
	if err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	// Queues overriding each state's default.
	overriding := map[sluicetype.State][]string{}
	queues := make([]string, 0, len(p.QueueRetention))
	for q, m := range p.QueueRetention {
		queues = append(queues, q)
		for state := range m {
			overriding[state] = append(overriding[state], q)
		}
	}
	sort.Strings(queues)
	states := func(m map[sluicetype.State]time.Duration) []sluicetype.State {
		out := make([]sluicetype.State, 0, len(m))
		for _, st := range sluicetype.AllStates {
			if d, ok := m[st]; ok && st.Terminal() && d >= 0 {
				out = append(out, st)
			}
		}
		return out
	}
	total := 0
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		total = 0
		counts := countDeltas{}
		del := func(st *sql.Stmt, args ...any) error {
			rows, err := tx.StmtContext(ctx, st).QueryContext(ctx, args...)
			if err != nil {
				return fmt.Errorf("sqlite: delete expired %s jobs: %w", args[0], err)
			}
			defer rows.Close()
			state := sluicetype.State(args[0].(string))
			for rows.Next() {
				var q string
				if err := rows.Scan(&q); err != nil {
					return fmt.Errorf("sqlite: delete expired %s jobs: %w", args[0], err)
				}
				counts.move(q, state, sluicetype.StateDeleted, 1)
				total++
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: delete expired %s jobs: %w", args[0], err)
			}
			return nil
		}
		// Jobs finalized before the cutoff go; a retention of 0 takes
		// those finalized up to now.
		cut := func(d time.Duration) int64 {
			if d == 0 {
				return now.UnixNano() + 1
			}
			return now.Add(-d).UnixNano()
		}
		sweep := func() error {
			for _, state := range states(p.Retention) {
				if total >= limit {
					return nil
				}
				if err := del(st[0], string(state), cut(p.Retention[state]), jsonStrings(overriding[state]), limit-total); err != nil {
					return err
				}
			}
			for _, q := range queues {
				m := p.QueueRetention[q]
				for _, state := range states(m) {
					if total >= limit {
						return nil
					}
					if err := del(st[1], string(state), cut(m[state]), q, limit-total); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := sweep(); err != nil {
			return err
		}
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}
