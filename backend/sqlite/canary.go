package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// A canary run's stage, kept with its operation (see backend/canary.go).

const (
	// ?1 id, ?2 holder, ?3 fence, ?4 canary, ?5 window ids, ?6 halt (0 or
	// 1), ?7 error, ?8 lease expiry.
	sqlOperationCanarySet = `UPDATE operations SET canary = ?4, canary_recent = ?5,
		status = CASE WHEN ?6 = 1 THEN 'halted' ELSE status END,
		error = CASE WHEN ?6 = 1 THEN ?7 ELSE error END,
		lease_holder = CASE WHEN ?6 = 1 THEN '' ELSE lease_holder END,
		lease_expires_at = CASE WHEN ?6 = 1 THEN 0 ELSE ?8 END
	WHERE id = ?1 AND status = 'running' AND lease_holder = ?2 AND lease_fence = ?3
	RETURNING ` + operationColumns
	// ?1 id, ?2 canary, ?3 window ids.
	sqlOperationResume = `UPDATE operations SET status = 'pending', error = '', canary = ?2, canary_recent = ?3
	WHERE id = ?1 AND status = 'halted'
	RETURNING ` + operationColumns
)

// OperationCanarySet writes a canary run's state, fenced on the lease;
// with Halt it halts the operation and frees the lease.
func (s *Store) OperationCanarySet(ctx context.Context, p *backend.OperationCanarySetParams) (*sluicetype.Operation, error) {
	canary, err := backend.EncodeCanary(p.Canary)
	if err != nil {
		return nil, fmt.Errorf("sqlite: operation %s: %w", p.ID, err)
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	halt := 0
	if p.Halt {
		halt = 1
	}
	st, err := s.stmts(ctx, sqlOperationCanarySet)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.Operation
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := scanOperation(tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID, p.Holder, p.Fence,
			canary, backend.EncodeRecent(p.Canary), halt, p.Error, now.Add(ttl).UnixNano()))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("sqlite: operation %s: canary: %w", p.ID, err)
		}
		out = r.op
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OperationResume sets a halted operation pending with the canary state
// given.
func (s *Store) OperationResume(ctx context.Context, p *backend.OperationResumeParams) (*sluicetype.Operation, error) {
	canary, err := backend.EncodeCanary(p.Canary)
	if err != nil {
		return nil, fmt.Errorf("sqlite: operation %s: %w", p.ID, err)
	}
	recent := backend.EncodeRecent(p.Canary)
	return s.operationMove(ctx, "resume", p.ID, sqlOperationResume, func(time.Time) []any {
		return []any{p.ID, canary, recent}
	})
}
