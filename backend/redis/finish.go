package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// luaFinish applies one fenced transition out of running as the engine
// resolved it (JobFinish).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, lease, fence; the guards ifexp and
// ifgone ("1") and ifbefore (a time or ""); the write to (a state or
// "deleted"), reason, charge ("attempt", "crash" or ""), sched ("keep",
// "now", "after") with delay ("s:ns"), fin ("1"); the error entry
// err ("1") with err_entry (JSON without its time), err_keep, err_le,
// err_ep; the event ev ("1") with ev_kind, ev_actor, ev_from, ev_to,
// ev_att, ev_msg; counts (records queue US from US to US n, joined by RS);
// and the fingerprint write fp ("1") with fp_fp, fp_kind, fp_add, fp_quar
// ("1"), fp_le, fp_lj, and its hold h ("1") with h_from (states joined by
// US), h_to, h_reason, h_kind, h_actor, h_msg.
//
// Returns the job as written ({fields, errors}), or {} when deleted.
// Errors: "LEASE" (no such job, another lease, or a guard failed:
// "LEASE bound", "LEASE renewed", "LEASE alive").
var luaFinish = script(`
local A = args(4)
local J = load(A.id)
if not J or J[F.state] ~= 'running' or J[F.lease_id] ~= A.lease or J[F.fence] ~= A.fence then return redis.error_reply('LEASE') end
if A.ifbefore ~= '' and NOW > A.ifbefore then return redis.error_reply('LEASE bound') end
if A.ifexp == '1' and J[F.lease_expires] >= NOW then return redis.error_reply('LEASE renewed') end
if A.ifgone == '1' then
  local x = redis.call('HGET', K('w', J[F.lease_worker]), WF.expires)
  if x and x >= NOW then return redis.error_reply('LEASE alive ' .. J[F.lease_worker]) end
end
for _, r in ipairs(split(A.counts, RS)) do
  local f = split(r)
  count(f[1], f[2], -tonumber(f[4]))
  count(f[1], f[3], tonumber(f[4]))
end
if A.to == 'deleted' then
  remove(J, false)
  return {}
end
local O = copy(J)
J[F.state] = A.to
J[F.reason] = A.reason
if A.charge == 'attempt' then J[F.attempt] = istr(tonumber(J[F.attempt]) + 1)
elseif A.charge == 'crash' then J[F.crash_attempt] = istr(tonumber(J[F.crash_attempt]) + 1) end
if A.sched == 'now' then J[F.scheduled_at] = NOW elseif A.sched == 'after' then J[F.scheduled_at] = tadd(A.delay) end
if A.fin == '1' then J[F.finalized_at] = NOW else J[F.finalized_at] = '' end
if A.err == '1' then
  local key = K('err', J[F.id])
  redis.call('RPUSH', key, NOW .. A.err_entry)
  local keep = tonumber(A.err_keep)
  local n = redis.call('LLEN', key)
  if keep > 0 then
    while n > keep do
      redis.call('LSET', key, 1, '\0')
      redis.call('LREM', key, 1, '\0')
      n = n - 1
    end
  end
  J[F.last_error] = A.err_le; J[F.pattern] = A.err_ep; J[F.errors_kept] = istr(n)
end
if A.cp == '1' then J[F.checkpoint] = A.cp_v end
J[F.lease_id] = ''; J[F.lease_worker] = ''; J[F.lease_expires] = ''
J[F.state_changed_at] = NOW
bump(J)
commit(O, J, false)
if A.ev == '1' then event(J[F.id], A.ev_kind, A.ev_actor, A.ev_from, A.ev_to, A.ev_att, A.ev_msg) end
if A.fp == '1' then
  local fp = A.fp_fp
  local key = K('fpr', fp)
  local st = redis.call('HGET', key, QF.status)
  if A.fp_quar == '1' then
    if st then
      local since = redis.call('HGET', key, QF.since)
      if st ~= 'quarantined' then since = NOW end
      redis.call('HSET', key, QF.kind, A.fp_kind, QF.status, 'quarantined', QF.since, since, QF.last_error, A.fp_le,
        QF.last_job, A.fp_lj)
      redis.call('HINCRBY', key, QF.crashes, tonumber(A.fp_add))
    else
      local sum = 0
      for _, id in ipairs(redis.call('SMEMBERS', K('fpj', fp))) do
        sum = sum + tonumber(redis.call('HGET', K('job', id), F.crash_attempt) or '0')
      end
      redis.call('HSET', key, QF.fingerprint, fp, QF.kind, A.fp_kind, QF.status, 'quarantined', QF.since, NOW,
        QF.crashes, istr(sum),
        QF.last_error, A.fp_le, QF.last_job, A.fp_lj)
      redis.call('SADD', K('fprs'), fp)
    end
  elseif st and tonumber(A.fp_add) ~= 0 then
    redis.call('HINCRBY', key, QF.crashes, tonumber(A.fp_add))
    redis.call('HSET', key, QF.last_error, A.fp_le, QF.last_job, A.fp_lj)
  end
  if A.h == '1' then
    local from = set(split(A.h_from))
    for _, id in ipairs(redis.call('SMEMBERS', K('fpj', fp))) do
      local H = load(id)
      if H and from[H[F.state]] then
        local HO = copy(H)
        H[F.state] = A.h_to; H[F.reason] = A.h_reason; H[F.finalized_at] = NOW; H[F.state_changed_at] = NOW
        bump(H)
        commit(HO, H, true)
        event(id, A.h_kind, A.h_actor, HO[F.state], A.h_to, H[F.attempt], A.h_msg)
      end
    end
  end
end
` + luaFinishWorkflow + `
return out(J, true)
`)

