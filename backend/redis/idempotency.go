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
//
// Idempotency records are hashes at {ns}:idem:KEY (fields: IF in
// fields.go; status "in_flight" or "done"), their steps a hash at
// {ns}:idems:KEY (step -> result), and {ns}:idemx lists records by expiry
// ("expiry:key" members).

var _ backend.IdempotencyStore = (*Store)(nil)

func newClaimToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redis: idempotency token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// luaIdemClaim claims a key (IdempotencyClaim).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.key -> the idempotency key
// A.hash -> the request's hash
// A.token -> the new claim's token
// A.ttl -> how long the record lives ("s:ns")
// A.claim_ttl -> how long the claim lasts ("s:ns")
//
// Returns {"new", expiry}, {"done", expiry, response} or {"take", expiry,
// steps (step, result, ...)}. Errors: "MISMATCH", "INFLIGHT <claim
// expiry>".
var luaIdemClaim = script(`
local A = args(4)
local key, skey = K('idem', A.key), K('idems', A.key)
local h = redis.call('HMGET', key, IF.hash, IF.status, IF.claim_expires, IF.expires, IF.response)
if not h[4] or h[4] <= NOW then
  if h[4] then redis.call('ZREM', K('idemx'), h[4] .. ':' .. A.key) end
  redis.call('DEL', key, skey)
  local x = tadd(A.ttl)
  redis.call('HSET', key, IF.hash, A.hash, IF.status, 'in_flight', IF.token, A.token, IF.claim_expires,
    tadd(A.claim_ttl), IF.created_at, NOW, IF.expires, x, IF.response, '')
  redis.call('ZADD', K('idemx'), 0, x .. ':' .. A.key)
  return {'new', x}
end
if h[1] ~= A.hash then return redis.error_reply('MISMATCH') end
if h[2] == 'done' then return {'done', h[4], h[5]} end
if h[3] > NOW then return redis.error_reply('INFLIGHT ' .. h[3]) end
redis.call('HSET', key, IF.token, A.token, IF.claim_expires, tadd(A.claim_ttl))
return {'take', h[4], redis.call('HGETALL', skey)}
`)

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
	v, err := s.run(ctx, "idempotency claim", luaIdemClaim, "key", p.Key, "hash", p.RequestHash, "token", token,
		"ttl", dstr(p.TTL), "claim_ttl", dstr(p.ClaimTTL))
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "MISMATCH":
				return nil, fmt.Errorf("idempotency claim: %w", sluicetype.ErrIdempotencyMismatch)
			case "INFLIGHT":
				until, terr := ttime(r.arg)
				if terr != nil {
					return nil, fmt.Errorf("redis: idempotency claim: claim expiry: %w", terr)
				}
				return nil, fmt.Errorf("idempotency claim: %w: its claim holds until %s", sluicetype.ErrIdempotencyInFlight,
					until.Format(time.RFC3339Nano))
			}
		}
		return nil, err
	}
	rep, _ := v.([]any)
	if len(rep) < 2 {
		return nil, fmt.Errorf("redis: idempotency claim: bad reply")
	}
	xs, _ := rep[1].(string)
	x, err := ttime(xs)
	if err != nil {
		return nil, fmt.Errorf("redis: idempotency claim: %w", fieldErr(iExpires, err))
	}
	switch rep[0] {
	case "new":
		return &sluicetype.IdempotencyClaim{Key: p.Key, Token: token, ExpiresAt: x}, nil
	case "done":
		resp, _ := rep[2].(string)
		return &sluicetype.IdempotencyClaim{Key: p.Key, Response: []byte(resp), ExpiresAt: x}, nil
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
	return &sluicetype.IdempotencyClaim{Key: p.Key, Token: token, Steps: steps, ExpiresAt: x}, nil
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

func lost(what string, err error) error {
	if r, ok := asRefusal(err); ok && r.code == "LOST" {
		return &sluicetype.ClaimLostError{Op: what}
	}
	return err
}

// luaIdemRenew extends a claim (IdempotencyRenew).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.key -> the idempotency key
// A.token -> the claim's token
// A.claim_ttl -> how long the claim lasts from now ("s:ns")
//
// Returns 1. Errors: "LOST".
var luaIdemRenew = script(`
local A = args(4)
local key = K('idem', A.key)
local h = redis.call('HMGET', key, IF.status, IF.token)
if h[1] ~= 'in_flight' or h[2] ~= A.token then return redis.error_reply('LOST') end
redis.call('HSET', key, IF.claim_expires, tadd(A.claim_ttl))
return 1
`)

// IdempotencyRenew extends a claim.
func (s *Store) IdempotencyRenew(ctx context.Context, p *sluicetype.IdempotencyRenewParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	if p.ClaimTTL <= 0 {
		return fmt.Errorf("redis: idempotency renew: %w: claim TTL must be positive", sluicetype.ErrInvalid)
	}
	_, err := s.run(ctx, "idempotency renew", luaIdemRenew, "key", p.Key, "token", p.Token, "claim_ttl", dstr(p.ClaimTTL))
	return lost("renew", err)
}

// luaIdemComplete stores a claimed request's response and ends the claim
// (IdempotencyComplete).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.key -> the idempotency key
// A.token -> the claim's token
// A.response -> the response to store
//
// Returns 1. Errors: "LOST".
var luaIdemComplete = script(`
local A = args(4)
local key = K('idem', A.key)
local h = redis.call('HMGET', key, IF.status, IF.token)
if h[1] ~= 'in_flight' or h[2] ~= A.token then return redis.error_reply('LOST') end
redis.call('HSET', key, IF.status, 'done', IF.token, '', IF.claim_expires, '0000000000000000000', IF.response,
  A.response)
redis.call('DEL', K('idems', A.key))
return 1
`)

// IdempotencyComplete stores the response and ends the claim.
func (s *Store) IdempotencyComplete(ctx context.Context, p *sluicetype.IdempotencyCompleteParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	_, err := s.run(ctx, "idempotency complete", luaIdemComplete, "key", p.Key, "token", p.Token, "response", string(p.Response))
	return lost("complete", err)
}

// luaIdemRelease gives a claim up: the record goes when no step was
// committed under it, else its claim expires now (IdempotencyRelease).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.key -> the idempotency key
// A.token -> the claim's token
//
// Returns 1. Errors: "LOST".
var luaIdemRelease = script(`
local A = args(4)
local key = K('idem', A.key)
local h = redis.call('HMGET', key, IF.status, IF.token, IF.expires)
if h[1] ~= 'in_flight' or h[2] ~= A.token then return redis.error_reply('LOST') end
if redis.call('EXISTS', K('idems', A.key)) == 0 then
  redis.call('DEL', key)
  redis.call('ZREM', K('idemx'), h[3] .. ':' .. A.key)
else
  redis.call('HSET', key, IF.claim_expires, '0000000000000000000')
end
return 1
`)

// IdempotencyRelease gives a claim up without a response.
func (s *Store) IdempotencyRelease(ctx context.Context, p *sluicetype.IdempotencyReleaseParams) error {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	_, err := s.run(ctx, "idempotency release", luaIdemRelease, "key", p.Key, "token", p.Token)
	return lost("release", err)
}

// luaIdemSweep deletes expired records; one whose live claim outlasts its
// expiry is left until the claim ends (IdempotencyDeleteExpired).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.limit -> the most records to delete
//
// Returns how many records were deleted.
var luaIdemSweep = script(`
local A = args(4)
local limit = tonumber(A.limit)
local n, skipped = 0, 0
while n < limit do
  local ms = redis.call('ZRANGEBYLEX', K('idemx'), '-', '(' .. NOW1, 'LIMIT', skipped, limit - n)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    local k = string.sub(m, 21)
    local h = redis.call('HMGET', K('idem', k), IF.status, IF.claim_expires)
    if h[1] == false or h[1] == 'done' or h[2] <= NOW then
      redis.call('DEL', K('idem', k), K('idems', k))
      redis.call('ZREM', K('idemx'), m)
      n = n + 1
    else
      skipped = skipped + 1
    end
  end
end
return n
`)

// IdempotencyDeleteExpired deletes up to p.Limit expired records.
func (s *Store) IdempotencyDeleteExpired(ctx context.Context, p *backend.IdempotencyDeleteExpiredParams) (int, error) {
	ctx = backend.WithoutIdempotencyWrite(ctx)
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	v, err := s.run(ctx, "idempotency sweep", luaIdemSweep, "limit", strconv.Itoa(limit))
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return int(n), nil
}
