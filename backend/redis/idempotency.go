package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Idempotency keys: backend.IdempotencyStore on Redis. Every mutation
// script checks the claim of the key its context carries before it writes
// and records its step after, in the same script (luaLib's idem_check and
// idem_record); a step's result is recorded in the scripts' own encoding
// and turned into the engine's JSON when a later claim reads it.

var _ backend.IdempotencyStore = (*Store)(nil)

func newClaimToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redis: idempotency token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// IdempotencyClaim claims p.Key (see backend.IdempotencyStore).
func (s *Store) IdempotencyClaim(ctx context.Context, p *sluicetype.IdempotencyClaimParams) (*sluicetype.IdempotencyClaim, error) {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	if p.Key == "" {
		return nil, fmt.Errorf("redis: idempotency claim: %w: empty key", sluicetype.ErrInvalid)
	}
	if p.TTL <= 0 || p.ClaimTTL <= 0 {
		return nil, fmt.Errorf("redis: idempotency claim: %w: TTL and claim TTL must be positive", sluicetype.ErrInvalid)
	}
	token, err := newClaimToken()
	if err != nil {
		return nil, err
	}
	v, err := s.run(ctx, "idempotency claim", luaIdemClaim, p.Key, p.RequestHash, token, dstr(p.TTL), dstr(p.ClaimTTL))
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "MISMATCH":
				return nil, fmt.Errorf("idempotency claim: %w", sluicetype.ErrIdempotencyMismatch)
			case "INFLIGHT":
				return nil, fmt.Errorf("idempotency claim: %w: its claim holds until %s", sluicetype.ErrIdempotencyInFlight,
					ttime(r.arg).Format(time.RFC3339Nano))
			}
		}
		return nil, err
	}
	rep, _ := v.([]any)
	if len(rep) < 2 {
		return nil, fmt.Errorf("redis: idempotency claim: bad reply")
	}
	x, _ := rep[1].(string)
	switch rep[0] {
	case "new":
		return &sluicetype.IdempotencyClaim{Key: p.Key, Token: token, ExpiresAt: ttime(x)}, nil
	case "done":
		resp, _ := rep[2].(string)
		return &sluicetype.IdempotencyClaim{Key: p.Key, Response: []byte(resp), ExpiresAt: ttime(x)}, nil
	}
	var steps map[string]json.RawMessage
	fl := strs(rep[2])
	for i := 0; i+1 < len(fl); i += 2 {
		raw, err := stepJSON(fl[i+1])
		if err != nil {
			return nil, fmt.Errorf("redis: idempotency claim: step %s: %w", fl[i], err)
		}
		if steps == nil {
			steps = map[string]json.RawMessage{}
		}
		steps[fl[i]] = raw
	}
	return &sluicetype.IdempotencyClaim{Key: p.Key, Token: token, Steps: steps, ExpiresAt: ttime(x)}, nil
}

// stepJSON turns a step result as a script recorded it into the JSON of
// the value the method returned: "" null, "J..." a job, "N..." a number,
// "I..." insert results, "O..." an operation.
func stepJSON(rec string) (json.RawMessage, error) {
	if rec == "" {
		return nil, nil
	}
	var v any
	switch rec[0] {
	case 'J':
		j, err := recordJob(rec[1:])
		if err != nil {
			return nil, err
		}
		v = j
	case 'N':
		n, err := strconv.Atoi(rec[1:])
		if err != nil {
			return nil, err
		}
		v = n
	case 'I':
		rs, err := insertRecord(rec[1:])
		if err != nil {
			return nil, err
		}
		v = rs
	case 'O':
		fl, err := dec(rec[1:])
		if err != nil {
			return nil, err
		}
		r, err := opFrom(sliceMap(fl))
		if err != nil {
			return nil, err
		}
		v = r.op
	default:
		return nil, fmt.Errorf("unknown record %q", rec[:1])
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// claimLost is the error of a write naming a token that no longer holds
// its key.
func claimLost(what string) error {
	return fmt.Errorf("idempotency %s: %w: the claim no longer holds the key", what, sluicetype.ErrIdempotencyInFlight)
}

func lost(what string, err error) error {
	if r, ok := asRefusal(err); ok && r.code == "LOST" {
		return claimLost(what)
	}
	return err
}

// IdempotencyRenew extends a claim.
func (s *Store) IdempotencyRenew(ctx context.Context, p *sluicetype.IdempotencyRenewParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	if p.ClaimTTL <= 0 {
		return fmt.Errorf("redis: idempotency renew: %w: claim TTL must be positive", sluicetype.ErrInvalid)
	}
	_, err := s.run(ctx, "idempotency renew", luaIdemRenew, p.Key, p.Token, dstr(p.ClaimTTL))
	return lost("renew", err)
}

// IdempotencyComplete stores the response and ends the claim.
func (s *Store) IdempotencyComplete(ctx context.Context, p *sluicetype.IdempotencyCompleteParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	_, err := s.run(ctx, "idempotency complete", luaIdemComplete, p.Key, p.Token, string(p.Response))
	return lost("complete", err)
}

// IdempotencyRelease gives a claim up without a response.
func (s *Store) IdempotencyRelease(ctx context.Context, p *sluicetype.IdempotencyReleaseParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	_, err := s.run(ctx, "idempotency release", luaIdemRelease, p.Key, p.Token)
	return lost("release", err)
}

// IdempotencyDeleteExpired deletes up to p.Limit expired records.
func (s *Store) IdempotencyDeleteExpired(ctx context.Context, p *backend.IdempotencyDeleteExpiredParams) (int, error) {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	v, err := s.run(ctx, "idempotency sweep", luaIdemSweep, strconv.Itoa(limit))
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return int(n), nil
}
