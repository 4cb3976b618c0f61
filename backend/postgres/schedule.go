package postgres

import (
	"context"
	"fmt"
	"sort"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// sqlScheduleDue moves the due jobs of one state ($3) to $4, at most $2,
// in scheduled_at order: $1 now. SKIP LOCKED: two maintenance runs (a
// leader handing over) pass each other by.
const sqlScheduleDue = `UPDATE {s}.jobs j SET state = $4, state_changed_at = $1, version = j.version + 1
	FROM (SELECT id FROM {s}.jobs WHERE state IN ('scheduled', 'retryable') AND state = $3 AND scheduled_at <= $1
		ORDER BY scheduled_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
	WHERE j.id = d.id
	RETURNING j.queue, j.priority, j.scheduled_at`

// JobScheduleDue makes due scheduled and retryable jobs available and
// returns the queues that got work, sorted; one notification wakes their
// workers in every process.
func (s *Store) JobScheduleDue(ctx context.Context, p *backend.JobScheduleDueParams) ([]string, error) {
	if p.To == "" {
		return nil, fmt.Errorf("schedule due: %w: no target state", sluicetype.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	var queues []string
	first := map[string]orderKey{} // per queue, the first promoted job in claim order
	err := s.writeTx(ctx, func(tx *wtx) error {
		queues = queues[:0]
		clear(first)
		seen := map[string]bool{}
		counts := countDeltas{}
		moved := 0
		for _, from := range p.From {
			if moved >= limit {
				break
			}
			rows, err := tx.Query(ctx, tx.q(sqlScheduleDue), tx.nowNs, limit-moved, string(from), string(p.To))
			if err != nil {
				return fmt.Errorf("postgres: schedule due: %w", err)
			}
			for rows.Next() {
				var q string
				var k orderKey
				if err := rows.Scan(&q, &k.priority, &k.scheduled); err != nil {
					rows.Close()
					return fmt.Errorf("postgres: schedule due: %w", err)
				}
				moved++
				counts.move(q, from, p.To, 1)
				if f, ok := first[q]; !ok || k.before(f) {
					first[q] = k
				}
				if !seen[q] {
					seen[q] = true
					queues = append(queues, q)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("postgres: schedule due: %w", err)
			}
		}
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		// The promoted jobs keep their scheduled_at: the cursors move
		// back to them below.
		tx.cursorsKept = true
		if p.To == sluicetype.StateAvailable {
			return s.notifyQueues(ctx, tx, seen)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.To == sluicetype.StateAvailable {
		for q, k := range first {
			s.cursorBack(q, k)
		}
	}
	sort.Strings(queues)
	return queues, nil
}