// JobFinish applies one fenced transition out of running, as the engine
// resolved it, in one script.
func (s *Store) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*sluicetype.Job, error) {
	if p.To == sluicetype.StateRunning || (p.To != sluicetype.StateDeleted && !p.To.Valid()) {
		return nil, fmt.Errorf("finish job %s: %w: cannot go to %q", p.ID, sluicetype.ErrInvalidTransition, p.To)
	}
	ifBefore := ""
	if !p.IfBefore.IsZero() {
		ifBefore = tstr(p.IfBefore)
	}
	charge := ""
	switch p.Charge {
	case backend.ChargeAttempt:
		charge = "attempt"
	case backend.ChargeCrash:
		charge = "crash"
	}
	sched := "keep"
	switch p.Schedule {
	case backend.ScheduleNow:
		sched = "now"
	case backend.ScheduleAfter:
		sched = "after"
	}
	a := []any{"id", p.ID, "lease", p.LeaseID, "fence", strconv.FormatInt(p.Fence, 10),
		"ifexp", flag(p.IfLeaseExpired), "ifgone", flag(p.IfWorkerGone), "ifbefore", ifBefore,
		"to", string(p.To), "reason", string(p.Reason), "charge", charge, "sched", sched, "delay", dstr(p.Delay),
		"fin", flag(p.Finalize)}
	if e := p.Error; e != nil {
		entry, err := errorEntry(e.Entry)
		if err != nil {
			return nil, fmt.Errorf("redis: finish job %s: error entry: %w", p.ID, err)
		}
		a = append(a, "err", "1", "err_entry", entry, "err_keep", strconv.Itoa(e.Keep), "err_le", e.LastError, "err_ep", e.Pattern)
	}
	if w := p.Event; w != nil {
		a = append(a, "ev", "1", "ev_kind", string(w.Kind), "ev_actor", w.Actor, "ev_from", string(w.From),
			"ev_to", string(w.To), "ev_att", strconv.Itoa(w.Attempt), "ev_msg", w.Message)
	}
	a = append(a, "counts", countsArg(p.Counts))
	if f := p.Fingerprint; f != nil && f.Fingerprint != "" {
		a = append(a, "fp", "1", "fp_fp", f.Fingerprint, "fp_kind", f.Kind, "fp_add", strconv.Itoa(f.AddCrashes),
			"fp_quar", flag(f.Quarantine), "fp_le", f.LastError, "fp_lj", f.LastJobID)
		if h := f.Hold; h != nil {
			a = append(a, "h", "1", "h_from", joinStates(h.From), "h_to", string(h.To), "h_reason", string(h.Reason),
				"h_kind", string(h.Event.Kind), "h_actor", h.Event.Actor, "h_msg", h.Event.Message)
		}
	}
	a = append(a, finishWorkflowArgs(p)...)
	v, err := s.run(ctx, "finish job "+p.ID, luaFinish, a...)
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "LEASE" {
			switch {
			case r.arg == "bound":
				return nil, fmt.Errorf("finish job %s: the write came after its bound %s: %w", p.ID, p.IfBefore.Format(time.RFC3339Nano), sluicetype.ErrLeaseLost)
			case r.arg == "renewed":
				return nil, fmt.Errorf("finish job %s: lease renewed: %w", p.ID, sluicetype.ErrLeaseLost)
			case strings.HasPrefix(r.arg, "alive "):
				return nil, fmt.Errorf("finish job %s: worker %s beats again: %w", p.ID, strings.TrimPrefix(r.arg, "alive "), sluicetype.ErrLeaseLost)
			}
			return nil, fmt.Errorf("finish job %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		return nil, err
	}
	if arr, _ := v.([]any); len(arr) == 0 {
		return nil, nil
	}
	return jobReply(v, true)
}

// countsArg encodes a plan's counter deltas for a script.
func countsArg(ds []backend.CountDelta) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString("\x1e")
		}
		from := string(d.From)
		b.WriteString(d.Queue + us + from + us + string(d.To) + us + strconv.FormatInt(d.N, 10))
	}
	return b.String()
}

// The arguments of luaComplete: a head, then one record per item
// (batchLayout).
const (
	cmpProbation = iota // "1" to end the probation of each completed job's fingerprint
	cmpHeadLen
)

const (
	cmpID     = iota
	cmpLease  // lease id
	cmpFence  //
	cmpDelete // "1" to delete the job instead
	cmpRecLen
)

