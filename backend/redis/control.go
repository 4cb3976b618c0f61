package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Operator actions, quarantine records, workers, leaders, queues and
// counters.

// specArgs are an action spec's name/value pairs for a script (the s_
// prefix of luaLib's spec).
func specArgs(spec backend.ActionSpec) []any {
	return []any{
		"s_from", joinStates(spec.From), "s_to", string(spec.To), "s_reason", string(spec.Reason),
		"s_clear", flag(spec.Has(backend.EffectClearLease)), "s_schednow", flag(spec.Has(backend.EffectScheduleNow)),
		"s_fin", flag(spec.Has(backend.EffectFinalize)), "s_reopen", flag(spec.Has(backend.EffectReopen)),
		"s_onemore", flag(spec.Has(backend.EffectOneMoreAttempt)), "s_reset", flag(spec.Has(backend.EffectResetCrashes)),
		"s_del", flag(spec.Has(backend.EffectDelete)), "s_rquar", flag(spec.Refuses(backend.RefuseQuarantined)),
		"s_rsuper", flag(spec.Refuses(backend.RefuseSuperseded)),
	}
}

// luaAction applies one operator action's spec to one job (JobAction).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id; the spec as s_from (states joined by
// US), s_to, s_reason and the flags s_clear, s_schednow, s_fin, s_reopen,
// s_onemore, s_reset, s_del, s_rquar, s_rsuper ("1" each); force ("1");
// deadline (a time or ""); the event ev ("1") with ev_kind, ev_actor,
// ev_to, ev_msg (its from-state and attempt are the job's).
//
// Returns the job as written ({fields, errors}), or {} when deleted.
// Errors: "NOTFOUND", "STATE <state>", "SUPER <by>", "QUAR <fingerprint>".
var luaAction = script(`
local A = args(4)
local S = spec(A, 's_')
local J = load(A.id)
if not J then return redis.error_reply('NOTFOUND') end
if not S.from[J[F.state]] then return redis.error_reply('STATE ' .. J[F.state]) end
if S.rsuper and J[F.superseded_by] ~= '' and A.force ~= '1' then return redis.error_reply('SUPER ' .. J[F.superseded_by]) end
if S.rquar and quarantined(J[F.fingerprint]) then return redis.error_reply('QUAR ' .. J[F.fingerprint]) end
local O = copy(J)
if S.del then
  remove(J, true)
  idem_record('')
  return {}
end
apply(J, S, A.deadline)
commit(O, J, true)
if A.ev == '1' then event(J[F.id], A.ev_kind, A.ev_actor, O[F.state], A.ev_to, O[F.attempt], A.ev_msg) end
idem_record(rec(J, false))
return out(J, false)
`)

// JobAction applies one operator action's spec to one job in one script.
func (s *Store) JobAction(ctx context.Context, p *backend.JobActionParams) (*sluicetype.Job, error) {
	spec := &p.Spec
	if spec.To == "" || len(spec.From) == 0 {
		return nil, fmt.Errorf("%s job %s: %w: empty action spec", spec.Action, p.ID, sluicetype.ErrInvalid)
	}
	a := append([]any{"id", p.ID, "force", flag(p.Force), "deadline", tptr(p.Deadline),
		"ev", flag(spec.Event != ""), "ev_kind", string(p.Event.Kind), "ev_actor", p.Event.Actor,
		"ev_to", string(p.Event.To), "ev_msg", p.Event.Message}, specArgs(*spec)...)
	v, err := s.run(ctx, string(spec.Action)+" job "+p.ID, luaAction, a...)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, &sluicetype.StateError{Action: spec.Action, ID: p.ID, State: sluicetype.State(r.arg), Allowed: spec.From}
			case "SUPER":
				return nil, &sluicetype.SupersededError{ID: p.ID, By: r.arg}
			case "QUAR":
				return nil, &sluicetype.QuarantinedError{Verb: string(spec.Action), ID: p.ID, Fingerprint: r.arg}
			}
		}
		return nil, err
	}
	if arr, _ := v.([]any); len(arr) == 0 {
		return nil, nil
	}
	j, err := jobReply(v, false)
	if err == nil && j.State == sluicetype.StateAvailable {
		s.publishWake(ctx, j.Queue)
	}
	return j, err
}

