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

// Workflows: step checkpoints under the lease, the dead-letter route
// written by the death's own script, and the replay of a job from a step.

// The records of luaCheckpoint's arguments, one per item (batchLayout).
const (
	ckpID         = iota
	ckpLease      // lease id
	ckpFence      //
	ckpCheckpoint //
	ckpRecLen
)

// checkpointLayout names luaCheckpoint's arguments for the script.
func checkpointLayout() batchLayout {
	var r [ckpRecLen]string
	r[ckpID], r[ckpLease], r[ckpFence], r[ckpCheckpoint] = "id", "lease", "fence", "checkpoint"
	return batchLayout{rec: r[:]}
}

// luaCheckpoint replaces running jobs' checkpoints under their leases
// (JobCheckpoint): refused once a lease has expired by the server's
// clock, so that no step is recorded after the reaper may have taken the
// job.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[R1...] -> one record of RN values per item, at the offsets R names
// (checkpointLayout: id, lease, fence, checkpoint)
//
// Returns one integer per item: 1 written, 0 lease lost.
var luaCheckpoint = batchScript(checkpointLayout(), `
local res = {}
for i = R1, #ARGV, RN do
  local key = K('job', ARGV[i + R.id])
  local h = redis.call('HMGET', key, F.state, F.lease_id, F.fence, F.lease_expires, F.version)
  if h[1] == 'running' and h[2] == ARGV[i + R.lease] and h[3] == ARGV[i + R.fence] and h[4] >= NOW then
    redis.call('HSET', key, F.checkpoint, ARGV[i + R.checkpoint], F.version, istr(tonumber(h[5]) + 1))
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
return res
`)

// luaFinishWorkflow is the part of luaFinish (lua.go) that writes a
// finish plan's dead-letter route, after the death itself: the
// dead-letter job is created, or, when it exists in a terminal state,
// retried with the new death (payload and fingerprint replaced). The
// checkpoint (A.cp) is set on J before the death's commit, in luaFinish.
//
// It also counts a crash inside a workflow step against its (fingerprint,
// step): the hash fsc:FP, step -> crashes (fsc_fp, fsc_step).
//
// Its arguments (in luaFinish's pairs): dq "1"; dq_id, dq_q, dq_k, dq_p,
// dq_sv, dq_m, dq_pr, dq_ma, dq_fp, dq_delay ("s:ns"), dq_dl, dq_to; the
// retry event dq_ev_kind, dq_ev_actor, dq_ev_msg.
const luaFinishWorkflow = `
if A.fsc_fp then redis.call('HINCRBY', K('fsc', A.fsc_fp), A.fsc_step, 1) end
if A.dq == '1' then
  local D = load(A.dq_id)
  if not D then
    local sch = tadd(A.dq_delay)
    local st = 'available'
    if sch > NOW then st = 'scheduled' end
    D = {[F.id] = A.dq_id, [F.queue] = A.dq_q, [F.kind] = A.dq_k, [F.payload] = A.dq_p, [F.schema_version] = A.dq_sv,
      [F.metadata] = A.dq_m, [F.tags] = '[]', [F.priority] = A.dq_pr,
      [F.state] = st, [F.attempt] = '0', [F.max_attempts] = A.dq_ma, [F.crash_attempt] = '0',
        [F.fingerprint] = A.dq_fp, [F.fence] = '0', [F.scheduled_at] = sch, [F.deadline] = A.dq_dl,
        [F.timeout] = A.dq_to,
      [F.created_at] = NOW, [F.attempted_at] = '', [F.attempted_by] = '', [F.state_changed_at] = NOW,
        [F.finalized_at] = '', [F.reason] = '', [F.lease_id] = '', [F.lease_worker] = '', [F.lease_expires] = '',
        [F.version] = '1', [F.checkpoint] = '',
      [F.dead_letter_of] = J[F.id], [F.retry_of] = '', [F.superseded_by] = '', [F.last_error] = '', [F.pattern] = ''}
    create(D)
  elseif set({'completed', 'archived', 'quarantined', 'undecodable', 'cancelled'})[D[F.state]] then
    local DO = copy(D)
    if DO[F.fingerprint] ~= A.dq_fp then
      if DO[F.fingerprint] ~= '' then redis.call('SREM', K('fpj', DO[F.fingerprint]), D[F.id]) end
      if A.dq_fp ~= '' then redis.call('SADD', K('fpj', A.dq_fp), D[F.id]) end
    end
    D[F.state] = 'available'; D[F.payload] = A.dq_p; D[F.fingerprint] = A.dq_fp; D[F.scheduled_at] = NOW;
      D[F.state_changed_at] = NOW; D[F.finalized_at] = ''; D[F.reason] = ''
    if tonumber(D[F.max_attempts]) <= tonumber(D[F.attempt]) then D[F.max_attempts] = istr(tonumber(D[F.attempt]) + 1) end
    D[F.dead_letter_of] = J[F.id]
    bump(D)
    commit(DO, D, true)
    event(D[F.id], A.dq_ev_kind, A.dq_ev_actor, DO[F.state], 'available', D[F.attempt], A.dq_ev_msg)
  end
end
`

