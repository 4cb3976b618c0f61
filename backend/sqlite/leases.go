package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

const sqlRenew = `UPDATE jobs SET lease_expires_at = ?4, version = version + 1
	WHERE id = ?1 AND lease_id = ?2 AND fence = ?3 AND state = 'running'`

// JobLeaseRenew extends leases; each item is fenced on its own.
func (s *Store) JobLeaseRenew(ctx context.Context, p *backend.JobLeaseRenewParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	st, err := s.stmts(ctx, sqlRenew)
	if err != nil {
		return nil, err
	}
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		renew := tx.StmtContext(ctx, st[0])
		exp := now.Add(lease).UnixNano()
		for i, it := range p.Items {
			r, err := renew.ExecContext(ctx, it.ID, it.LeaseID, it.Fence, exp)
			if err != nil {
				return fmt.Errorf("sqlite: renew lease of job %s: %w", it.ID, err)
			}
			n, err := r.RowsAffected()
			if err != nil {
				return fmt.Errorf("sqlite: renew lease of job %s: %w", it.ID, err)
			}
			out[i] = nil
			if n == 0 {
				out[i] = fmt.Errorf("renew lease of job %s: %w", it.ID, sluicetype.ErrLeaseLost)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

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