// luaUpdatePayload replaces a job's payload and fingerprint
// (JobUpdatePayload).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, payload, fp, version, running (the
// state that refuses the edit), ev_kind, ev_actor, ev_msg.
//
// Returns the job as written. Errors: "NOTFOUND", "STATE <state>",
// "VERSION <version>".
var luaUpdatePayload = script(`
local A = args(4)
local J = load(A.id)
if not J then return redis.error_reply('NOTFOUND') end
if J[F.state] == A.running then return redis.error_reply('STATE ' .. J[F.state]) end
if J[F.version] ~= A.version then return redis.error_reply('VERSION ' .. J[F.version]) end
if J[F.fingerprint] ~= '' then redis.call('SREM', K('fpj', J[F.fingerprint]), J[F.id]) end
J[F.payload] = A.payload; J[F.fingerprint] = A.fp
if J[F.fingerprint] ~= '' then redis.call('SADD', K('fpj', J[F.fingerprint]), J[F.id]) end
bump(J)
redis.call('HSET', K('job', J[F.id]), F.payload, J[F.payload], F.fingerprint, J[F.fingerprint], F.version,
  J[F.version])
event(J[F.id], A.ev_kind, A.ev_actor, J[F.state], J[F.state], J[F.attempt], A.ev_msg)
idem_record(rec(J, true))
return out(J, true)
`)

// JobUpdatePayload replaces the payload and fingerprint of a job that is
// not running, if its version is still p.Version.
func (s *Store) JobUpdatePayload(ctx context.Context, p *backend.JobUpdatePayloadParams) (*sluicetype.Job, error) {
	v, err := s.run(ctx, "edit payload of job "+p.ID, luaUpdatePayload,
		"id", p.ID, "payload", string(p.Payload), "fp", p.Fingerprint, "version", strconv.FormatInt(p.Version, 10),
		"running", string(sluicetype.StateRunning),
		"ev_kind", string(p.Event.Kind), "ev_actor", p.Event.Actor, "ev_msg", p.Event.Message)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, backend.PayloadNotEditable(p.ID, sluicetype.State(r.arg))
			case "VERSION":
				have, perr := strconv.ParseInt(r.arg, 10, 64)
				if perr != nil {
					return nil, fmt.Errorf("redis: edit payload of job %s: %w", p.ID, fieldErr(fVersion, perr))
				}
				return nil, &sluicetype.VersionError{ID: p.ID, Have: have, Want: p.Version}
			}
		}
		return nil, err
	}
	j, err := jobReply(v, true)
	if err == nil {
		s.publishWake(ctx, j.Queue)
	}
	return j, err
}

// luaRetryWithInput inserts the corrected copy of a finished job and marks
// the original superseded (JobRetryCopy).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, newid, payload, fp, allowed (the states
// the original may be in, joined by US), to (the copy's state), and the
// events o_kind, o_actor, o_msg (on the original) and c_kind, c_actor,
// c_to, c_msg (on the copy).
//
// Returns the copy ({fields, errors}). Errors: "NOTFOUND", "STATE
// <state>", "QUAR <fingerprint>", "CONFLICT".
var luaRetryWithInput = script(`
local A = args(4)
local J = load(A.id)
if not J then return redis.error_reply('NOTFOUND') end
if not set(split(A.allowed))[J[F.state]] then return redis.error_reply('STATE ' .. J[F.state]) end
if quarantined(A.fp) then return redis.error_reply('QUAR ' .. A.fp) end
if redis.call('EXISTS', K('job', A.newid)) == 1 then return redis.error_reply('CONFLICT') end
local C = {[F.id] = A.newid, [F.queue] = J[F.queue], [F.kind] = J[F.kind], [F.payload] = A.payload,
  [F.schema_version] = J[F.schema_version], [F.metadata] = J[F.metadata], [F.tags] = J[F.tags],
  [F.priority] = J[F.priority], [F.state] = A.to,
  [F.attempt] = '0', [F.max_attempts] = J[F.max_attempts], [F.crash_attempt] = '0', [F.fingerprint] = A.fp,
    [F.fence] = '0', [F.scheduled_at] = NOW, [F.deadline] = '', [F.timeout] = J[F.timeout], [F.created_at] = NOW,
    [F.attempted_at] = '', [F.attempted_by] = '',
  [F.state_changed_at] = NOW, [F.finalized_at] = '', [F.reason] = '', [F.lease_id] = '', [F.lease_worker] = '',
    [F.lease_expires] = '', [F.version] = '1', [F.checkpoint] = '', [F.dead_letter_of] = '', [F.retry_of] = J[F.id],
    [F.superseded_by] = '',
  [F.last_error] = '', [F.pattern] = ''}
create(C)
J[F.superseded_by] = A.newid
bump(J)
redis.call('HSET', K('job', J[F.id]), F.superseded_by, J[F.superseded_by], F.version, J[F.version])
redis.call('SADD', K('sup'), J[F.id])
event(J[F.id], A.o_kind, A.o_actor, J[F.state], J[F.state], J[F.attempt], A.o_msg)
event(C[F.id], A.c_kind, A.c_actor, '', A.c_to, '0', A.c_msg)
idem_record(rec(C, true))
return out(C, true)
`)