// completeLayout names luaComplete's arguments for the script.
func completeLayout() batchLayout {
	var h [cmpHeadLen]string
	h[cmpProbation] = "probation"
	var r [cmpRecLen]string
	r[cmpID], r[cmpLease], r[cmpFence], r[cmpDelete] = "id", "lease", "fence", "delete"
	return batchLayout{head: h[:], rec: r[:]}
}

// luaComplete finishes successful jobs (JobCompleteMany).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4] -> A.probation: "1" to end the probation of each completed
// job's fingerprint
// ARGV[R1...] -> one record of RN values per item, at the offsets R names
// (completeLayout: id, lease, fence, delete)
//
// Returns one integer per item: 1 applied, 0 lease lost.
var luaComplete = batchScript(completeLayout(), `
-- Probation records are looked for only when quarantine records exist.
local probe = A.probation == '1' and redis.call('SCARD', K('fprs')) > 0
local res, fps = {}, {}
-- Index writes other than the fast path's own (error groups, deleted
-- jobs) are gathered (ZB) and written once per key, as the claim's.
ZB = {}
-- The fast path: a job leaves one index entry (run) and gets one (its
-- queue and kind's sqk of completed); they are written per batch, one
-- call per index. A job with an error pattern also moves its error
-- group's entries from running to completed (gathered, ZB). A job deleted
-- on completion takes the general path.
local runm, sqk, nq, rkm = {}, {}, {}, {}
for i = R1, #ARGV, RN do
  local id = ARGV[i + R.id]
  local key = K('job', id)
  local h
  if probe then h = redis.call('HMGET', key, F.state, F.lease_id, F.fence, F.lease_expires, F.queue, F.kind,
    F.version, F.pattern, F.state_changed_at, F.fingerprint)
  else h = redis.call('HMGET', key, F.state, F.lease_id, F.fence, F.lease_expires, F.queue, F.kind, F.version,
    F.pattern, F.state_changed_at) end
  if h[1] == 'running' and h[2] == ARGV[i + R.lease] and h[3] == ARGV[i + R.fence] then
    if ARGV[i + R.delete] == '1' then
      remove(load(id), true)
    else
      local q = h[5]
      redis.call('HSET', key, F.state, 'completed', F.finalized_at, NOW, F.state_changed_at, NOW, F.version,
        inc(h[7]))
      redis.call('HDEL', key, F.lease_id, F.lease_worker, F.lease_expires)
      runm[#runm + 1] = h[4] .. ':' .. id
      group(rkm, h[6], id)
      local m = NOW .. ':' .. id
      group(sqk, q .. US .. h[6], m)
      if h[8] then egmove('running', 'completed', q, h[6], h[8], id, (h[9] or '') .. ':' .. id, m) end
      nq[q] = (nq[q] or 0) + 1
    end
    if probe and h[10] then fps[h[10]] = true end
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
if #runm > 0 then
  zmany(false, K('run'), runm)
  for k, ids in pairs(rkm) do smany(false, K('rk', k), ids) end
  for pk, ms in pairs(sqk) do zmany(true, K('sqk', 'completed', pk), ms) end
  for q, n in pairs(nq) do count(q, 'running', -n); count(q, 'completed', n) end
end
if probe then
  for fp in pairs(fps) do
    if redis.call('HGET', K('fpr', fp), QF.status) == 'probation' then
      redis.call('DEL', K('fpr', fp))
      redis.call('SREM', K('fprs'), fp)
    end
  end
end
return res
`)

// JobCompleteMany completes (or deletes) successful jobs in one script
// (of at most completeChunk items each); each item is fenced on its own.
func (s *Store) JobCompleteMany(ctx context.Context, p *backend.JobCompleteManyParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	if len(p.Items) > completeChunk {
		for i := 0; i < len(p.Items); i += completeChunk {
			q := *p
			q.Items = p.Items[i:min(i+completeChunk, len(p.Items))]
			r, err := s.JobCompleteMany(ctx, &q)
			if err != nil {
				return nil, err
			}
			copy(out[i:], r)
		}
		return out, nil
	}
	var head [cmpHeadLen]string
	head[cmpProbation] = flag(p.EndProbation)
	args := appendArgs(make([]any, 0, cmpHeadLen+cmpRecLen*len(p.Items)), head[:]...)
	for _, it := range p.Items {
		var r [cmpRecLen]string
		r[cmpID], r[cmpLease], r[cmpFence], r[cmpDelete] = it.ID, it.LeaseID, strconv.FormatInt(it.Fence, 10), flag(it.Delete)
		args = appendArgs(args, r[:]...)
	}
	v, err := s.run(ctx, "complete jobs", luaComplete, args...)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	for i := range p.Items {
		if ok, _ := at(r, i).(int64); ok != 1 {
			out[i] = fmt.Errorf("complete job %s: %w", p.Items[i].ID, sluicetype.ErrLeaseLost)
		}
	}
	return out, nil
}

// at is arr[i], or nil past its end.
func at(arr []any, i int) any {
	if i < len(arr) {
		return arr[i]
	}
	return nil
}
