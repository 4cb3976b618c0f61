package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/sluicetype"
)

// luaRegroupError moves one job from error pattern A.from to A.to
// (schema version 5): its eg and egi entries, both groups' counts and its
// ep field, read and written in one script so that no transition of the
// job falls between. A job whose pattern is no longer A.from is left.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.id -> the job
// A.from -> its pattern as read
// A.to -> its pattern as this build writes it
//
// Returns 1 when it moved the job, 0 when not.
var luaRegroupError = script(`
local A = args(4)
local id, from, to = A.id, A.from, A.to
local key = K('job', id)
local h = redis.call('HMGET', key, F.state, F.queue, F.kind, F.pattern, F.state_changed_at)
if not h[1] or h[4] ~= from then return 0 end
local pre = h[1] .. US .. h[2] .. US .. h[3] .. US
local m = h[5] .. ':' .. id
local gf, gt = pre .. from, pre .. to
redis.call('ZREM', K('eg', gf), m)
redis.call('ZREM', K('egi', gf), id)
egcount(gf, -1)
redis.call('ZADD', K('eg', gt), 0, m)
redis.call('ZADD', K('egi', gt), 0, id)
egcount(gt, 1)
redis.call('HSET', key, F.pattern, to)
return 1
`)

// regroupErrors moves every job whose stored error pattern differs from
// sluicetype.NormalizeError of its last error to the group of the new
// pattern (schema version 5), a job a script, and returns how many moved.
// A migration stopped half way goes on where it stopped: the jobs moved
// already have their new pattern.
func (s *Store) regroupErrors(ctx context.Context) (int, error) {
	groups, err := s.groupKeys(ctx)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, g := range groups {
		ids, err := s.c.ZRange(ctx, s.key("egi", g.raw), 0, -1).Result()
		if err != nil {
			return moved, fmt.Errorf("regroup errors: %w", err)
		}
		for i := 0; i < len(ids); i += migrateChunk {
			chunk := ids[i:min(i+migrateChunk, len(ids))]
			pipe := s.c.Pipeline()
			les := make([]interface{ Val() string }, len(chunk))
			for k, id := range chunk {
				les[k] = pipe.HGet(ctx, s.key("job", id), fLastError)
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
				return moved, fmt.Errorf("regroup errors: %w", err)
			}
			for k, id := range chunk {
				p := sluicetype.NormalizeError(les[k].Val())
				if p == "" || p == g.pattern {
					continue
				}
				v, err := s.run(ctx, "regroup error of job "+id, luaRegroupError, "id", id, "from", g.pattern, "to", p)
				if err != nil {
					return moved, err
				}
				if n, _ := v.(int64); n == 1 {
					moved++
				}
			}
		}
	}
	return moved, nil
}
