package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The arguments of luaRenew: a head, then one record per item
// (batchLayout).
const (
	rnwDuration = iota // the lease duration ("s:ns")
	rnwHeadLen
)

const (
	rnwID    = iota
	rnwLease // lease id
	rnwFence //
	rnwRecLen
)

// renewLayout names luaRenew's arguments for the script.
func renewLayout() batchLayout {
	var h [rnwHeadLen]string
	h[rnwDuration] = "duration"
	var r [rnwRecLen]string
	r[rnwID], r[rnwLease], r[rnwFence] = "id", "lease", "fence"
	return batchLayout{head: h[:], rec: r[:]}
}

// luaRenew extends leases (JobLeaseRenew).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4] -> A.duration: the lease duration ("s:ns")
// ARGV[R1...] -> one record of RN values per item, at the offsets R names
// (renewLayout: id, lease, fence)
//
// Returns one integer per item: 1 renewed, 0 lease lost.
//
// A running job is only in the lease set (run) and, with an error
// pattern, its error group's sets, whose members a renewal leaves as they
// are: it reads the five fields it checks and writes two, and the lease
// set's entries move once per batch.
var luaRenew = batchScript(renewLayout(), `
local exp = tadd(A.duration)
local res, old, new = {}, {}, {}
for i = R1, #ARGV, RN do
  local id = ARGV[i + R.id]
  local key = P .. 'job:' .. id
  local h = redis.call('HMGET', key, F.state, F.lease_id, F.fence, F.lease_expires, F.version)
  if h[1] == 'running' and h[2] == ARGV[i + R.lease] and h[3] == ARGV[i + R.fence] then
    redis.call('HSET', key, F.lease_expires, exp, F.version, inc(h[5]))
    old[#old + 1] = (h[4] or '') .. ':' .. id
    new[#new + 1] = exp .. ':' .. id
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
zmany(false, K('run'), old)
zmany(true, K('run'), new)
return res
`)

// JobLeaseRenew extends leases; each item is fenced on its own.
func (s *Store) JobLeaseRenew(ctx context.Context, p *backend.JobLeaseRenewParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	var head [rnwHeadLen]string
	head[rnwDuration] = dstr(lease)
	args := appendArgs(make([]any, 0, rnwHeadLen+rnwRecLen*len(p.Items)), head[:]...)
	for _, it := range p.Items {
		var r [rnwRecLen]string
		r[rnwID], r[rnwLease], r[rnwFence] = it.ID, it.LeaseID, strconv.FormatInt(it.Fence, 10)
		args = appendArgs(args, r[:]...)
	}
	v, err := s.run(ctx, "renew leases", luaRenew, args...)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	for i, it := range p.Items {
		if ok, _ := at(r, i).(int64); ok != 1 {
			out[i] = fmt.Errorf("renew lease of job %s: %w", it.ID, sluicetype.ErrLeaseLost)
		}
	}
	return out, nil
}

// JobListExpiredLeases lists running jobs whose lease has expired, oldest
// expiry first, with whether their worker still heartbeats.
func (s *Store) JobListExpiredLeases(ctx context.Context, p *backend.JobListExpiredLeasesParams) ([]backend.ExpiredLease, error) {
	now, err := s.Now(ctx)
	if err != nil {
		return nil, err
	}
	nowS := tstr(now)
	by := &goredis.ZRangeBy{Min: "-", Max: "(" + nowS}
	if p.Limit > 0 {
		by.Count = int64(p.Limit)
	}
	ms, err := s.c.ZRangeByLex(ctx, s.key("run"), by).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: expired leases: %w", err)
	}
	ids := memberIDs(ms)
	js, err := s.getJobs(ctx, ids, false, false)
	if err != nil {
		return nil, err
	}
	var out []backend.ExpiredLease
	pipe := s.c.Pipeline()
	var alive []*goredis.StringCmd
	for _, j := range js {
		if j == nil || j.State != sluicetype.StateRunning || j.Lease == nil {
			continue
		}
		out = append(out, backend.ExpiredLease{Job: j})
		alive = append(alive, pipe.HGet(ctx, s.key("w", j.Lease.WorkerID), wExpires))
	}
	if len(out) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redis: expired leases: %w", err)
	}
	for i := range out {
		x := alive[i].Val()
		out[i].WorkerAlive = x != "" && x >= nowS
	}
	return out, nil
}

// memberIDs takes the ids out of "TIME:ID" members.
func memberIDs(ms []string) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		if len(m) > 20 {
			out[i] = m[20:]
		}
	}
	return out
}