// JobRetryCopy inserts the corrected copy of a finished job and marks
// the original superseded by it, in one script.
func (s *Store) JobRetryCopy(ctx context.Context, p *backend.JobRetryCopyParams) (*sluicetype.Job, error) {
	v, err := s.run(ctx, "retry job "+p.ID+" with input", luaRetryWithInput,
		"id", p.ID, "newid", p.NewID, "payload", string(p.Payload), "fp", p.Fingerprint,
		"allowed", joinStates(sluicetype.TerminalStates()), "to", string(sluicetype.StateAvailable),
		"o_kind", string(p.OriginalEvent.Kind), "o_actor", p.OriginalEvent.Actor, "o_msg", p.OriginalEvent.Message,
		"c_kind", string(p.CopyEvent.Kind), "c_actor", p.CopyEvent.Actor, "c_to", string(p.CopyEvent.To),
		"c_msg", p.CopyEvent.Message)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, &sluicetype.StateError{Action: "retry with input", ID: p.ID, State: sluicetype.State(r.arg), Allowed: sluicetype.TerminalStates()}
			case "QUAR":
				return nil, &sluicetype.QuarantinedError{Verb: "retry with input", ID: p.ID, Fingerprint: r.arg}
			case "CONFLICT":
				return nil, fmt.Errorf("retry job %s with input: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
			}
		}
		return nil, err
	}
	return jobReply(v, true)
}

// FingerprintGet returns a quarantine record or ErrNotFound.
func (s *Store) FingerprintGet(ctx context.Context, p *backend.FingerprintGetParams) (*sluicetype.Fingerprint, error) {
	fs, err := s.fingerprints(ctx, []string{p.Fingerprint})
	if err != nil {
		return nil, err
	}
	if fs[0] == nil {
		return nil, fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
	}
	return fs[0], nil
}

// fingerprints reads quarantine records (nil for a missing one), with
// their held jobs counted from the fingerprint's jobs.
func (s *Store) fingerprints(ctx context.Context, fps []string) ([]*sluicetype.Fingerprint, error) {
	out := make([]*sluicetype.Fingerprint, len(fps))
	pipe := s.c.Pipeline()
	hs := make([]*goredis.MapStringStringCmd, len(fps))
	ms := make([]*goredis.StringSliceCmd, len(fps))
	cs := make([]*goredis.MapStringStringCmd, len(fps))
	for i, fp := range fps {
		hs[i] = pipe.HGetAll(ctx, s.Key("fpr", fp))
		ms[i] = pipe.SMembers(ctx, s.Key("fpj", fp))
		cs[i] = pipe.HGetAll(ctx, s.Key("fsc", fp))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redis: fingerprints: %w", err)
	}
	for i, fp := range fps {
		m := hs[i].Val()
		if len(m) == 0 {
			continue
		}
		h := hashReader{m: m}
		f := &sluicetype.Fingerprint{Fingerprint: fp, Kind: m[qKind], Status: sluicetype.FingerprintStatus(m[qStatus]),
			Since: h.time(qSince), Crashes: h.int(qCrashes), LastError: m[qLastError], LastJobID: m[qLastJob]}
		if h.err != nil {
			return nil, fmt.Errorf("redis: fingerprint %s: %w", fp, h.err)
		}
		sc, err := stepCrashes(cs[i].Val())
		if err != nil {
			return nil, fmt.Errorf("redis: fingerprint %s: %w", fp, err)
		}
		f.StepCrashes = sc
		ids := ms[i].Val()
		if len(ids) > 0 {
			p2 := s.c.Pipeline()
			sts := make([]*goredis.StringCmd, len(ids))
			for k, id := range ids {
				sts[k] = p2.HGet(ctx, s.Key("job", id), fState)
			}
			if _, err := p2.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
				return nil, fmt.Errorf("redis: fingerprint %s: %w", fp, err)
			}
			for _, c := range sts {
				if c.Val() == string(sluicetype.StateQuarantined) {
					f.Held++
				}
			}
		}
		out[i] = f
	}
	return out, nil
}

