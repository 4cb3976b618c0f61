package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Idempotency keys: backend.IdempotencyStore on PostgreSQL. A write
// transaction whose context carries a key locks the key's row and checks
// the claim, and records its step, in that same transaction (idempotent,
// which writeTx calls), so two API servers on one database share keys.
// Nothing of it is kept on the Store: the step's result rides on the
// transaction (wtx).

var _ backend.IdempotencyStore = (*Store)(nil)

const (
	// $1 key, $2 token. FOR UPDATE: a takeover of the key waits for this
	// transaction, so its claim cannot be taken from under it.
	sqlIdemHeld = `SELECT count(*) > 0 FROM (SELECT 1 FROM {s}.idempotency_keys
		WHERE key = $1 AND token = $2 AND state = 'in_flight' FOR UPDATE) k`
	// $1 key, $2 step, $3 result, $4 now.
	sqlIdemStep = `INSERT INTO {s}.idempotency_steps (key, step, result, applied_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (key, step) DO NOTHING`
	sqlIdemGet = `SELECT request_hash, state, claim_expires_at, expires_at, response
		FROM {s}.idempotency_keys WHERE key = $1 FOR UPDATE`
	// $1 key, $2 hash, $3 token, $4 claim expiry, $5 now, $6 expiry.
	sqlIdemInsert = `INSERT INTO {s}.idempotency_keys
		(key, request_hash, state, token, claim_expires_at, created_at, expires_at, response)
		VALUES ($1, $2, 'in_flight', $3, $4, $5, $6, NULL)
		ON CONFLICT (key) DO NOTHING`
	// $1 key, $2 hash, $3 token, $4 claim expiry, $5 now, $6 expiry.
	sqlIdemReplace = `UPDATE {s}.idempotency_keys SET request_hash = $2, state = 'in_flight', token = $3,
		claim_expires_at = $4, created_at = $5, expires_at = $6, response = NULL WHERE key = $1`
	// $1 key, $2 token, $3 claim expiry.
	sqlIdemTakeOver = `UPDATE {s}.idempotency_keys SET token = $2, claim_expires_at = $3
		WHERE key = $1 AND state = 'in_flight'`
	sqlIdemSteps       = `SELECT step, result FROM {s}.idempotency_steps WHERE key = $1`
	sqlIdemStepsDelete = `DELETE FROM {s}.idempotency_steps WHERE key = $1`
	// $1 key, $2 token, $3 claim expiry.
	sqlIdemRenew = `UPDATE {s}.idempotency_keys SET claim_expires_at = $3
		WHERE key = $1 AND token = $2 AND state = 'in_flight'`
	// $1 key, $2 token, $3 response.
	sqlIdemComplete = `UPDATE {s}.idempotency_keys SET state = 'done', token = '', claim_expires_at = 0, response = $3
		WHERE key = $1 AND token = $2 AND state = 'in_flight'`
	// $1 key, $2 token.
	sqlIdemDeleteUnapplied = `DELETE FROM {s}.idempotency_keys
		WHERE key = $1 AND token = $2 AND state = 'in_flight'
		AND NOT EXISTS (SELECT 1 FROM {s}.idempotency_steps WHERE key = $1)`
	// $1 key, $2 token.
	sqlIdemExpireClaim = `UPDATE {s}.idempotency_keys SET claim_expires_at = 0
		WHERE key = $1 AND token = $2 AND state = 'in_flight'`
	// $1 limit. A record whose live claim outlasts its expiry is left
	// until the claim ends.
	sqlIdemDeleteExpired = `WITH n AS MATERIALIZED (SELECT ` + sqlNow + ` AS t),
	gone AS (
		DELETE FROM {s}.idempotency_keys WHERE key IN (SELECT key FROM {s}.idempotency_keys
			WHERE expires_at <= (SELECT t FROM n) AND (state = 'done' OR claim_expires_at <= (SELECT t FROM n))
			ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING key),
	steps AS (DELETE FROM {s}.idempotency_steps WHERE key IN (SELECT key FROM gone))
	SELECT count(*) FROM gone`
)

