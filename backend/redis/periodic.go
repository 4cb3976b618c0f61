package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Periodic jobs' schedules (backend.ScheduleStore): a hash sch:NAME per
// schedule, its fields in fields.go's table (SF in the scripts), and the
// names in schs (sorted set at score 0,
// paged by ZRANGEBYLEX). The keys are new and nothing else reads them, so
// the namespace's schema version stays: an older build ignores them.

// luaScheduleUpsert declares schedules.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name, spec, zone triples
//
// Returns 1.
var luaScheduleUpsert = script(`
for i = 4, #ARGV, 3 do
  local name, key = ARGV[i], K('sch', ARGV[i])
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, SF.spec, ARGV[i + 1], SF.zone, ARGV[i + 2], SF.last_tick, NOW, SF.seen_at, NOW, SF.created_at, NOW)
    redis.call('ZADD', K('schs'), 0, name)
  else
    redis.call('HSET', key, SF.spec, ARGV[i + 1], SF.zone, ARGV[i + 2], SF.seen_at, NOW)
  end
end
idem_record('')
return 1
`)

// luaScheduleSet pauses, resumes or triggers one schedule.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4] -> the name; ARGV[5] -> "pause", "resume" or "trigger"
//
// Returns the hash as a flat list. Errors: "NOTFOUND".
var luaScheduleSet = script(`
local key = K('sch', ARGV[4])
if redis.call('EXISTS', key) == 0 then return redis.error_reply('NOTFOUND') end
local op = ARGV[5]
if op == 'pause' then redis.call('HSET', key, SF.paused, '1')
elseif op == 'resume' then redis.call('HSET', key, SF.paused, '0')
elseif (redis.call('HGET', key, SF.trigger) or '') == '' then redis.call('HSET', key, SF.trigger, NOW) end
idem_record('')
return redis.call('HGETALL', key)
`)

// luaScheduleMark applies marks, each a compare and set on lt.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name, from, to, job, trigger quintuples ("" for an
// absent to, job or trigger)
//
// Returns one 0/1 per mark: whether its tick moved.
var luaScheduleMark = script(`
local out = {}
for i = 4, #ARGV, 5 do
  local key, from, to, job, trig = K('sch', ARGV[i]), ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local moved = 0
  local h = redis.call('HMGET', key, SF.last_tick, SF.trigger)
  if h[1] then
    if to ~= '' and h[1] == from and to > from then
      redis.call('HSET', key, SF.last_tick, to)
      if job ~= '' then redis.call('HSET', key, SF.last_job, job, SF.fired_at, NOW) end
      moved = 1
    end
    if trig ~= '' and h[2] == trig then
      redis.call('HSET', key, SF.trigger, '')
      if job ~= '' and moved == 0 then redis.call('HSET', key, SF.last_job, job, SF.fired_at, NOW) end
    end
  end
  out[#out + 1] = moved
end
return out
`)

// scheduleChunk is the most schedules one script writes: a script holds
// the server while it runs.
const scheduleChunk = 500

// ScheduleUpsert declares schedules, a chunk a script.
func (s *Store) ScheduleUpsert(ctx context.Context, p *backend.ScheduleUpsertParams) error {
	for i := 0; i < len(p.Schedules); i += scheduleChunk {
		chunk := p.Schedules[i:min(i+scheduleChunk, len(p.Schedules))]
		args := make([]any, 0, 3*len(chunk))
		for _, d := range chunk {
			args = append(args, d.Name, d.Spec, d.Zone)
		}
		if _, err := s.run(ctx, "declare schedules", luaScheduleUpsert, args...); err != nil {
			return err
		}
	}
	return nil
}

