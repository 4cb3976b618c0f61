package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Operator actions on one job: an action's spec, a payload edit, a retry
// with new input.

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
if J[F.unique_key] ~= '' and not S.del and uholds(S.to, J[F.unique_states]) and not uholds(J[F.state], J[F.unique_states]) then
  local hid = uholder(J[F.unique_key])
  if hid and hid ~= J[F.id] then return redis.error_reply('UHELD ' .. hid .. ' ' .. J[F.unique_key]) end
end
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
			case "UHELD":
				holder, key, _ := strings.Cut(r.arg, " ")
				return nil, &sluicetype.UniqueHeldError{Verb: string(spec.Action), ID: p.ID, Key: key, HolderID: holder}
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
// <state>", "QUAR <fingerprint>", "UHELD <holder> <key>", "CONFLICT".
var luaRetryWithInput = script(`
local A = args(4)
local J = load(A.id)
if not J then return redis.error_reply('NOTFOUND') end
if not set(split(A.allowed))[J[F.state]] then return redis.error_reply('STATE ' .. J[F.state]) end
if quarantined(A.fp) then return redis.error_reply('QUAR ' .. A.fp) end
if redis.call('EXISTS', K('job', A.newid)) == 1 then return redis.error_reply('CONFLICT') end
-- The copy carries the original's unique key: refused while a job (the
-- original among them) holds it, and holding it otherwise.
local uk, us = J[F.unique_key] or '', J[F.unique_states] or '0'
local takes = uk ~= '' and uholds(A.to, us)
if takes then
  local hid = uholder(uk)
  if hid then return redis.error_reply('UHELD ' .. hid .. ' ' .. uk) end
end
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
if uk ~= '' then C[F.unique_key] = uk; C[F.unique_states] = us end
create(C)
if takes then redis.call('SET', K('uq', uk), C[F.id]) end
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
			case "UHELD":
				holder, key, _ := strings.Cut(r.arg, " ")
				return nil, &sluicetype.UniqueHeldError{Verb: "retry with input", ID: p.ID, Key: key, HolderID: holder}
			case "CONFLICT":
				return nil, fmt.Errorf("retry job %s with input: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
			}
		}
		return nil, err
	}
	return jobReply(v, true)
}