// finishWorkflowArgs are luaFinish's arguments for a plan's checkpoint
// and dead-letter route.
func finishWorkflowArgs(p *backend.JobFinishParams) []any {
	var a []any
	if c := p.Checkpoint; c != nil {
		a = append(a, "cp", "1", "cp_v", string(c.Checkpoint))
	}
	if f := p.Fingerprint; f != nil && f.Fingerprint != "" && f.StepCrash != "" {
		a = append(a, "fsc_fp", f.Fingerprint, "fsc_step", f.StepCrash)
	}
	if d := p.DeadLetter; d != nil && d.Job != nil {
		jp := d.Job
		a = append(a, "dq", "1", "dq_id", jp.ID, "dq_q", jp.Queue, "dq_k", jp.Kind, "dq_p", string(jp.Payload),
			"dq_sv", strconv.Itoa(jp.SchemaVersion), "dq_m", string(jp.Metadata), "dq_pr", strconv.Itoa(jp.Priority),
			"dq_ma", strconv.Itoa(jp.MaxAttempts), "dq_fp", jp.Fingerprint, "dq_delay", dstr(jp.Delay),
			"dq_dl", tptr(jp.Deadline), "dq_to", strconv.FormatInt(int64(jp.Timeout), 10),
			"dq_ev_kind", string(d.RetryEvent.Kind), "dq_ev_actor", d.RetryEvent.Actor, "dq_ev_msg", d.RetryEvent.Message)
	}
	return a
}

// JobCheckpoint replaces running jobs' checkpoints under their leases, in
// one script; each item is fenced on its own.
func (s *Store) JobCheckpoint(ctx context.Context, p *backend.JobCheckpointParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	args := make([]any, 0, ckpRecLen*len(p.Items))
	for _, it := range p.Items {
		var r [ckpRecLen]string
		r[ckpID], r[ckpLease], r[ckpFence], r[ckpCheckpoint] = it.ID, it.LeaseID, strconv.FormatInt(it.Fence, 10), string(it.Checkpoint)
		args = appendArgs(args, r[:]...)
	}
	v, err := s.run(ctx, "checkpoint jobs", luaCheckpoint, args...)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	for i, it := range p.Items {
		if i >= len(r) || r[i].(int64) != 1 {
			out[i] = fmt.Errorf("checkpoint job %s: %w", it.ID, sluicetype.ErrLeaseLost)
		}
	}
	return out, nil
}

// Deadline deaths at claim with a dead-letter route. The route is built
// in Go (backend.DeadLetterFor: the payload and its fingerprint), so
// luaClaim leaves such a death for luaDeadlineDeath, which archives the
// job and writes its route in one script; until it runs the job stays
// available past its deadline, which no claim takes.

