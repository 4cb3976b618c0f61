package redis

import (
	"context"

	"github.com/sluicehq/sluice/backend"
)

// luaLeader takes or renews a maintenance lease (LeaderAttempt).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.name -> the lease
// A.holder -> who asks for it
// A.ttl -> how long it lasts ("s:ns")
//
// Returns 1 when holder leads, 0 otherwise.
var luaLeader = script(`
local A = args(4)
local key = K('lead', A.name)
local h = redis.call('HMGET', key, LF.holder, LF.expires)
if h[1] and h[1] ~= A.holder and h[2] >= NOW then return 0 end
redis.call('HSET', key, LF.holder, A.holder, LF.expires, tadd(A.ttl))
return 1
`)

// LeaderAttempt takes or renews the named maintenance lease for holder.
func (s *Store) LeaderAttempt(ctx context.Context, p *backend.LeaderAttemptParams) (bool, error) {
	v, err := s.run(ctx, "leader "+p.Name, luaLeader, "name", p.Name, "holder", p.Holder, "ttl", dstr(p.TTL))
	if err != nil {
		return false, err
	}
	n, _ := v.(int64)
	return n == 1, nil
}

// luaResign gives a maintenance lease up (LeaderResign).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.name -> the lease
// A.holder -> who gives it up
//
// Returns 1.
var luaResign = script(`
local A = args(4)
local key = K('lead', A.name)
if redis.call('HGET', key, LF.holder) == A.holder then redis.call('DEL', key) end
return 1
`)

// LeaderResign gives the lease up if holder has it.
func (s *Store) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	_, err := s.run(ctx, "resign "+p.Name, luaResign, "name", p.Name, "holder", p.Holder)
	return err
}
