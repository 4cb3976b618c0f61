package redis

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// QueueList names every queue that has jobs or a paused record.
func (s *Store) QueueList(ctx context.Context) ([]sluicetype.QueueInfo, error) {
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		return nil, err
	}
	paused, err := s.c.HGetAll(ctx, s.key("paused")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list queues: %w", err)
	}
	flags := make(map[string]bool, len(paused))
	for q, v := range paused {
		flags[q] = v == "1"
	}
	return backend.QueueInfosFromCounts(counts, flags), nil
}

// luaPause records a queue as paused or resumed (QueuePause, QueueResume).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.queue -> the queue
// A.paused -> "1" paused or "0" resumed
// A.actor -> who did it
//
// Returns 1.
var luaPause = script(`
local A = args(4)
redis.call('HSET', K('paused'), A.queue, A.paused)
redis.call('HSET', K('pausedby'), A.queue, NOW .. US .. A.actor)
idem_record('')
return 1
`)

// QueuePause stops workers claiming from a queue.
func (s *Store) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	_, err := s.run(ctx, "pause queue "+p.Queue, luaPause, "queue", p.Queue, "paused", "1", "actor", p.Actor)
	return err
}

// QueueResume lets workers claim from a queue again.
func (s *Store) QueueResume(ctx context.Context, p *backend.QueuePauseParams) error {
	_, err := s.run(ctx, "resume queue "+p.Queue, luaPause, "queue", p.Queue, "paused", "0", "actor", p.Actor)
	if err == nil {
		s.publishWake(ctx, p.Queue)
	}
	return err
}
