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

// luaClaim archives a queue's available jobs past their deadline and moves
// up to a limit of available jobs to running under a new lease (JobClaim).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// queue, worker, lease (lease id), limit,
// suspects, lone ("1"), dur (lease duration "s:ns"), kinds (kind=version
// pairs joined by US; "" for any kind), and the past-deadline write
// pd_to, pd_reason, pd_le, pd_ep, ev_kind, ev_actor, ev_from, ev_to, ev_msg
// (pd_to "" leaves such jobs alone).
//
// Returns {now, jobs, dead, due, limited, bound} ({now, jobs, dead, due}
// from a paused queue; limited and bound "1" or "0", JobClaimResult's
// Limited and Bound): each job as {fields, errors}, jobs packed in
// one MessagePack string (arrays of strings; see unpackStrings), a claimed job
// with its fields as they were before the claim (its hash as read, not
// copied again into the reply): JobClaim applies the claim's writes
// (running, fence and version one up, the lease expiring at now plus dur,
// attempted at now by worker, state changed at now), which are the same
// for every job of the claim. due are the deaths with a dead-letter route,
// left for luaDeadlineDeath.
var luaClaim = script(`
local A = args(4)
local q = A.queue
if redis.call('HGET', K('paused'), q) == '1' then return {NOW, {}, {}, {}} end
local kinds = nil
if A.kinds ~= '' then
  kinds = {}
  for _, kv in ipairs(split(A.kinds)) do
    local e = string.find(kv, '=', 1, true)
    kinds[string.sub(kv, 1, e - 1)] = tonumber(string.sub(kv, e + 1))
  end
end
local dead = {}
-- Index writes other than the fast path's own (error groups, the general
-- path's jobs, the deaths past a deadline) are gathered (ZB) and written
-- once per key: one call per job and index cost a job that failed before
-- three times what one that never failed cost.
ZB = {}
` + luaClaimRoutes + `
if A.pd_to ~= '' then
  local ms = redis.call('ZRANGEBYLEX', K('dl', q), '-', '(' .. NOW, 'LIMIT', 0, 1000)
  for _, m in ipairs(ms) do
    local J = load(string.sub(m, 21))
    if J and (kinds == nil or kinds[J[F.kind]] ~= nil) and routed(J) then
      due[#due + 1] = out(J, true)
    elseif J and (kinds == nil or kinds[J[F.kind]] ~= nil) then
      local O = copy(J)
      J[F.state] = A.pd_to; J[F.reason] = A.pd_reason; J[F.finalized_at] = NOW; J[F.state_changed_at] = NOW;
        J[F.last_error] = A.pd_le; J[F.pattern] = A.pd_ep
      bump(J)
      commit(O, J, true)
      event(J[F.id], A.ev_kind, A.ev_actor, A.ev_from, A.ev_to, J[F.attempt], A.ev_msg)
      dead[#dead + 1] = out(J, true)
    end
  end
end
local jobs = {}
local limit = tonumber(A.limit)
` + luaClaimLimits + `
local exp = tadd(A.dur)
-- The fast path: a job without a deadline leaves two index entries (its
-- queue and kind's sqk of available, and av) and gets one (run); they are
-- written per batch, one call per index, after the jobs' hashes. A job
-- with an error pattern (one that failed before: a retry, an operator's
-- redrive) also moves its error group's two entries from available to
-- running, as index does, gathered (ZB). A job with a deadline takes the
-- general path.
local sk, runm, rkm, NOERRS = {}, {}, {}, {}
-- PICK: the fields the fast path reads from a job's hash, one table
-- lookup a field rather than a chain of comparisons.
local PICK = {[F.fence] = true, [F.version] = true, [F.state_changed_at] = true, [F.kind] = true,
  [F.schema_version] = true, [F.attempt] = true, [F.crash_attempt] = true,
  [F.errors_kept] = true, [F.last_error] = true, [F.deadline] = true, [F.pattern] = true}
local function take(class, n)
  local key = K('av', q, class)
  local skipped, scanned = 0, 0
  local got = 0
  while got < n and scanned < 1000 + 4 * n do
    local ms = redis.call('ZRANGE', key, skipped, skipped + (n - got) + 15)
    if #ms == 0 then break end
    local avm, fast = {}, 0
    for _, m in ipairs(ms) do
      if got >= n then break end
      scanned = scanned + 1
      local id = string.sub(m, 21)
      local jk = P .. 'job:' .. id
      local r = redis.call('HGETALL', jk)
      -- The fields the fast path reads, picked from the reply rather than
      -- copied into a table of every field.
      local H = {[F.kind] = '', [F.schema_version] = '0', [F.fence] = '0', [F.version] = '0',
        [F.state_changed_at] = '', [F.attempt] = '0', [F.crash_attempt] = '0'}
      for i = 1, #r, 2 do
        local f = r[i]
        if PICK[f] then H[f] = r[i + 1] end
      end
      local dl, ep = H[F.deadline] or '', H[F.pattern] or ''
      local ok = #r > 0 and (dl == '' or dl >= NOW)
      if ok and kinds ~= nil then
        local v = kinds[H[F.kind]]
        ok = v ~= nil and tonumber(H[F.schema_version]) <= v
      end
      if ok and KPRUN ~= nil then ok = room(H[F.kind], jk) end
      if not ok then
        skipped = skipped + 1
      elseif dl == '' then
        local f, v = inc(H[F.fence]), inc(H[F.version])
        redis.call('HSET', jk, F.state, 'running', F.fence, f, F.lease_id, A.lease, F.lease_worker, A.worker,
          F.lease_expires, exp, F.attempted_at, NOW, F.attempted_by, A.worker,
          F.state_changed_at, NOW, F.version, v)
        avm[#avm + 1] = m
        fast = fast + 1
        local sm = H[F.state_changed_at] .. ':' .. id
        group(sk, H[F.kind], sm)
        runm[#runm + 1] = exp .. ':' .. id
        group(rkm, H[F.kind], id)
        if ep ~= '' then egmove('available', 'running', q, H[F.kind], ep, id, sm, NOW .. ':' .. id) end
        -- A job that never failed has no error list (ne counts its
        -- entries; jobs of older builds lack ne but have a last error, an
        -- attempt or a crash): reading it would cost a call per job, and
        -- a table of its own a table per job.
        local es = NOERRS
        if H[F.errors_kept] or H[F.last_error] or H[F.attempt] ~= '0' or H[F.crash_attempt] ~= '0' then es = errs(id) end
        jobs[#jobs + 1] = {r, es}
        got = got + 1
      else
        local J = load(id)
        local O = copy(J)
        J[F.state] = 'running'; J[F.fence] = istr(tonumber(J[F.fence]) + 1); J[F.lease_id] = A.lease
        J[F.lease_worker] = A.worker; J[F.lease_expires] = exp
        J[F.attempted_at] = NOW; J[F.attempted_by] = A.worker; J[F.state_changed_at] = NOW
        bump(J)
        commit(O, J, true)
        -- Out of av with the chunk, as the fast path's jobs: the next
        -- chunk's offset counts only the skipped. Its counters moved in
        -- commit, and its gathered av removal finds nothing at flush.
        avm[#avm + 1] = m
        jobs[#jobs + 1] = out(O, true)
        got = got + 1
      end
    end
    -- Out of av before the next chunk's offset is counted.
    zmany(false, key, avm)
    count(q, 'available', -fast)
    count(q, 'running', fast)
  end
end
if limit > 0 then
  take('0', limit)
  local n = math.min(tonumber(A.suspects), limit - #jobs)
  if n > 0 then take('1', n) end
  if A.lone == '1' and #jobs == 0 then take('2', 1) end
end
` + luaClaimStarts + `
if #runm > 0 then
  for k, ms in pairs(sk) do zmany(false, K('sqk', 'available', q .. US .. k), ms) end
  zmany(true, K('run'), runm)
  for k, ids in pairs(rkm) do smany(true, K('rk', k), ids) end
end
-- One MessagePack string rather than a reply of some forty strings a job:
-- the reply's encoding was a third of the claim's time on the server.
if QROOM ~= nil and QROOM > 0 and #jobs >= QROOM then BOUND = true end
return {NOW, cmsgpack.pack(jobs), dead, due, LIMITED and '1' or '0', BOUND and '1' or '0'}
`)

