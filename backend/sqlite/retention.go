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

// Retention: deleting terminal jobs kept past their state's retention.

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
