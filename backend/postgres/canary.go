package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// A canary run's stage, kept with its operation (see backend/canary.go).

const (
	// $1 id, $2 holder, $3 fence, $4 canary, $5 window ids, $6 halt, $7
	// error, $8 lease expiry.
	sqlOperationCanarySet = `UPDATE {s}.operations SET canary = $4, canary_recent = $5,
		status = CASE WHEN $6::boolean THEN 'halted' ELSE status END,
		error = CASE WHEN $6::boolean THEN $7::text ELSE error END,
		lease_holder = CASE WHEN $6::boolean THEN '' ELSE lease_holder END,
		lease_expires_at = CASE WHEN $6::boolean THEN 0 ELSE $8::bigint END
	WHERE id = $1 AND status = 'running' AND lease_holder = $2 AND lease_fence = $3
	RETURNING ` + operationColumns
	// $1 id, $2 canary, $3 window ids.
	sqlOperationResume = `UPDATE {s}.operations SET status = 'pending', error = '', canary = $2, canary_recent = $3
	WHERE id = $1 AND status = 'halted'
	RETURNING ` + operationColumns
)

// OperationCanarySet writes a canary run's state, fenced on the lease;
// with Halt it halts the operation and frees the lease.
func (s *Store) OperationCanarySet(ctx context.Context, p *backend.OperationCanarySetParams) (*sluicetype.Operation, error) {
	canary, err := backend.EncodeCanary(p.Canary)
	if err != nil {
		return nil, fmt.Errorf("postgres: operation %s: %w", p.ID, err)
	}
	ttl := int64(p.TTL)
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	var out *sluicetype.Operation
	err = s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // an operation's own record: no job moves
		r, err := scanOperation(tx.QueryRow(ctx, tx.q(sqlOperationCanarySet), p.ID, p.Holder, p.Fence,
			canary, backend.EncodeRecent(p.Canary), p.Halt, p.Error, tx.nowNs+ttl))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("postgres: operation %s: canary: %w", p.ID, err)
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
		return nil, fmt.Errorf("postgres: operation %s: %w", p.ID, err)
	}
	return s.operationMove(ctx, "resume", p.ID, func(tx *wtx) pgx.Row {
		return tx.QueryRow(ctx, tx.q(sqlOperationResume), p.ID, canary, backend.EncodeRecent(p.Canary))
	})
}
