package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Idempotency keys: backend.IdempotencyStore on SQLite (tables of migration
// 0003). A write transaction whose context carries a key checks the claim
// and records its step in the same transaction (see idempotent, which
// writeTx calls).

var _ backend.IdempotencyStore = (*Store)(nil)

const (
	// ?1 key, ?2 token.
	sqlIdemHeld = `SELECT EXISTS(SELECT 1 FROM idempotency_keys
		WHERE key = ?1 AND token = ?2 AND state = 'in_flight')`
	// ?1 key, ?2 step, ?3 result, ?4 now.
	sqlIdemStep = `INSERT INTO idempotency_steps (key, step, result, applied_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (key, step) DO NOTHING`
	sqlIdemGet = `SELECT request_hash, state, claim_expires_at, expires_at, response
		FROM idempotency_keys WHERE key = ?`
	// ?1 key, ?2 hash, ?3 token, ?4 claim expiry, ?5 now, ?6 expiry.
	sqlIdemInsert = `INSERT OR REPLACE INTO idempotency_keys
		(key, request_hash, state, token, claim_expires_at, created_at, expires_at, response)
		VALUES (?1, ?2, 'in_flight', ?3, ?4, ?5, ?6, NULL)`
	// ?1 key, ?2 token, ?3 claim expiry.
	sqlIdemTakeOver = `UPDATE idempotency_keys SET token = ?2, claim_expires_at = ?3
		WHERE key = ?1 AND state = 'in_flight'`
	sqlIdemSteps       = `SELECT step, result FROM idempotency_steps WHERE key = ?`
	sqlIdemStepsDelete = `DELETE FROM idempotency_steps WHERE key = ?`
	// ?1 key, ?2 token, ?3 claim expiry.
	sqlIdemRenew = `UPDATE idempotency_keys SET claim_expires_at = ?3
		WHERE key = ?1 AND token = ?2 AND state = 'in_flight'`
	// ?1 key, ?2 token, ?3 response.
	sqlIdemComplete = `UPDATE idempotency_keys SET state = 'done', token = '', claim_expires_at = 0, response = ?3
		WHERE key = ?1 AND token = ?2 AND state = 'in_flight'`
	// ?1 key, ?2 token.
	sqlIdemDeleteUnapplied = `DELETE FROM idempotency_keys
		WHERE key = ?1 AND token = ?2 AND state = 'in_flight'
		AND NOT EXISTS (SELECT 1 FROM idempotency_steps WHERE key = ?1)`
	// ?1 key, ?2 token.
	sqlIdemExpireClaim = `UPDATE idempotency_keys SET claim_expires_at = 0
		WHERE key = ?1 AND token = ?2 AND state = 'in_flight'`
	// ?1 now.
	sqlIdemAnyExpired = `SELECT EXISTS(SELECT 1 FROM idempotency_keys WHERE expires_at <= ?1)`
	// ?1 now, ?2 limit. A record whose live claim outlasts its expiry is
	// left until the claim ends.
	sqlIdemExpiredKeys = `SELECT key FROM idempotency_keys
		WHERE expires_at <= ?1 AND (state = 'done' OR claim_expires_at <= ?1)
		ORDER BY expires_at LIMIT ?2`
	sqlIdemStepsDeleteExpired = `DELETE FROM idempotency_steps WHERE key IN (` + sqlIdemExpiredKeys + `)`
	sqlIdemDeleteExpired      = `DELETE FROM idempotency_keys WHERE key IN (` + sqlIdemExpiredKeys + `)`
)

// wtx is one write transaction: the SQL transaction and what the
// method running in it keeps for the idempotency step it may be (keep).
// It lives exactly as long as the transaction, so nothing of one
// transaction is shared with another.
type wtx struct {
	*sql.Tx
	// result is the method's result for its step record, when set.
	result any
	kept   bool
}

// keep hands v, the result the running method returns, to the step
// record of the transaction when it runs under an idempotency key; the
// record is written only then.
func (t *wtx) keep(v any) { t.result, t.kept = v, true }

// idempotent returns fn unchanged when ctx carries no idempotency key: one
// context lookup. Under a key it returns fn wrapped so that, in the same
// transaction, the claim is checked first (ErrIdempotencyInFlight when
// another request holds the key now) and the step is recorded after, with
// the result fn kept. writeTx calls it holding the writer's turn, before
// it begins the transaction (statements cannot be prepared inside one).
func (s *Store) idempotent(ctx context.Context, fn func(*wtx, time.Time) error) (func(*wtx, time.Time) error, error) {
	w, ok := backend.IdempotencyWriteFrom(ctx)
	if !ok {
		return fn, nil
	}
	st, err := s.stmts(ctx, sqlIdemHeld, sqlIdemStep)
	if err != nil {
		return nil, err
	}
	return func(tx *wtx, now time.Time) error {
		var held bool
		if err := tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, w.Key, w.Token).Scan(&held); err != nil {
			return fmt.Errorf("sqlite: idempotency key: %w", err)
		}
		if !held {
			return fmt.Errorf("idempotency key: %w: another request holds the key now; nothing was changed", sluicetype.ErrIdempotencyInFlight)
		}
		if err := fn(tx, now); err != nil {
			return err
		}
		var result any
		if tx.kept {
			b, err := json.Marshal(tx.result)
			if err != nil {
				return fmt.Errorf("sqlite: idempotency key: step %s: result: %w", w.Step, err)
			}
			result = string(b)
		}
		r, err := tx.StmtContext(ctx, st[1]).ExecContext(ctx, w.Key, w.Step, result, now.UnixNano())
		if err != nil {
			return fmt.Errorf("sqlite: idempotency key: step %s: %w", w.Step, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: idempotency key: step %s: %w", w.Step, err)
		} else if n == 0 {
			return fmt.Errorf("idempotency key: step %s: %w: it was committed before", w.Step, sluicetype.ErrConflict)
		}
		return nil
	}, nil
}

func newClaimToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("sqlite: idempotency token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// IdempotencyClaim claims p.Key (see backend.IdempotencyStore).
func (s *Store) IdempotencyClaim(ctx context.Context, p *sluicetype.IdempotencyClaimParams) (*sluicetype.IdempotencyClaim, error) {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	if p.Key == "" {
		return nil, fmt.Errorf("sqlite: idempotency claim: %w: empty key", sluicetype.ErrInvalid)
	}
	if p.TTL <= 0 || p.ClaimTTL <= 0 {
		return nil, fmt.Errorf("sqlite: idempotency claim: %w: TTL and claim TTL must be positive", sluicetype.ErrInvalid)
	}
	token, err := newClaimToken()
	if err != nil {
		return nil, err
	}
	st, err := s.stmts(ctx, sqlIdemGet, sqlIdemInsert, sqlIdemTakeOver, sqlIdemSteps, sqlIdemStepsDelete)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.IdempotencyClaim
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		out = nil
		nowNs := now.UnixNano()
		var hash, state string
		var claimExp, exp int64
		var resp []byte
		err := tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.Key).Scan(&hash, &state, &claimExp, &exp, &resp)
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: idempotency claim: %w", err)
		}
		if !found || exp <= nowNs {
			if found {
				if _, err := tx.StmtContext(ctx, st[4]).ExecContext(ctx, p.Key); err != nil {
					return fmt.Errorf("sqlite: idempotency claim: %w", err)
				}
			}
			expires := now.Add(p.TTL)
			if _, err := tx.StmtContext(ctx, st[1]).ExecContext(ctx, p.Key, p.RequestHash, token,
				now.Add(p.ClaimTTL).UnixNano(), nowNs, expires.UnixNano()); err != nil {
				return fmt.Errorf("sqlite: idempotency claim: %w", err)
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
		case claimExp > nowNs:
			return fmt.Errorf("idempotency claim: %w: its claim holds until %s", sluicetype.ErrIdempotencyInFlight,
				fromNanos(claimExp).Format(time.RFC3339Nano))
		}
		// The holder went away: take its claim over, with what it did.
		if _, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx, p.Key, token, now.Add(p.ClaimTTL).UnixNano()); err != nil {
			return fmt.Errorf("sqlite: idempotency claim: %w", err)
		}
		rows, err := tx.StmtContext(ctx, st[3]).QueryContext(ctx, p.Key)
		if err != nil {
			return fmt.Errorf("sqlite: idempotency claim: steps: %w", err)
		}
		defer rows.Close()
		var steps map[string]json.RawMessage
		for rows.Next() {
			var step string
			var result sql.NullString
			if err := rows.Scan(&step, &result); err != nil {
				return fmt.Errorf("sqlite: idempotency claim: steps: %w", err)
			}
			if steps == nil {
				steps = map[string]json.RawMessage{}
			}
			steps[step] = nil
			if result.Valid {
				steps[step] = json.RawMessage(result.String)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: idempotency claim: steps: %w", err)
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
		return fmt.Errorf("sqlite: idempotency renew: %w: claim TTL must be positive", sluicetype.ErrInvalid)
	}
	st, err := s.stmts(ctx, sqlIdemRenew)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.Key, p.Token, now.Add(p.ClaimTTL).UnixNano())
		if err != nil {
			return fmt.Errorf("sqlite: idempotency renew: %w", err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: idempotency renew: %w", err)
		} else if n == 0 {
			return &sluicetype.ClaimLostError{Op: "renew"}
		}
		return nil
	})
}

