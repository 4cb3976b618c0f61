package postgres

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// QueueList names every queue with jobs (per the counters) or a pause
// record, sorted, with its counts.
func (s *Store) QueueList(ctx context.Context) ([]sluicetype.QueueInfo, error) {
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT name, paused FROM {s}.queues`))
	if err != nil {
		return nil, fmt.Errorf("postgres: list queues: %w", err)
	}
	defer rows.Close()
	paused := map[string]bool{}
	for rows.Next() {
		var name string
		var p bool
		if err := rows.Scan(&name, &p); err != nil {
			return nil, fmt.Errorf("postgres: list queues: %w", err)
		}
		paused[name] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list queues: %w", err)
	}
	return backend.QueueInfosFromCounts(counts, paused), nil
}

func (s *Store) queueSetPaused(ctx context.Context, p *backend.QueuePauseParams, paused bool) error {
	return s.writeTx(ctx, func(tx *wtx) error {
		var at *int64
		if paused {
			at = &tx.nowNs
		}
		if _, err := tx.Exec(ctx, tx.q(`INSERT INTO {s}.queues AS q (name, paused, paused_at, paused_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, paused_at = excluded.paused_at,
				paused_by = excluded.paused_by`), p.Queue, paused, at, p.Actor); err != nil {
			return fmt.Errorf("postgres: pause queue %s: %w", p.Queue, err)
		}
		if !paused {
			return s.notifyQueues(ctx, tx, map[string]bool{p.Queue: true})
		}
		return nil
	})
}

// QueuePause stops claims from the queue (running jobs finish).
func (s *Store) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	return s.queueSetPaused(ctx, p, true)
}

// QueueResume lets workers claim from the queue again.
func (s *Store) QueueResume(ctx context.Context, p *backend.QueuePauseParams) error {
	return s.queueSetPaused(ctx, p, false)
}
