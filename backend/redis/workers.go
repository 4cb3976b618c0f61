package redis

import (
	"context"
	"strconv"

	"github.com/sluicehq/sluice/backend"
)

// luaHeartbeat records that a worker process lives (WorkerHeartbeat).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.id -> the worker
// A.host -> its host
// A.pid -> its process id
// A.queues -> its queues (JSON)
// A.ttl -> how long the record lives ("s:ns")
//
// Returns 1.
var luaHeartbeat = script(`
local A = args(4)
local key = K('w', A.id)
if redis.call('HEXISTS', key, WF.started) == 0 then redis.call('HSET', key, WF.started, NOW) end
redis.call('HSET', key, WF.host, A.host, WF.pid, A.pid, WF.queues, A.queues, WF.heartbeat, NOW, WF.expires,
  tadd(A.ttl))
redis.call('SADD', K('workers'), A.id)
return 1
`)

// WorkerHeartbeat records that a worker process lives, until TTL.
func (s *Store) WorkerHeartbeat(ctx context.Context, p *backend.WorkerHeartbeatParams) error {
	_, err := s.run(ctx, "heartbeat of worker "+p.ID, luaHeartbeat, "id", p.ID, "host", p.Host,
		"pid", strconv.Itoa(p.PID), "queues", jsonStrings(p.Queues), "ttl", dstr(p.TTL))
	return err
}

// luaWorkerDelete removes a worker's record (WorkerDelete).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.id -> the worker
//
// Returns 1.
var luaWorkerDelete = script(`
local A = args(4)
redis.call('DEL', K('w', A.id))
redis.call('SREM', K('workers'), A.id)
return 1
`)

// WorkerDelete removes a worker's record.
func (s *Store) WorkerDelete(ctx context.Context, p *backend.WorkerDeleteParams) error {
	_, err := s.run(ctx, "delete worker "+p.ID, luaWorkerDelete, "id", p.ID)
	return err
}