// luaClaimRoutes is the part of luaClaim that says whether a job past its
// deadline has a route: A.rt "" none, "all" every kind but those in A.rk
// (joined by US), "some" only those; a dead-letter job never has one.
const luaClaimRoutes = `
local due = {}
local rkinds = set(split(A.rk or ''))
local function routed(J)
  if A.rt == nil or A.rt == '' or string.sub(J[F.id], 1, 4) == 'dlq:' then return false end
  if A.rt == 'all' then return not rkinds[J[F.kind]] end
  return rkinds[J[F.kind]] == true
end
`

// claimRoutes are luaClaim's rt and rk arguments for the plan's routes.
func claimRoutes(pd *backend.ClaimDeadlineWrite) (mode, kinds string) {
	r := pd.DeadLetter
	if r == nil || pd.To == "" {
		return "", ""
	}
	var ks []string
	mode = "some"
	if r.Default != nil {
		mode = "all"
	}
	for k, route := range r.ByKind {
		if (route == nil) == (mode == "all") {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return mode, strings.Join(ks, us)
}

// luaDeadlineDeath archives one job past its deadline as the claim's plan
// says, with its dead-letter route (luaFinishWorkflow's arguments), when
// it is still available past its deadline at the version the claim read.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, v (version); the plan's pd_to,
// pd_reason, pd_le, pd_ep, ev_kind, ev_actor, ev_from, ev_to, ev_msg; the
// dq_* route.
//
// Returns {job} as written, or {} when the job moved on.
var luaDeadlineDeath = script(`
local A = args(4)
local J = load(A.id)
if not J or J[F.state] ~= 'available' or J[F.version] ~= A.v or J[F.deadline] == '' or J[F.deadline] >= NOW then return {} end
local O = copy(J)
J[F.state] = A.pd_to; J[F.reason] = A.pd_reason; J[F.finalized_at] = NOW; J[F.state_changed_at] = NOW;
  J[F.last_error] = A.pd_le; J[F.pattern] = A.pd_ep
bump(J)
commit(O, J, true)
event(J[F.id], A.ev_kind, A.ev_actor, A.ev_from, A.ev_to, J[F.attempt], A.ev_msg)
` + luaFinishWorkflow + `
return {out(J, true)}
`)

// claimDeadLetters writes the deaths luaClaim left with a route (due, its
// reply's fourth value), each with its route in one script, and adds them
// to res.Dead. A death whose route cannot be built (DeadLetterFor refuses
// it) is archived unrouted rather than left for every claim to meet.
func (s *Store) claimDeadLetters(ctx context.Context, pd *backend.ClaimDeadlineWrite, due any, res *backend.JobClaimResult) error {
	list, _ := due.([]any)
	for _, x := range list {
		j, err := jobReply(x, true)
		if err != nil {
			return err
		}
		d, err := backend.DeadLetterFor(pd.DeadLetter.For(j.Kind), j, pd.LastError, pd.Reason)
		if err != nil {
			d = nil
		}
		a := append([]any{"id", j.ID, "v", strconv.FormatInt(j.Version, 10)}, pastDeadlineArgs(pd)...)
		a = append(a, finishWorkflowArgs(&backend.JobFinishParams{DeadLetter: d})...)
		v, err := s.run(ctx, "deadline death "+j.ID, luaDeadlineDeath, a...)
		if err != nil {
			return err
		}
		if r, _ := v.([]any); len(r) == 1 {
			dj, err := jobReply(r[0], true)
			if err != nil {
				return err
			}
			res.Dead = append(res.Dead, dj)
		}
	}
	return nil
}

// stepCrashes turns the hash fsc:FP into a record's StepCrashes (nil when
// empty).
func stepCrashes(m map[string]string) (map[string]int, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]int, len(m))
	for step, n := range m {
		c, err := atoi(n)
		if err != nil {
			return nil, fmt.Errorf("crashes of step %s: %w", step, err)
		}
		out[step] = c
	}
	return out, nil
}
