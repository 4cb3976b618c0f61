package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
)

const defaultTTL = 15 * time.Second

// WorkerHeartbeat records that a worker process lives until TTL from now.
func (s *Store) WorkerHeartbeat(ctx context.Context, p *backend.WorkerHeartbeatParams) error {
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultTTL
	}
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	return s.single(ctx, func(q querier) error {
		if _, err := q.Exec(ctx, s.sql(`WITH n AS MATERIALIZED (SELECT `+sqlNow+` AS t)
			INSERT INTO {s}.workers AS w (id, host, pid, queues, started_at, heartbeat_at, expires_at)
			SELECT $1, $2, $3, $4, n.t, n.t, n.t + $5 FROM n
			ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
				heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at`),
			p.ID, p.Host, p.PID, queues, int64(ttl)); err != nil {
			return fmt.Errorf("postgres: heartbeat of worker %s: %w", p.ID, err)
		}
		return nil
	})
}

// WorkerDelete removes a worker's record.
func (s *Store) WorkerDelete(ctx context.Context, p *backend.WorkerDeleteParams) error {
	return s.single(ctx, func(q querier) error {
		if _, err := q.Exec(ctx, s.sql(`DELETE FROM {s}.workers WHERE id = $1`), p.ID); err != nil {
			return fmt.Errorf("postgres: delete worker %s: %w", p.ID, err)
		}
		return nil
	})
}
