package redis

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Waits: the signals buffered for waiting workflows and the fenced wake
// of a waiting job (backend.WaitStore).
//
// A job's signals are the hash {ns}:sig:ID, one field per signal: its
// sequence number (19 digits, so fields sort as numbers) mapped to name,
// sent-at and payload joined by US. {ns}:sigseq numbers them. The hash
// goes with its job (remove, lua.go).

// luaWakeFn defines wake(A), the fenced wake both luaWake and
// luaSignalSend run: A holds id, from, fence, to and the event ev_kind
// ("" for none), ev_actor, ev_from, ev_to, ev_attempt, ev_msg. It returns
// 1 when it moved the job, 0 when the job has moved on.
const luaWakeFn = `
local function wake(A)
  local J = load(A.id)
  if not J or J[F.state] ~= A.from or J[F.fence] ~= A.fence then return 0 end
  local O = copy(J)
  J[F.state] = A.to; J[F.scheduled_at] = NOW; J[F.state_changed_at] = NOW
  bump(J)
  commit(O, J, true)
  if A.ev_kind ~= '' then event(J[F.id], A.ev_kind, A.ev_actor, A.ev_from, A.ev_to, A.ev_attempt, A.ev_msg) end
  return 1
end
`

// luaSignalSend buffers one signal (SignalSend), and with a wake applies
// it in the same script.
//
// The script touches {ns}:job:ID, {ns}:sig:ID and {ns}:sigseq, and with
// a wake what luaWake touches.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.id -> the job
// A.name -> the signal's name
// A.payload -> its payload
// A.states -> the states that take signals (backend.SignalStates, US-joined)
// A.w_* -> the wake's pairs as luaWake's, each name prefixed w_ (none: no
// wake)
//
// Returns {seq, sent-at, woke (0 or 1)}. Errors: "NOTFOUND", "STATE
// <state>" (a state that takes none).
var luaSignalSend = script(luaWakeFn + `
local A = args(4)
local id, name, payload = A.id, A.name, A.payload
local s = redis.call('HGET', K('job', id), F.state)
if not s then return redis.error_reply('NOTFOUND') end
if not set(split(A.states))[s] then return redis.error_reply('STATE ' .. s) end
local seq = redis.call('INCR', K('sigseq'))
redis.call('HSET', K('sig', id), string.format('%019d', seq), table.concat({name, NOW, payload}, US))
local woke = 0
if A.w_id then
  local W = {}
  for k, v in pairs(A) do
    if string.sub(k, 1, 2) == 'w_' then W[string.sub(k, 3)] = v end
  end
  woke = wake(W)
end
return {istr(seq), NOW, istr(woke)}
`)

// luaSignalConsume takes one signal and writes the job's checkpoint under
// its lease (SignalConsume).
//
// The script touches {ns}:job:ID and {ns}:sig:ID.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.id -> the job
// A.lease -> its lease id
// A.fence -> its fence
// A.seq -> the signal (19 digits)
// A.name -> the signal's name
// A.checkpoint -> the job's new checkpoint
//
// Returns 1. Errors: "LEASE" (not running under that lease, or expired),
// "NOTFOUND" (no such signal).
var luaSignalConsume = script(`
local A = args(4)
local id = A.id
local key = K('job', id)
local h = redis.call('HMGET', key, F.state, F.lease_id, F.fence, F.lease_expires, F.version)
if h[1] ~= 'running' or h[2] ~= A.lease or h[3] ~= A.fence or not h[4] or h[4] < NOW then
  return redis.error_reply('LEASE')
end
local v = redis.call('HGET', K('sig', id), A.seq)
if not v or string.sub(v, 1, #A.name + 1) ~= A.name .. US then return redis.error_reply('NOTFOUND') end
redis.call('HDEL', K('sig', id), A.seq)
redis.call('HSET', key, F.checkpoint, A.checkpoint, F.version, istr(tonumber(h[5]) + 1))
return 1
`)

// luaWake moves a job still in a state at a fence to another, scheduled
// now (JobWake).
//
// The script touches the job, its indexes, its timeline and the counters.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A (wakeArgs): id, from, fence,
// to; the event ev_kind ("" for none), ev_actor, ev_from, ev_to,
// ev_attempt, ev_msg.
//
// Returns 1 when it moved the job, 0 when not.
var luaWake = script(luaWakeFn + `
return wake(args(4))
`)

