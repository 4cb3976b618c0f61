package postgres

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/backend"
)

// LeaderAttempt takes or renews the named lease for holder and reports
// whether holder leads until TTL from now.
func (s *Store) LeaderAttempt(ctx context.Context, p *backend.LeaderAttemptParams) (bool, error) {
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultTTL
	}
	var lead bool
	err := s.single(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, s.sql(`WITH n AS MATERIALIZED (SELECT `+sqlNow+` AS t)
			INSERT INTO {s}.leaders AS l (name, holder, expires_at) SELECT $1, $2, n.t + $3 FROM n
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE l.holder = excluded.holder OR l.expires_at <= (SELECT t FROM n)`), p.Name, p.Holder, int64(ttl))
		if err != nil {
			return fmt.Errorf("postgres: leader %s: %w", p.Name, err)
		}
		lead = tag.RowsAffected() > 0
		return nil
	})
	if err != nil {
		return false, err
	}
	return lead, nil
}

// LeaderResign gives the lease up if holder has it.
func (s *Store) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	return s.single(ctx, func(q querier) error {
		if _, err := q.Exec(ctx, s.sql(`DELETE FROM {s}.leaders WHERE name = $1 AND holder = $2`), p.Name, p.Holder); err != nil {
			return fmt.Errorf("postgres: resign leader %s: %w", p.Name, err)
		}
		return nil
	})
}
