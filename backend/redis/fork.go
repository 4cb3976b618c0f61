package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// luaFork inserts the replay of a terminal job from a step and records the
// fork on the original, which the replay supersedes (JobFork).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, newid, version, allowed (states joined
// by US), cp (the copy's checkpoint), ocp (the original's); the events
// o_kind, o_actor, o_msg and c_kind, c_actor, c_to, c_msg.
//
// Returns the copy. Errors: "NOTFOUND", "STATE <state>", "VERSION <v>",
// "QUAR <fp>", "UHELD <holder> <key>", "CONFLICT".
var luaFork = script(`
local A = args(4)
local J = load(A.id)
if not J then return redis.error_reply('NOTFOUND') end
if not set(split(A.allowed))[J[F.state]] then return redis.error_reply('STATE ' .. J[F.state]) end
if J[F.version] ~= A.version then return redis.error_reply('VERSION ' .. J[F.version]) end
if quarantined(J[F.fingerprint]) then return redis.error_reply('QUAR ' .. J[F.fingerprint]) end
if redis.call('EXISTS', K('job', A.newid)) == 1 then return redis.error_reply('CONFLICT') end
-- The copy carries the original's unique key: refused while a job (the
-- original among them) holds it, and holding it otherwise.
local uk, us = J[F.unique_key] or '', J[F.unique_states] or '0'
local takes = uk ~= '' and uholds('available', us)
if takes then
  local hid = uholder(uk)
  if hid then return redis.error_reply('UHELD ' .. hid .. ' ' .. uk) end
end
local C = {[F.id] = A.newid, [F.queue] = J[F.queue], [F.kind] = J[F.kind], [F.payload] = J[F.payload],
  [F.schema_version] = J[F.schema_version], [F.metadata] = J[F.metadata], [F.tags] = J[F.tags],
  [F.priority] = J[F.priority], [F.state] = 'available',
  [F.attempt] = '0', [F.max_attempts] = J[F.max_attempts], [F.crash_attempt] = '0',
    [F.fingerprint] = J[F.fingerprint], [F.fence] = '0', [F.scheduled_at] = NOW, [F.deadline] = '',
    [F.timeout] = J[F.timeout], [F.created_at] = NOW, [F.attempted_at] = '', [F.attempted_by] = '',
  [F.state_changed_at] = NOW, [F.finalized_at] = '', [F.reason] = '', [F.lease_id] = '', [F.lease_worker] = '',
    [F.lease_expires] = '', [F.version] = '1', [F.checkpoint] = A.cp, [F.dead_letter_of] = '', [F.retry_of] = '',
    [F.superseded_by] = '',
  [F.last_error] = '', [F.pattern] = ''}
if uk ~= '' then C[F.unique_key] = uk; C[F.unique_states] = us end
create(C)
if takes then redis.call('SET', K('uq', uk), C[F.id]) end
J[F.superseded_by] = A.newid
bump(J)
redis.call('HSET', K('job', J[F.id]), F.checkpoint, A.ocp, F.superseded_by, J[F.superseded_by], F.version,
  J[F.version])
redis.call('SADD', K('sup'), J[F.id])
event(J[F.id], A.o_kind, A.o_actor, J[F.state], J[F.state], J[F.attempt], A.o_msg)
event(C[F.id], A.c_kind, A.c_actor, '', A.c_to, '0', A.c_msg)
idem_record(rec(C, true))
return out(C, true)
`)

// JobFork inserts the replay of a terminal job from a step and records the
// fork on the original, which the replay supersedes, in one script.
func (s *Store) JobFork(ctx context.Context, p *backend.JobForkParams) (*sluicetype.Job, error) {
	v, err := s.run(ctx, "replay job "+p.ID, luaFork,
		"id", p.ID, "newid", p.NewID, "version", strconv.FormatInt(p.Version, 10),
		"allowed", joinStates(sluicetype.TerminalStates()), "cp", string(p.Checkpoint), "ocp", string(p.OriginalCheckpoint),
		"o_kind", string(p.OriginalEvent.Kind), "o_actor", p.OriginalEvent.Actor, "o_msg", p.OriginalEvent.Message,
		"c_kind", string(p.CopyEvent.Kind), "c_actor", p.CopyEvent.Actor, "c_to", string(p.CopyEvent.To),
		"c_msg", p.CopyEvent.Message)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, &sluicetype.StateError{Action: "replay from step", ID: p.ID, State: sluicetype.State(r.arg), Allowed: sluicetype.TerminalStates()}
			case "VERSION":
				return nil, fmt.Errorf("replay job %s: %w: it changed since it was read (version %d, now %s)", p.ID, sluicetype.ErrConflict, p.Version, r.arg)
			case "QUAR":
				return nil, &sluicetype.QuarantinedError{Verb: "replay", ID: p.ID, Fingerprint: r.arg}
			case "UHELD":
				holder, key, _ := strings.Cut(r.arg, " ")
				return nil, &sluicetype.UniqueHeldError{Verb: "replay", ID: p.ID, Key: key, HolderID: holder}
			case "CONFLICT":
				return nil, fmt.Errorf("replay job %s: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
			}
		}
		return nil, err
	}
	return jobReply(v, true)
}