// idempotent returns fn unchanged when ctx carries no idempotency key.
// Under a key it returns fn wrapped so that, in the same transaction, the
// claim is checked first (ErrIdempotencyInFlight when another request
// holds the key now) and the step is recorded after, with the result fn
// kept.
func (s *Store) idempotent(ctx context.Context, fn func(*wtx) error) func(*wtx) error {
	w, ok := backend.IdempotencyWriteFrom(ctx)
	if !ok {
		return fn
	}
	return func(tx *wtx) error {
		var held bool
		if err := tx.QueryRow(ctx, tx.q(sqlIdemHeld), w.Key, w.Token).Scan(&held); err != nil {
			return fmt.Errorf("postgres: idempotency key: %w", err)
		}
		if !held {
			return fmt.Errorf("idempotency key: %w: another request holds the key now; nothing was changed", sluicetype.ErrIdempotencyInFlight)
		}
		if err := fn(tx); err != nil {
			return err
		}
		var result *string
		if tx.kept {
			b, err := json.Marshal(tx.result)
			if err != nil {
				return fmt.Errorf("postgres: idempotency key: step %s: result: %w", w.Step, err)
			}
			r := string(b)
			result = &r
		}
		tag, err := tx.Exec(ctx, tx.q(sqlIdemStep), w.Key, w.Step, result, tx.nowNs)
		if err != nil {
			return fmt.Errorf("postgres: idempotency key: step %s: %w", w.Step, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("idempotency key: step %s: %w: it was committed before", w.Step, sluicetype.ErrConflict)
		}
		return nil
	}
}

func newClaimToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("postgres: idempotency token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// IdempotencyClaim claims p.Key (see backend.IdempotencyStore). Two
// concurrent claims of a free key race on its primary key: the second's
// insert waits for the first's commit and then inserts nothing, which
// answers ErrIdempotencyInFlight.
func (s *Store) IdempotencyClaim(ctx context.Context, p *sluicetype.IdempotencyClaimParams) (*sluicetype.IdempotencyClaim, error) {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	if p.Key == "" {
		return nil, fmt.Errorf("postgres: idempotency claim: %w: empty key", sluicetype.ErrInvalid)
	}
	if p.TTL <= 0 || p.ClaimTTL <= 0 {
		return nil, fmt.Errorf("postgres: idempotency claim: %w: TTL and claim TTL must be positive", sluicetype.ErrInvalid)
	}
	token, err := newClaimToken()
	if err != nil {
		return nil, err
	}
	var out *sluicetype.IdempotencyClaim
	err = s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // idempotency records make nothing available
		out = nil
		var hash, state string
		var claimExp, exp int64
		var resp []byte
		err := tx.QueryRow(ctx, tx.q(sqlIdemGet), p.Key).Scan(&hash, &state, &claimExp, &exp, &resp)
		found := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: idempotency claim: %w", err)
		}
		expires := tx.now.Add(p.TTL)
		claimExpires := tx.now.Add(p.ClaimTTL).UnixNano()
		if !found {
			tag, err := tx.Exec(ctx, tx.q(sqlIdemInsert), p.Key, p.RequestHash, token, claimExpires, tx.nowNs, expires.UnixNano())
			if err != nil {
				return fmt.Errorf("postgres: idempotency claim: %w", err)
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("idempotency claim: %w: another request claimed the key just now", sluicetype.ErrIdempotencyInFlight)
			}
			out = &sluicetype.IdempotencyClaim{Key: p.Key, Token: token, ExpiresAt: expires}
			return nil
		}
		if exp <= tx.nowNs {
			// Expired: absent, as far as this request goes.
			if _, err := tx.Exec(ctx, tx.q(sqlIdemStepsDelete), p.Key); err != nil {
				return fmt.Errorf("postgres: idempotency claim: %w", err)
			}
			if _, err := tx.Exec(ctx, tx.q(sqlIdemReplace), p.Key, p.RequestHash, token, claimExpires, tx.nowNs, expires.UnixNano()); err != nil {
				return fmt.Errorf("postgres: idempotency claim: %w", err)
			}
			out = &sluicetype.IdempotencyClaim{Key: p.Key, Token: token, ExpiresAt: expires}
			return nil
		}
		switch {
		case hash != p.RequestHash:
			return fmt.Errorf("idempotency claim: %w", sluicetype.ErrIdempotencyMismatch)
		case state == "done":
			if resp == nil {
				resp = []byte{}
			}
			out = &sluicetype.IdempotencyClaim{Key: p.Key, Response: resp, ExpiresAt: fromNanos(exp)}
			return nil
		case claimExp > tx.nowNs:
			return fmt.Errorf("idempotency claim: %w: its claim holds until %s", sluicetype.ErrIdempotencyInFlight,
				fromNanos(claimExp).Format(time.RFC3339Nano))
		}
		// The holder went away: take its claim over, with what it did.
		if _, err := tx.Exec(ctx, tx.q(sqlIdemTakeOver), p.Key, token, claimExpires); err != nil {
			return fmt.Errorf("postgres: idempotency claim: %w", err)
		}
		rows, err := tx.Query(ctx, tx.q(sqlIdemSteps), p.Key)
		if err != nil {
			return fmt.Errorf("postgres: idempotency claim: steps: %w", err)
		}
		defer rows.Close()
		var steps map[string]json.RawMessage
		for rows.Next() {
			var step string
			var result *string
			if err := rows.Scan(&step, &result); err != nil {
				return fmt.Errorf("postgres: idempotency claim: steps: %w", err)
			}
			if steps == nil {
				steps = map[string]json.RawMessage{}
			}
			steps[step] = nil
			if result != nil {
				steps[step] = json.RawMessage(*result)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: idempotency claim: steps: %w", err)
		}
		out = &sluicetype.IdempotencyClaim{Key: p.Key, Token: token, Steps: steps, ExpiresAt: fromNanos(exp)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IdempotencyRenew extends a claim.
func (s *Store) IdempotencyRenew(ctx context.Context, p *sluicetype.IdempotencyRenewParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	if p.ClaimTTL <= 0 {
		return fmt.Errorf("postgres: idempotency renew: %w: claim TTL must be positive", sluicetype.ErrInvalid)
	}
	return s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // idempotency records make nothing available
		tag, err := tx.Exec(ctx, tx.q(sqlIdemRenew), p.Key, p.Token, tx.now.Add(p.ClaimTTL).UnixNano())
		if err != nil {
			return fmt.Errorf("postgres: idempotency renew: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return &sluicetype.ClaimLostError{Op: "renew"}
		}
		return nil
	})
}

// IdempotencyComplete stores the response and ends the claim; the steps'
// records are not needed any more.
func (s *Store) IdempotencyComplete(ctx context.Context, p *sluicetype.IdempotencyCompleteParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	resp := p.Response
	if resp == nil {
		resp = []byte{}
	}
	return s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // idempotency records make nothing available
		tag, err := tx.Exec(ctx, tx.q(sqlIdemComplete), p.Key, p.Token, resp)
		if err != nil {
			return fmt.Errorf("postgres: idempotency complete: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return &sluicetype.ClaimLostError{Op: "complete"}
		}
		if _, err := tx.Exec(ctx, tx.q(sqlIdemStepsDelete), p.Key); err != nil {
			return fmt.Errorf("postgres: idempotency complete: %w", err)
		}
		return nil
	})
}

// IdempotencyRelease deletes a claim under which nothing was committed,
// or expires one under which something was, for the next request to take
// over.
func (s *Store) IdempotencyRelease(ctx context.Context, p *sluicetype.IdempotencyReleaseParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	return s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // idempotency records make nothing available
		for _, q := range []string{sqlIdemDeleteUnapplied, sqlIdemExpireClaim} {
			tag, err := tx.Exec(ctx, tx.q(q), p.Key, p.Token)
			if err != nil {
				return fmt.Errorf("postgres: idempotency release: %w", err)
			}
			if tag.RowsAffected() > 0 {
				return nil
			}
		}
		return &sluicetype.ClaimLostError{Op: "release"}
	})
}

// IdempotencyDeleteExpired deletes up to p.Limit expired records.
func (s *Store) IdempotencyDeleteExpired(ctx context.Context, p *backend.IdempotencyDeleteExpiredParams) (int, error) {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	if s.closed.Load() {
		return 0, sluicetype.ErrClosed
	}
	var count int64
	if err := s.pool.QueryRow(ctx, s.sql(sqlIdemDeleteExpired), limit).Scan(&count); err != nil {
		return 0, fmt.Errorf("postgres: idempotency sweep: %w", err)
	}
	return int(count), nil
}
