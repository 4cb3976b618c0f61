package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
)

const defaultTTL = 15 * time.Second

const sqlWorkerHeartbeat = `INSERT INTO workers (id, host, pid, queues, started_at, heartbeat_at, expires_at)
	VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)
	ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
		heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at`

// WorkerHeartbeat records that a worker process lives until TTL from now.
func (s *Store) WorkerHeartbeat(ctx context.Context, p *backend.WorkerHeartbeatParams) error {
	st, err := s.stmts(ctx, sqlWorkerHeartbeat)
	if err != nil {
		return err
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultTTL
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		if _, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.ID, p.Host, p.PID, jsonStrings(p.Queues),
			now.UnixNano(), now.Add(ttl).UnixNano()); err != nil {
			return fmt.Errorf("sqlite: heartbeat of worker %s: %w", p.ID, err)
		}
		return nil
	})
}

// WorkerDelete removes a worker's record.
func (s *Store) WorkerDelete(ctx context.Context, p *backend.WorkerDeleteParams) error {
	st, err := s.stmts(ctx, `DELETE FROM workers WHERE id = ?`)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		if _, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.ID); err != nil {
			return fmt.Errorf("sqlite: delete worker %s: %w", p.ID, err)
		}
		return nil
	})
}