// IdempotencyComplete stores the response and ends the claim; the steps'
// records are not needed any more.
func (s *Store) IdempotencyComplete(ctx context.Context, p *sluicetype.IdempotencyCompleteParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	st, err := s.stmts(ctx, sqlIdemComplete, sqlIdemStepsDelete)
	if err != nil {
		return err
	}
	resp := p.Response
	if resp == nil {
		resp = []byte{}
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.Key, p.Token, resp)
		if err != nil {
			return fmt.Errorf("sqlite: idempotency complete: %w", err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: idempotency complete: %w", err)
		} else if n == 0 {
			return &sluicetype.ClaimLostError{Op: "complete"}
		}
		if _, err := tx.StmtContext(ctx, st[1]).ExecContext(ctx, p.Key); err != nil {
			return fmt.Errorf("sqlite: idempotency complete: %w", err)
		}
		return nil
	})
}

// IdempotencyRelease deletes a claim under which nothing was committed,
// or expires one under which something was, for the next request to take
// over.
func (s *Store) IdempotencyRelease(ctx context.Context, p *sluicetype.IdempotencyReleaseParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	st, err := s.stmts(ctx, sqlIdemDeleteUnapplied, sqlIdemExpireClaim)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		for _, stmt := range st {
			r, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, p.Key, p.Token)
			if err != nil {
				return fmt.Errorf("sqlite: idempotency release: %w", err)
			}
			if n, err := r.RowsAffected(); err != nil {
				return fmt.Errorf("sqlite: idempotency release: %w", err)
			} else if n > 0 {
				return nil
			}
		}
		return &sluicetype.ClaimLostError{Op: "release"}
	})
}