// wakeArgs are a wake's name/value pairs for luaWake and luaSignalSend.
func wakeArgs(p *backend.JobWakeParams) []any {
	w := p.Event
	return []any{"id", p.ID, "from", string(p.From),
		"fence", strconv.FormatInt(p.Fence, 10), "to", string(p.To),
		"ev_kind", string(w.Kind), "ev_actor", w.Actor, "ev_from", string(w.From), "ev_to", string(w.To),
		"ev_attempt", strconv.Itoa(w.Attempt), "ev_msg", w.Message}
}

// signalStates is backend.SignalStates in luaSignalSend's form.
func signalStates() string {
	ss := backend.SignalStates()
	names := make([]string, len(ss))
	for i, st := range ss {
		names[i] = string(st)
	}
	return strings.Join(names, us)
}

// SignalSend buffers one signal for a job.
func (s *Store) SignalSend(ctx context.Context, p *backend.SignalSendParams) (*sluicetype.Signal, error) {
	args := []any{"id", p.JobID, "name", p.Name, "payload", string(p.Payload), "states", signalStates()}
	if p.Wake != nil {
		w := wakeArgs(p.Wake)
		for i := 0; i+1 < len(w); i += 2 {
			args = append(args, "w_"+w[i].(string), w[i+1])
		}
	}
	v, err := s.run(ctx, "signal job "+p.JobID, luaSignalSend, args...)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("job %s: %w", p.JobID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, &sluicetype.StateError{Action: "signal", ID: p.JobID, State: sluicetype.State(r.arg), Allowed: backend.SignalStates()}
			}
		}
		return nil, err
	}
	r := strs(v)
	if len(r) != 3 {
		return nil, fmt.Errorf("redis: signal job %s: unexpected reply %v", p.JobID, v)
	}
	seq, err := atoi64(r[0])
	if err != nil {
		return nil, fmt.Errorf("redis: signal job %s: seq: %w", p.JobID, err)
	}
	at, err := ttime(r[1])
	if err != nil {
		return nil, fmt.Errorf("redis: signal job %s: sent at: %w", p.JobID, err)
	}
	return &sluicetype.Signal{JobID: p.JobID, Name: p.Name, Seq: seq, Payload: p.Payload, SentAt: at, Woke: r[2] == "1"}, nil
}

// SignalList returns a job's buffered signals, oldest first.
func (s *Store) SignalList(ctx context.Context, p *backend.SignalListParams) ([]*sluicetype.Signal, error) {
	m, err := s.c.HGetAll(ctx, s.key("sig", p.JobID)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list signals of job %s: %w", p.JobID, err)
	}
	out := make([]*sluicetype.Signal, 0, len(m))
	for field, v := range m {
		parts := strings.SplitN(v, "\x1f", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("redis: list signals of job %s: malformed signal %s", p.JobID, field)
		}
		if p.Name != "" && parts[0] != p.Name {
			continue
		}
		seq, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis: list signals of job %s: signal %q: %w", p.JobID, field, err)
		}
		at, err := ttime(parts[1])
		if err != nil {
			return nil, fmt.Errorf("redis: list signals of job %s: signal %q: sent at: %w", p.JobID, field, err)
		}
		out = append(out, &sluicetype.Signal{JobID: p.JobID, Name: parts[0], Seq: seq, SentAt: at, Payload: []byte(parts[2])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// SignalConsume takes one signal and writes the checkpoint under the
// lease, in one script.
func (s *Store) SignalConsume(ctx context.Context, p *backend.SignalConsumeParams) error {
	_, err := s.run(ctx, "take signal of job "+p.ID, luaSignalConsume, "id", p.ID, "lease", p.LeaseID,
		"fence", strconv.FormatInt(p.Fence, 10), "seq", fmt.Sprintf("%019d", p.Seq), "name", p.Name,
		"checkpoint", string(p.Checkpoint))
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "LEASE":
				return fmt.Errorf("take signal of job %s: %w", p.ID, sluicetype.ErrLeaseLost)
			case "NOTFOUND":
				return fmt.Errorf("signal %q #%d of job %s: %w", p.Name, p.Seq, p.ID, sluicetype.ErrNotFound)
			}
		}
		return err
	}
	return nil
}

// JobWake moves a job still in From at Fence to To, scheduled now.
func (s *Store) JobWake(ctx context.Context, p *backend.JobWakeParams) (bool, error) {
	v, err := s.run(ctx, "wake job "+p.ID, luaWake, wakeArgs(p)...)
	if err != nil {
		return false, err
	}
	n, _ := v.(int64)
	return n == 1, nil
}
