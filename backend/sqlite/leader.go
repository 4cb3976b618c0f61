package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
)

// ?1 name, ?2 holder, ?3 expiry, ?4 now.
const sqlLeaderAttempt = `INSERT INTO leaders (name, holder, expires_at) VALUES (?1, ?2, ?3)
	ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
	WHERE leaders.holder = excluded.holder OR leaders.expires_at <= ?4`

// LeaderAttempt takes or renews the named lease for holder and reports
// whether holder leads until TTL from now.
func (s *Store) LeaderAttempt(ctx context.Context, p *backend.LeaderAttemptParams) (bool, error) {
	st, err := s.stmts(ctx, sqlLeaderAttempt)
	if err != nil {
		return false, err
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultTTL
	}
	var lead bool
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.Name, p.Holder, now.Add(ttl).UnixNano(), now.UnixNano())
		if err != nil {
			return fmt.Errorf("sqlite: leader %s: %w", p.Name, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqlite: leader %s: %w", p.Name, err)
		}
		lead = n > 0
		return nil
	})
	if err != nil {
		return false, err
	}
	return lead, nil
}

// LeaderResign gives the lease up if holder has it.
func (s *Store) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	st, err := s.stmts(ctx, `DELETE FROM leaders WHERE name = ? AND holder = ?`)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		if _, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.Name, p.Holder); err != nil {
			return fmt.Errorf("sqlite: resign leader %s: %w", p.Name, err)
		}
		return nil
	})
}