// IdempotencyDeleteExpired deletes up to p.Limit expired records. It
// looks on a reader first, so an idle sweep takes no write lock.
func (s *Store) IdempotencyDeleteExpired(ctx context.Context, p *backend.IdempotencyDeleteExpiredParams) (int, error) {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	rst, err := s.readStmt(ctx, sqlIdemAnyExpired)
	if err != nil {
		return 0, err
	}
	var any bool
	if err := rst.QueryRowContext(ctx, now().UnixNano()).Scan(&any); err != nil {
		return 0, fmt.Errorf("sqlite: idempotency sweep: %w", err)
	}
	if !any {
		return 0, nil
	}
	st, err := s.stmts(ctx, sqlIdemStepsDeleteExpired, sqlIdemDeleteExpired)
	if err != nil {
		return 0, err
	}
	n := 0
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		nowNs := now.UnixNano()
		if _, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, nowNs, limit); err != nil {
			return fmt.Errorf("sqlite: idempotency sweep: %w", err)
		}
		r, err := tx.StmtContext(ctx, st[1]).ExecContext(ctx, nowNs, limit)
		if err != nil {
			return fmt.Errorf("sqlite: idempotency sweep: %w", err)
		}
		c, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqlite: idempotency sweep: %w", err)
		}
		n = int(c)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