// JobClaim archives the queue's available jobs past their deadline, then
// moves up to Limit available jobs to running under a new lease, in one
// script.
func (s *Store) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	if p.Limit > claimChunk {
		return s.claimChunked(ctx, p)
	}
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	kinds := make([]string, 0, len(p.Kinds))
	for k, v := range p.Kinds {
		kinds = append(kinds, k+"="+strconv.Itoa(v))
	}
	sort.Strings(kinds)
	pd := &p.PastDeadline
	rt, rk := claimRoutes(pd)
	a := append([]any{"queue", p.Queue, "worker", p.WorkerID, "lease", p.LeaseID, "limit", strconv.Itoa(p.Limit),
		"suspects", strconv.Itoa(p.Suspects), "lone", flag(p.Lone), "dur", dstr(lease),
		"kinds", strings.Join(kinds, us), "rt", rt, "rk", rk}, pastDeadlineArgs(pd)...)
	v, err := s.run(ctx, "claim "+p.Queue, luaClaim, a...)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	// Four parts from a paused queue's early return, six otherwise.
	if len(r) != 4 && len(r) != 6 {
		return nil, fmt.Errorf("redis: claim %s: bad reply", p.Queue)
	}
	now, _ := r[0].(string)
	nowT, err := ttime(now)
	if err != nil {
		return nil, fmt.Errorf("redis: claim %s: now: %w", p.Queue, err)
	}
	res := &backend.JobClaimResult{Now: nowT}
	if len(r) == 6 {
		res.Limited, res.Bound = r[4] == "1", r[5] == "1"
	}
	// Claimed jobs come packed; a claim that returns early (a paused
	// queue) sends a plain empty array.
	var jobs []*sluicetype.Job
	if packed, ok := r[1].(string); ok {
		if jobs, err = unpackJobs(packed, true); err != nil {
			return nil, fmt.Errorf("redis: claim %s: %w", p.Queue, err)
		}
	}
	dead, _ := r[2].([]any)
	// The script sends each job as it read it; its writes are these, the
	// same for every job (see luaClaim).
	xs, err := tadd(now, lease)
	if err != nil {
		return nil, fmt.Errorf("redis: claim %s: now: %w", p.Queue, err)
	}
	exp, err := ttime(xs)
	if err != nil {
		return nil, fmt.Errorf("redis: claim %s: lease expiry: %w", p.Queue, err)
	}
	for _, j := range jobs {
		j.State = sluicetype.StateRunning
		j.Fence++
		j.Version++
		j.Lease = &sluicetype.Lease{ID: p.LeaseID, WorkerID: p.WorkerID, Fence: j.Fence, ExpiresAt: exp}
		at := res.Now
		j.AttemptedAt = &at
		j.AttemptedBy = p.WorkerID
		j.StateChangedAt = res.Now
		res.Jobs = append(res.Jobs, j)
	}
	for _, x := range dead {
		j, err := jobReply(x, true)
		if err != nil {
			return nil, err
		}
		res.Dead = append(res.Dead, j)
	}
	if err := s.claimDeadLetters(ctx, pd, r[3], res); err != nil {
		// The claimed jobs are leased now: hand them out. The deaths not
		// written stay available past their deadline for the next claim.
		s.log.Warn("claim: deadline deaths not written", "queue", p.Queue, "err", err)
	}
	return res, nil
}

