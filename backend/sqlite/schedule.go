package sqlite

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

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
