package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Queues: listing, pausing, resuming.

// QueueList names every queue with jobs (per the counters) or a pause
// record, sorted, with its counts.
func (s *Store) QueueList(ctx context.Context) ([]sluicetype.QueueInfo, error) {
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		return nil, err
	}
	st, err := s.readStmt(ctx, `SELECT name, paused FROM queues`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list queues: %w", err)
	}
	defer rows.Close()
	paused := map[string]bool{}
	for rows.Next() {
		var name string
		var p bool
		if err := rows.Scan(&name, &p); err != nil {
			return nil, fmt.Errorf("sqlite: list queues: %w", err)
		}
		paused[name] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list queues: %w", err)
	}
	return backend.QueueInfosFromCounts(counts, paused), nil
}

const sqlQueueSetPaused = `INSERT INTO queues (name, paused, paused_at, paused_by) VALUES (?1, ?2, ?3, ?4)
	ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, paused_at = excluded.paused_at,
		paused_by = excluded.paused_by`

func (s *Store) queueSetPaused(ctx context.Context, p *backend.QueuePauseParams, paused bool) error {
	st, err := s.stmts(ctx, sqlQueueSetPaused)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		var at any
		if paused {
			at = now.UnixNano()
		}
		if _, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.Queue, paused, at, p.Actor); err != nil {
			return fmt.Errorf("sqlite: pause queue %s: %w", p.Queue, err)
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