// pastDeadlineArgs are the plan's write of a job past its deadline, as
// luaClaim and luaDeadlineDeath take it: pd_to, pd_reason, pd_le, pd_ep
// and the event ev_kind, ev_actor, ev_from, ev_to, ev_msg.
func pastDeadlineArgs(pd *backend.ClaimDeadlineWrite) []any {
	return []any{"pd_to", string(pd.To), "pd_reason", string(pd.Reason), "pd_le", pd.LastError, "pd_ep", pd.Pattern,
		"ev_kind", string(pd.Event.Kind), "ev_actor", pd.Event.Actor, "ev_from", string(pd.Event.From),
		"ev_to", string(pd.Event.To), "ev_msg", pd.Event.Message}
}

// claimChunked claims up to p.Limit jobs as claims of at most claimChunk
// each, as one claim would take them: each chunk takes never-crashed jobs
// first, then suspects up to what the earlier chunks left of p.Suspects; a
// chunk short of its limit means the queue has no more for this claim.
// The lone job is asked for only by the first chunk (a later one follows
// a full chunk). Now is the first chunk's, so a lease is never later than
// Now plus the lease duration says.
func (s *Store) claimChunked(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	var res *backend.JobClaimResult
	left, suspects, lone := p.Limit, p.Suspects, p.Lone
	for left > 0 {
		q := *p
		q.Limit, q.Suspects, q.Lone = min(left, claimChunk), min(suspects, min(left, claimChunk)), lone
		r, err := s.JobClaim(ctx, &q)
		if err != nil {
			if res != nil && len(res.Jobs) > 0 {
				// The jobs already claimed are the caller's: they are
				// handed over, not left running unseen until their lease
				// expires.
				return res, nil
			}
			return nil, err
		}
		if res == nil {
			res = r
		} else {
			res.Jobs = append(res.Jobs, r.Jobs...)
			res.Dead = append(res.Dead, r.Dead...)
			res.Limited = res.Limited || r.Limited
			res.Bound = res.Bound || r.Bound
		}
		for _, j := range r.Jobs {
			if j.CrashAttempt == 1 {
				suspects--
			}
		}
		if len(r.Jobs) < q.Limit {
			break
		}
		left -= len(r.Jobs)
		lone = false
	}
	return res, nil
}