func scheduleFrom(name string, m map[string]string) (*backend.ScheduleRow, error) {
	row := &backend.ScheduleRow{Name: name, Spec: m[sSpec], Zone: m[sZone], LastJob: m[sLastJob], Paused: m[sPaused] == "1"}
	for f, dst := range map[string]*time.Time{sLastTick: &row.LastTick, sFiredAt: &row.FiredAt, sTrigger: &row.TriggerAt, sSeenAt: &row.SeenAt, sCreatedAt: &row.CreatedAt} {
		if m[f] == "" {
			continue
		}
		t, err := ttime(m[f])
		if err != nil {
			return nil, fmt.Errorf("redis: schedule %s: field %s: %w", name, f, err)
		}
		*dst = t
	}
	return row, nil
}

// ScheduleList pages schedules by name: the names from schs, then their
// hashes in one pipeline.
func (s *Store) ScheduleList(ctx context.Context, p *backend.ScheduleListParams) ([]*backend.ScheduleRow, error) {
	limit := p.Limit
	if limit <= 0 || limit > backend.ScheduleListLimit {
		limit = backend.ScheduleListLimit
	}
	lo := "-"
	if p.After != "" {
		lo = "(" + p.After
	}
	names, err := s.c.ZRangeByLex(ctx, s.key("schs"), &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list schedules: %w", err)
	}
	if len(names) == 0 {
		return nil, nil
	}
	pipe := s.c.Pipeline()
	cmds := make([]*goredis.MapStringStringCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HGetAll(ctx, s.key("sch", n))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redis: list schedules: %w", err)
	}
	out := make([]*backend.ScheduleRow, 0, len(names))
	for i, n := range names {
		m := cmds[i].Val()
		if len(m) == 0 {
			continue
		}
		row, err := scheduleFrom(n, m)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// ScheduleGet returns one schedule.
func (s *Store) ScheduleGet(ctx context.Context, p *backend.ScheduleGetParams) (*backend.ScheduleRow, error) {
	m, err := s.c.HGetAll(ctx, s.key("sch", p.Name)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: get schedule %s: %w", p.Name, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("schedule %s: %w", p.Name, sluicetype.ErrNotFound)
	}
	return scheduleFrom(p.Name, m)
}

func (s *Store) scheduleSet(ctx context.Context, name, op string) (*backend.ScheduleRow, error) {
	v, err := s.run(ctx, op+" schedule "+name, luaScheduleSet, name, op)
	var r *refusal
	if errors.As(err, &r) && r.code == "NOTFOUND" {
		return nil, fmt.Errorf("schedule %s: %w", name, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return scheduleFrom(name, sliceMap(strs(v)))
}

// SchedulePause pauses a schedule.
func (s *Store) SchedulePause(ctx context.Context, p *backend.SchedulePauseParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "pause")
}

// ScheduleResume resumes a schedule.
func (s *Store) ScheduleResume(ctx context.Context, p *backend.ScheduleResumeParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "resume")
}

// ScheduleTrigger records a run-now request unless one is pending.
func (s *Store) ScheduleTrigger(ctx context.Context, p *backend.ScheduleTriggerParams) (*backend.ScheduleRow, error) {
	return s.scheduleSet(ctx, p.Name, "trigger")
}

// ScheduleMarkFired moves schedules forward, a chunk a script, each mark
// a compare and set.
func (s *Store) ScheduleMarkFired(ctx context.Context, p *backend.ScheduleMarkFiredParams) ([]bool, error) {
	out := make([]bool, 0, len(p.Marks))
	opt := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return tstr(t)
	}
	for i := 0; i < len(p.Marks); i += scheduleChunk {
		chunk := p.Marks[i:min(i+scheduleChunk, len(p.Marks))]
		args := make([]any, 0, 5*len(chunk))
		for _, m := range chunk {
			args = append(args, m.Name, opt(m.From), opt(m.To), m.Job, opt(m.Trigger))
		}
		v, err := s.run(ctx, "mark schedules", luaScheduleMark, args...)
		if err != nil {
			return nil, err
		}
		res, ok := v.([]any)
		if !ok || len(res) != len(chunk) {
			return nil, fmt.Errorf("redis: mark schedules: reply %T of %d for %d marks", v, len(res), len(chunk))
		}
		for _, r := range res {
			n, _ := r.(int64)
			out = append(out, n == 1)
		}
	}
	return out, nil
}
