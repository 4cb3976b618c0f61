package redis

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// JobCountByQueue reads the maintained counters.
func (s *Store) JobCountByQueue(ctx context.Context, p *backend.JobCountByQueueParams) (map[string]map[sluicetype.State]int64, error) {
	m, err := s.c.HGetAll(ctx, s.key("counts")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: job counts: %w", err)
	}
	out := map[string]map[sluicetype.State]int64{}
	for f, v := range m {
		q, st, ok := strings.Cut(f, us)
		n, err := atoi64(v)
		if err != nil {
			return nil, fmt.Errorf("redis: job counts: %s: %w", f, err)
		}
		if !ok || n == 0 || (p.Queue != "" && q != p.Queue) {
			continue
		}
		if out[q] == nil {
			out[q] = map[sluicetype.State]int64{}
		}
		out[q][sluicetype.State(st)] = n
	}
	return out, nil
}

// luaReconcile recounts the counters from the indexes of the jobs: the
// per-queue state sets, the queue-and-kind sets of the states without
// them (NOST), and the lease set (running) (JobCountReconcile).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.states -> every state, joined by US
//
// Returns 1.
var luaReconcile = script(`
local A = args(4)
local qs = {}
for _, q in ipairs(redis.call('SMEMBERS', K('queues'))) do qs[q] = true end
for _, f in ipairs(redis.call('HKEYS', K('counts'))) do qs[split(f)[1]] = true end
redis.call('DEL', K('counts'))
local function add(q, s, n) if n > 0 then redis.call('HINCRBY', K('counts'), q .. US .. s, n) end end
local qks = redis.call('SMEMBERS', K('qk'))
for _, s in ipairs(split(A.states)) do
  if NOST[s] then
    for _, pk in ipairs(qks) do add(split(pk)[1], s, redis.call('ZCARD', K('sqk', s, pk))) end
  elseif s ~= 'running' then
    for q in pairs(qs) do add(q, s, redis.call('ZCARD', K('sq', s, q))) end
  end
end
for _, m in ipairs(redis.call('ZRANGE', K('run'), 0, -1)) do
  local q = redis.call('HGET', K('job', string.sub(m, 21)), F.queue)
  if q then add(q, 'running', 1) end
end
return 1
`)

// JobCountReconcile recounts the counters from the per-queue state
// indexes.
func (s *Store) JobCountReconcile(ctx context.Context) error {
	_, err := s.run(backend.WithoutIdempotencyWrite(ctx), "reconcile counts", luaReconcile, "states", joinStates(sluicetype.AllStates))
	return err
}
