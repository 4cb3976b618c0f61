package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// A canary run's stage, kept in its operation's hash (oCanary and
// oCanaryRecent; see backend/canary.go).

// luaOpCanarySet writes a canary run's state, fenced on the operation's
// lease, and extends the lease; with halt it halts the operation
// (OperationCanarySet). A halted operation stays in opa, passed over by
// luaOpClaim, until it is resumed or cancelled.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, holder, fence, cy (the canary's JSON), cyr (its window's ids,
// joined by US), halt ("1" halts), er (the error a halt records), ttl
// ("s:ns").
//
// Returns the operation's fields. Errors: "LEASE".
var luaOpCanarySet = script(`
local A = args(4)
local O = loadop(A.id)
if not O or O[OF.status] ~= 'running' or O[OF.lease_holder] ~= A.holder or O[OF.lease_fence] ~= A.fence then return redis.error_reply('LEASE') end
O[OF.canary] = A.cy; O[OF.canary_recent] = A.cyr
if A.halt == '1' then
  O[OF.status] = 'halted'; O[OF.error] = A.er; O[OF.lease_holder] = ''; O[OF.lease_expires] = ''
else
  O[OF.lease_expires] = tadd(A.ttl)
end
saveop(O)
return opflat(O)
`)

// OperationCanarySet writes a canary run's state, fenced on the lease;
// with Halt it halts the operation and frees the lease.
func (s *Store) OperationCanarySet(ctx context.Context, p *backend.OperationCanarySetParams) (*sluicetype.Operation, error) {
	canary, err := backend.EncodeCanary(p.Canary)
	if err != nil {
		return nil, fmt.Errorf("redis: operation %s: %w", p.ID, err)
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	v, err := s.run(ctx, "operation "+p.ID+" canary", luaOpCanarySet, "id", p.ID, "holder", p.Holder,
		"fence", strconv.FormatInt(p.Fence, 10), "cy", canary, "cyr", backend.EncodeRecent(p.Canary),
		"halt", flag(p.Halt), "er", p.Error, "ttl", dstr(ttl))
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "LEASE" {
			return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		return nil, err
	}
	r, err := opFrom(fieldMap(v))
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// luaOpResume sets a halted operation pending with the canary state
// given (OperationResume).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, cy (the canary's JSON), cyr (its window's ids, joined by US).
//
// Returns the operation's fields. Errors: "NOTFOUND", "STATE <status>".
var luaOpResume = script(`
local A = args(4)
local O = loadop(A.id)
if not O then return redis.error_reply('NOTFOUND') end
if O[OF.status] ~= 'halted' then return redis.error_reply('STATE ' .. O[OF.status]) end
O[OF.status] = 'pending'; O[OF.error] = ''; O[OF.canary] = A.cy; O[OF.canary_recent] = A.cyr
saveop(O)
idem_record('O' .. enc(opflat(O)))
return opflat(O)
`)

// OperationResume sets a halted operation pending with the canary state
// given.
func (s *Store) OperationResume(ctx context.Context, p *backend.OperationResumeParams) (*sluicetype.Operation, error) {
	canary, err := backend.EncodeCanary(p.Canary)
	if err != nil {
		return nil, fmt.Errorf("redis: operation %s: %w", p.ID, err)
	}
	return s.operationMove(ctx, "resume", p.ID, luaOpResume, "id", p.ID, "cy", canary, "cyr", backend.EncodeRecent(p.Canary))
}
