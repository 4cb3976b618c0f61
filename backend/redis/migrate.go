package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// SchemaVersion is the namespace layout this build reads and writes.
//
//	1  the first layout
//	2  a job hash leaves out a, c, f, pr and to at 0 and tg at [] (a
//	   missing field reads as its default). A build of version 1 would read
//	   such a job wrong, so it refuses the namespace; this build reads
//	   version 1's hashes as they are, so migrating from 1 writes the
//	   schema key and nothing else.
//	3  no st index for the states every job passes through (available,
//	   completed): their listings merge the queues' sq sets, and a claim
//	   and a completion each write one entry less. A build of version 2
//	   would list those states from st, missing every job since, so it
//	   refuses the namespace; migrating deletes st:available and
//	   st:completed (stop the older build's workers first: one still
//	   running would go on writing them).
//	4  no sq and sk sets for available and completed jobs either: one
//	   set per queue and kind (sqk), the pairs named in qk, so an enqueue,
//	   a claim and a completion each write one entry instead of two. A
//	   build of version 3 would list those states from sq, missing every
//	   job since, so it refuses the namespace; migrating moves the
//	   entries of sq and sk into sqk, a chunk a script (stop the older
//	   build's workers first).
//	5  error patterns as this build normalises them (ids of any alphabet,
//	   schema names kept). The layout is version 4's; migrating moves each
//	   job whose pattern this build would write otherwise, from its last
//	   error, to its new group, a job a script (regroupErrors), so the
//	   jobs that died before the upgrade group with the ones after it.
const SchemaVersion = 5

// openSchema applies DESIGN's creation rule to the namespace's schema key.
func (s *Store) openSchema(ctx context.Context, opts Options) error {
	var v string
	err := readAgainOnDrop(ctx, func() error {
		var err error
		v, err = s.c.Get(ctx, s.anchor).Result()
		return err
	})
	if errors.Is(err, goredis.Nil) {
		v, err = "", nil
	}
	if err != nil {
		return fmt.Errorf("redis: %s: read schema version: %w", s.url, err)
	}
	have := 0
	if v != "" {
		if have, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("redis: %s: namespace %s: schema version %q is not a number", s.url, s.ns, v)
		}
	}
	cmd := "sluice migrate --store " + s.url
	switch {
	case have == SchemaVersion:
		return nil
	case have > SchemaVersion:
		return fmt.Errorf("redis: %s: %w: namespace %s is at schema version %d, newer than this build's %d (run a newer build, or %s from it)",
			s.url, ErrNoStore, s.ns, have, SchemaVersion, cmd)
	case v == "" && opts.MustExist:
		return fmt.Errorf("redis: %s: %w: namespace %s is empty (create it with: %s)", s.url, ErrNoStore, s.ns, cmd)
	case v != "" && !opts.Migrate:
		return fmt.Errorf("redis: %s: %w: namespace %s is at schema version %d, this build needs %d (migrate it with: %s; or let the process migrate it as it opens: sluice serve and worker with --migrate, Options.Migrate in a program)",
			s.url, ErrNoStore, s.ns, have, SchemaVersion, cmd)
	}
	// Creating, or migrating from an older version (see SchemaVersion), is
	// writing the key, which two processes may do at once; from 1 or 2 it
	// first drops the st sets version 3 does without (UNLINK frees them
	// off the server's main thread).
	if have > 0 && have < 3 {
		keys := make([]string, len(unindexedStates))
		for i, st := range unindexedStates {
			keys[i] = s.key("st", string(st))
		}
		if err := s.c.Unlink(ctx, keys...).Err(); err != nil {
			return fmt.Errorf("redis: %s: migrate namespace %s: %w", s.url, s.ns, err)
		}
	}
	if have > 0 && have < 4 {
		if err := s.migratePairs(ctx); err != nil {
			return fmt.Errorf("redis: %s: migrate namespace %s: %w", s.url, s.ns, err)
		}
	}
	if have > 0 && have < 5 {
		n, err := s.regroupErrors(ctx)
		if err != nil {
			return fmt.Errorf("redis: %s: migrate namespace %s: %w", s.url, s.ns, err)
		}
		if n > 0 {
			s.log.Info("redis: error patterns normalised again", "namespace", s.ns, "jobs", n)
		}
	}
	if err := s.c.Set(ctx, s.anchor, strconv.Itoa(SchemaVersion), 0).Err(); err != nil {
		return fmt.Errorf("redis: %s: migrate namespace %s: %w", s.url, s.ns, err)
	}
	s.log.Info("redis: namespace at schema version", "namespace", s.ns, "from", have, "to", SchemaVersion)
	return nil
}

// luaMigratePairs moves a chunk of a queue's sq set of a state without st
// (NOST), with the jobs' entries in that state's sk sets, into the
// queue-and-kind sets of schema version 4 (openSchema, from version 3 or
// older). A chunk keeps the script short on a large namespace.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.state -> the state
// A.queue -> the queue
// A.limit -> the chunk's size
//
// Returns how many members the queue's sq set still holds.
var luaMigratePairs = script(`
local A = args(4)
local st, q, limit = A.state, A.queue, tonumber(A.limit)
local key = K('sq', st, q)
local ms = redis.call('ZRANGE', key, 0, limit - 1)
for _, m in ipairs(ms) do
  local k = redis.call('HGET', K('job', string.sub(m, 21)), F.kind)
  if k then
    redis.call('ZADD', pairkey(st, q, k), 0, m)
    redis.call('ZREM', K('sk', st, k), m)
  end
end
if #ms > 0 then redis.call('ZREM', key, unpack(ms)) end
return redis.call('ZCARD', key)
`)

// migratePairs moves the available and completed jobs' entries of every
// queue's sq set and every kind's sk set into sqk (schema version 4), a
// chunk a script; a migration stopped half way goes on where it stopped.
// Last it drops what is left of those states' sk sets (members whose job
// was gone, which no chunk could place).
func (s *Store) migratePairs(ctx context.Context) error {
	queues, err := s.c.SMembers(ctx, s.key("queues")).Result()
	if err != nil {
		return fmt.Errorf("queues: %w", err)
	}
	for _, st := range unindexedStates {
		for _, q := range queues {
			for {
				v, err := s.run(ctx, "migrate "+string(st)+" jobs of queue "+q, luaMigratePairs, "state", string(st), "queue", q,
					"limit", migrateChunk)
				if err != nil {
					return err
				}
				if n, _ := v.(int64); n == 0 {
					break
				}
			}
		}
	}
	pairs, err := s.queueKinds(ctx)
	if err != nil {
		return err
	}
	// A kind in several queues is one sk set a state: name it once.
	var keys []string
	seen := map[string]bool{}
	for _, qk := range pairs {
		if seen[qk.kind] {
			continue
		}
		seen[qk.kind] = true
		for _, st := range unindexedStates {
			keys = append(keys, s.key("sk", string(st), qk.kind))
		}
	}
	for i := 0; i < len(keys); i += 100 {
		if err := s.c.Unlink(ctx, keys[i:min(i+100, len(keys))]...).Err(); err != nil {
			return fmt.Errorf("drop sk sets: %w", err)
		}
	}
	return nil
}

// migrateChunk is how many index members one migration script moves.
const migrateChunk = 500

// Migrate brings the namespace to this build's schema version.
func (s *Store) Migrate(ctx context.Context) error {
	return s.openSchema(ctx, Options{Migrate: true})
}
