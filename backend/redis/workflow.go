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

// luaCheckpoint replaces running jobs' checkpoints under their leases
// (JobCheckpoint): refused once a lease has expired by the server's
// clock, so that no step is recorded after the reaper may have taken the
// job.
//
// ARGV[4...] 4 values per item: id, lease id, fence, checkpoint.
//
// Returns one integer per item: 1 written, 0 lease lost.
var luaCheckpoint = script(`
local res = {}
for i = 4, #ARGV, 4 do
  local key = K('job', ARGV[i])
  local h = redis.call('HMGET', key, 's', 'lid', 'f', 'lx', 'v')
  if h[1] == 'running' and h[2] == ARGV[i + 1] and h[3] == ARGV[i + 2] and h[4] >= NOW then
    redis.call('HSET', key, 'cp', ARGV[i + 3], 'v', istr(tonumber(h[5]) + 1))
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
    D = {id = A.dq_id, q = A.dq_q, k = A.dq_k, p = A.dq_p, sv = A.dq_sv, m = A.dq_m, tg = '[]', pr = A.dq_pr,
      s = st, a = '0', ma = A.dq_ma, c = '0', fp = A.dq_fp, f = '0', sch = sch, dl = A.dq_dl, to = A.dq_to,
      cr = NOW, ata = '', atb = '', sca = NOW, fin = '', rs = '', lid = '', lw = '', lx = '', v = '1', cp = '',
      dlo = J.id, ro = '', sb = '', le = '', ep = ''}
    create(D)
  elseif set({'completed', 'archived', 'quarantined', 'undecodable', 'cancelled'})[D.s] then
    local DO = copy(D)
    if DO.fp ~= A.dq_fp then
      if DO.fp ~= '' then redis.call('SREM', K('fpj', DO.fp), D.id) end
      if A.dq_fp ~= '' then redis.call('SADD', K('fpj', A.dq_fp), D.id) end
    end
    D.s = 'available'; D.p = A.dq_p; D.fp = A.dq_fp; D.sch = NOW; D.sca = NOW; D.fin = ''; D.rs = ''
    if tonumber(D.ma) <= tonumber(D.a) then D.ma = istr(tonumber(D.a) + 1) end
    D.dlo = J.id
    bump(D)
    commit(DO, D, true)
    event(D.id, A.dq_ev_kind, A.dq_ev_actor, DO.s, 'available', D.a, A.dq_ev_msg)
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
	args := make([]any, 0, 4*len(p.Items))
	for _, it := range p.Items {
		args = append(args, it.ID, it.LeaseID, strconv.FormatInt(it.Fence, 10), string(it.Checkpoint))
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

// luaFork inserts the replay of a terminal job from a step and records the
// fork on the original, which the replay supersedes (JobFork).
//
// ARGV[4...] name/value pairs: id, newid, version, allowed (states joined
// by US), cp (the copy's checkpoint), ocp (the original's); the events
// o_kind, o_actor, o_msg and c_kind, c_actor, c_to, c_msg.
//
// Returns the copy. Errors: "NOTFOUND", "STATE <state>", "VERSION <v>",
// "QUAR <fp>", "CONFLICT".
var luaFork = script(`
local A = args(4)
local J = load(A.id)
if not J then return redis.error_reply('NOTFOUND') end
if not set(split(A.allowed))[J.s] then return redis.error_reply('STATE ' .. J.s) end
if J.v ~= A.version then return redis.error_reply('VERSION ' .. J.v) end
if quarantined(J.fp) then return redis.error_reply('QUAR ' .. J.fp) end
if redis.call('EXISTS', K('job', A.newid)) == 1 then return redis.error_reply('CONFLICT') end
local C = {id = A.newid, q = J.q, k = J.k, p = J.p, sv = J.sv, m = J.m, tg = J.tg, pr = J.pr, s = 'available',
  a = '0', ma = J.ma, c = '0', fp = J.fp, f = '0', sch = NOW, dl = '', to = J.to, cr = NOW, ata = '', atb = '',
  sca = NOW, fin = '', rs = '', lid = '', lw = '', lx = '', v = '1', cp = A.cp, dlo = '', ro = '', sb = '',
  le = '', ep = ''}
create(C)
J.sb = A.newid
bump(J)
redis.call('HSET', K('job', J.id), 'cp', A.ocp, 'sb', J.sb, 'v', J.v)
redis.call('SADD', K('sup'), J.id)
event(J.id, A.o_kind, A.o_actor, J.s, J.s, J.a, A.o_msg)
event(C.id, A.c_kind, A.c_actor, '', A.c_to, '0', A.c_msg)
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
			case "CONFLICT":
				return nil, fmt.Errorf("replay job %s: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
			}
		}
		return nil, err
	}
	return jobReply(v, true)
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
  if A.rt == nil or A.rt == '' or string.sub(J.id, 1, 4) == 'dlq:' then return false end
  if A.rt == 'all' then return not rkinds[J.k] end
  return rkinds[J.k] == true
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
// ARGV[4...] name/value pairs: id, v (version); the plan's pd_to,
// pd_reason, pd_le, pd_ep, ev_kind, ev_actor, ev_from, ev_to, ev_msg; the
// dq_* route.
//
// Returns {job} as written, or {} when the job moved on.
var luaDeadlineDeath = script(`
local A = args(4)
local J = load(A.id)
if not J or J.s ~= 'available' or J.v ~= A.v or J.dl == '' or J.dl >= NOW then return {} end
local O = copy(J)
J.s = A.pd_to; J.rs = A.pd_reason; J.fin = NOW; J.sca = NOW; J.le = A.pd_le; J.ep = A.pd_ep
bump(J)
commit(O, J, true)
event(J.id, A.ev_kind, A.ev_actor, A.ev_from, A.ev_to, J.a, A.ev_msg)
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
		a := []any{"id", j.ID, "v", strconv.FormatInt(j.Version, 10),
			"pd_to", string(pd.To), "pd_reason", string(pd.Reason), "pd_le", pd.LastError, "pd_ep", pd.Pattern,
			"ev_kind", string(pd.Event.Kind), "ev_actor", pd.Event.Actor, "ev_from", string(pd.Event.From),
			"ev_to", string(pd.Event.To), "ev_msg", pd.Event.Message}
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
func stepCrashes(m map[string]string) map[string]int {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int, len(m))
	for step, n := range m {
		out[step] = atoi(n)
	}
	return out
}