// FingerprintList lists quarantined and probationary fingerprints, newest
// first.
func (s *Store) FingerprintList(ctx context.Context, p *backend.FingerprintListParams) ([]*sluicetype.Fingerprint, error) {
	fps, err := s.c.SMembers(ctx, s.Key("fprs")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list fingerprints: %w", err)
	}
	fs, err := s.fingerprints(ctx, fps)
	if err != nil {
		return nil, err
	}
	var out []*sluicetype.Fingerprint
	for _, f := range fs {
		if f != nil && (f.Status == sluicetype.FingerprintQuarantined || f.Status == sluicetype.FingerprintProbation) {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Since.Equal(out[b].Since) {
			return out[a].Since.After(out[b].Since)
		}
		return out[a].Fingerprint < out[b].Fingerprint
	})
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

// luaRelease lifts a fingerprint's quarantine: the record goes on
// probation and its jobs in the spec's from-states get the spec's write
// (FingerprintRelease).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// fp; the spec (s_ prefix, as luaAction);
// ev_kind, ev_actor, ev_to, ev_msg.
//
// Returns how many jobs were released. Errors: "NOTFOUND".
var luaRelease = script(`
local A = args(4)
local S = spec(A, 's_')
local key = K('fpr', A.fp)
if redis.call('EXISTS', key) == 0 then return redis.error_reply('NOTFOUND') end
redis.call('HSET', key, QF.status, 'probation')
local n = 0
for _, from in ipairs(split(A.s_from)) do
  for _, id in ipairs(redis.call('SMEMBERS', K('fpj', A.fp))) do
    local J = load(id)
    if J and J[F.state] == from then
      local O = copy(J)
      apply(J, S, '')
      commit(O, J, true)
      event(id, A.ev_kind, A.ev_actor, from, A.ev_to, O[F.attempt], A.ev_msg)
      n = n + 1
    end
  end
end
idem_record('N' .. n)
return n
`)

// FingerprintRelease lifts a quarantine in one script.
func (s *Store) FingerprintRelease(ctx context.Context, p *backend.FingerprintReleaseParams) (int, error) {
	if p.Spec.Has(backend.EffectDelete) || len(p.Spec.From) == 0 {
		return 0, fmt.Errorf("release fingerprint %s: %w: the spec must move jobs", p.Fingerprint, sluicetype.ErrInvalid)
	}
	a := append([]any{"fp", p.Fingerprint, "ev_kind", string(p.Event.Kind), "ev_actor", p.Event.Actor,
		"ev_to", string(p.Event.To), "ev_msg", p.Event.Message}, specArgs(p.Spec)...)
	v, err := s.run(ctx, "release fingerprint "+p.Fingerprint, luaRelease, a...)
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "NOTFOUND" {
			return 0, fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
		}
		return 0, err
	}
	n, _ := v.(int64)
	if n > 0 {
		s.publishWake(ctx) // the fingerprint's queues: every queue
	}
	return int(n), nil
}

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

// JobCountByQueue reads the maintained counters.
func (s *Store) JobCountByQueue(ctx context.Context, p *backend.JobCountByQueueParams) (map[string]map[sluicetype.State]int64, error) {
	m, err := s.c.HGetAll(ctx, s.Key("counts")).Result()
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

// QueueList names every queue that has jobs or a paused record.
func (s *Store) QueueList(ctx context.Context) ([]sluicetype.QueueInfo, error) {
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		return nil, err
	}
	paused, err := s.c.HGetAll(ctx, s.Key("paused")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list queues: %w", err)
	}
	names := make([]string, 0, len(counts)+len(paused))
	for q := range counts {
		names = append(names, q)
	}
	for q := range paused {
		if _, ok := counts[q]; !ok {
			names = append(names, q)
		}
	}
	sort.Strings(names)
	out := make([]sluicetype.QueueInfo, len(names))
	for i, q := range names {
		c := counts[q]
		if c == nil {
			c = map[sluicetype.State]int64{}
		}
		out[i] = sluicetype.QueueInfo{Name: q, Paused: paused[q] == "1", Counts: c}
	}
	return out, nil
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
