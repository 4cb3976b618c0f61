package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/sluicetype"
)

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
		ids, err := s.c.ZRange(ctx, s.Key("egi", g.raw), 0, -1).Result()
		if err != nil {
			return moved, fmt.Errorf("regroup errors: %w", err)
		}
		for i := 0; i < len(ids); i += migrateChunk {
			chunk := ids[i:min(i+migrateChunk, len(ids))]
			pipe := s.c.Pipeline()
			les := make([]interface{ Val() string }, len(chunk))
			for k, id := range chunk {
				les[k] = pipe.HGet(ctx, s.Key("job", id), "le")
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
				return moved, fmt.Errorf("regroup errors: %w", err)
			}
			for k, id := range chunk {
				p := sluicetype.NormalizeError(les[k].Val())
				if p == "" || p == g.pattern {
					continue
				}
				v, err := s.run(ctx, "regroup error of job "+id, luaRegroupError, id, g.pattern, p)
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
