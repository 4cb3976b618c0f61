package redis

// The Lua side of the store. Every transition is one script: the shared
// library (luaLib) followed by the script's body. Each script takes
//
//	KEYS[1] the namespace's schema key, {ns}:schema. Every other key the
//	        script touches is derived from it by prefix ({ns}:...), so it
//	        carries the same hash tag and lives in the same cluster slot.
//	ARGV[1] ARGV[2] ARGV[3] the idempotency key, claim token and step the
//	        write runs under ("" when none): the claim is checked before
//	        anything is written, and the step is recorded after the write,
//	        in the same script.
//	ARGV[4...] the script's own arguments, listed on each.
//
// Refusals are error replies whose text is a code and its facts
// ("LEASE", "NOTFOUND", "STATE archived", ...), never a sentence: the
// Go side turns each into the engine's typed error. Every guard is checked
// before the first write, because a script's writes are not undone by a
// later error.
//
// Times are strings of 19 decimal digits, unix nanoseconds, so comparing
// two is comparing the strings, and no time passes through a Lua number
// (a double, which cannot hold nanoseconds since 1970). The store's clock
// is the server's (TIME).

// luaLib is the code every script starts with; script wraps the body in
// a function, so the counter moves it made are flushed after it returns.
const luaLib = `
local P = string.sub(KEYS[1], 1, -7)
local US, RS = '\31', '\30'
local function K(a, b, c, ...)
  -- One concatenation, no table, for the one to three parts every key has.
  if c == nil then
    if b == nil then return P .. a end
    return P .. a .. ':' .. b
  end
  if ... == nil then return P .. a .. ':' .. b .. ':' .. c end
  return P .. table.concat({a, b, c, ...}, ':')
end
local T = redis.call('TIME')
local NOW_S, NOW_NS = tonumber(T[1]), tonumber(T[2]) * 1000
local NOW = string.format('%010d%09d', NOW_S, NOW_NS)
local function istr(n) return string.format('%d', n) end
-- inc is a counter's string one up (fence, version), remembered for the
-- script: the jobs of a batch share a few values.
local INC = {}
local function inc(s)
  local r = INC[s]
  if not r then r = istr(tonumber(s) + 1); INC[s] = r end
  return r
end
-- tadd is the store's now plus a duration written "seconds:nanoseconds"
-- (nanoseconds in [0, 1e9)).
local function tadd(d)
  local c = string.find(d, ':', 1, true)
  local s = NOW_S + tonumber(string.sub(d, 1, c - 1))
  local ns = NOW_NS + tonumber(string.sub(d, c + 1))
  if ns >= 1000000000 then ns = ns - 1000000000; s = s + 1 end
  if s < 0 then return '0000000000000000000' end
  if s > 9999999999 then s = 9999999999 end
  return string.format('%010d%09d', s, ns)
end
local NOW1 = tadd('0:1')
local function split(s, sep)
  sep = sep or US
  local t = {}
  if s == nil or s == '' then return t end
  local i = 1
  while true do
    local j = string.find(s, sep, i, true)
    if not j then t[#t + 1] = string.sub(s, i); break end
    t[#t + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
  return t
end
local function set(list) local t = {}; for _, v in ipairs(list) do t[v] = true end; return t end
local function args(from)
  local A = {}
  for i = from, #ARGV, 2 do A[ARGV[i]] = ARGV[i + 1] end
  return A
end
local function enc(arr)
  local b = {}
  for i = 1, #arr do b[#b + 1] = #arr[i] .. ':' .. arr[i] end
  return table.concat(b)
end

-- Idempotency: the claim must still be the caller's, and the step new.
local IK, ITOK, ISTEP = ARGV[1], ARGV[2], ARGV[3]
local function idem_check()
  if IK == '' then return nil end
  local h = redis.call('HMGET', K('idem', IK), 'st', 'tok')
  if h[1] ~= 'in_flight' or h[2] ~= ITOK then return 'IDEMHELD' end
  if redis.call('HEXISTS', K('idems', IK), ISTEP) == 1 then return 'IDEMSTEP' end
  return nil
end
local function idem_record(res)
  if IK ~= '' then redis.call('HSET', K('idems', IK), ISTEP, res) end
end

-- Jobs are hashes at {ns}:job:ID; see the package doc for the fields.
-- Empty fields are not stored (a job hash holds what it has), nor (since
-- schema version 2) the fields of DEF at their default; load gives every
-- field, its default or '' when absent. A hash of version 1, which
-- stored the defaults, reads the same.
local FIELDS = {'id', 'q', 'k', 'p', 'sv', 'm', 'tg', 'pr', 's', 'a', 'ma', 'c', 'fp', 'f', 'sch', 'dl', 'to', 'cr',
  'ata', 'atb', 'sca', 'fin', 'rs', 'lid', 'lw', 'lx', 'v', 'cp', 'dlo', 'ro', 'sb', 'le', 'ep', 'ne'}
local DEF = {a = '0', c = '0', f = '0', pr = '0', to = '0', tg = '[]'}
local function load(id)
  local r = redis.call('HGETALL', K('job', id))
  if #r == 0 then return nil end
  local J = {}
  for i = 1, #r, 2 do J[r[i]] = r[i + 1] end
  for _, f in ipairs(FIELDS) do
    if J[f] == nil then J[f] = DEF[f] or '' end
  end
  return J
end
local function copy(J) local c = {}; for k, v in pairs(J) do c[k] = v end; return c end
-- flat is J's stored fields (a new job's hash; a reply): the empty ones
-- and the defaults left out, so it never rewrites an existing hash (a
-- field set back to its default would stay as it was): commit does.
local function flat(J, payload)
  local r = {}
  for k, v in pairs(J) do
    if v ~= '' and v ~= DEF[k] and (payload or k ~= 'p') then r[#r + 1] = k; r[#r + 1] = v end
  end
  return r
end
local function errs(id) return redis.call('LRANGE', K('err', id), 0, -1) end
local function out(J, payload) return {flat(J, payload), errs(J.id)} end
local function rec(J, payload) return 'J' .. enc({enc(flat(J, payload)), enc(errs(J.id))}) end

-- ZB, when a script sets it to {}, gathers index writes (sorted set
-- members, error group counts) so that a bulk batch writes each key once
-- with many members instead of one call per job; flush writes them.
-- ZBN counts the writes gathered since the last flush (a bulk batch
-- predicts from it what the flush will cost).
local ZB, ZBN = nil, 0
local function zb(key)
  local b = ZB[key]
  if not b then b = {rem = {}, add = {}}; ZB[key] = b end
  return b
end
local function zset(add, key, score, m)
  if ZB then
    local b = zb(key)
    ZBN = ZBN + 1
    if add then b.add[#b.add + 1] = score; b.add[#b.add + 1] = m else b.rem[#b.rem + 1] = m end
  elseif add then redis.call('ZADD', key, score, m) else redis.call('ZREM', key, m) end
end
local function zlex(add, key, m) zset(add, key, '0', m) end
local EGB = {}
local function egcount(g, n)
  if ZB then EGB[g] = (EGB[g] or 0) + n; ZBN = ZBN + 1; return end
  local v = redis.call('HINCRBY', K('egc'), g, n)
  if v <= 0 then redis.call('HDEL', K('egc'), g) end
end
-- egmove moves a job's error group entries (index's eg and egi, and the
-- group's count) from state from to state to: m is its member before the
-- move, nm after. The fast paths of the claim and the completion use it.
local function egmove(from, to, q, k, ep, id, m, nm)
  local gf, gt = from .. US .. q .. US .. k .. US .. ep, to .. US .. q .. US .. k .. US .. ep
  zlex(false, K('eg', gf), m)
  zlex(false, K('egi', gf), id)
  egcount(gf, -1)
  zlex(true, K('eg', gt), nm)
  zlex(true, K('egi', gt), id)
  egcount(gt, 1)
end
local function cls(c)
  c = tonumber(c)
  if c == 0 then return '0' elseif c == 1 then return '1' end
  return '2'
end
-- count moves the maintained counters; the moves of a script are summed
-- and written once per (queue, state) when the script ends (flush).
local CD = {}
local function count(q, s, n)
  if n == 0 or s == '' or s == 'deleted' then return end
  local f = q .. US .. s
  CD[f] = (CD[f] or 0) + n
end
-- flushz writes what ZB and EGB gathered; a script that gathers goes on
-- gathering.
local function flushz()
  if not ZB then return end
  -- Removals first: a member a job leaves and re-enters in one key is
  -- then left in, as the writes one by one would leave it.
  for key, b in pairs(ZB) do
    for i = 1, #b.rem, 500 do redis.call('ZREM', key, unpack(b.rem, i, math.min(i + 499, #b.rem))) end
  end
  for key, b in pairs(ZB) do
    for i = 1, #b.add, 1000 do redis.call('ZADD', key, unpack(b.add, i, math.min(i + 999, #b.add))) end
  end
  for g, n in pairs(EGB) do
    if n ~= 0 then
      local v = redis.call('HINCRBY', K('egc'), g, n)
      if v <= 0 then redis.call('HDEL', K('egc'), g) end
    end
  end
  ZB, EGB, ZBN = {}, {}, 0
end
local function flush()
  flushz()
  for f, n in pairs(CD) do
    if n ~= 0 then
      local v = redis.call('HINCRBY', K('counts'), f, n)
      if v == 0 then redis.call('HDEL', K('counts'), f) end
    end
  end
  CD = {}
end
-- NOST: the states every job passes through (unindexedStates on the Go
-- side). They have no st, sq or sk sets (schema versions 3 and 4): a job
-- in one is in one set of its queue and kind, sqk:STATE:QUEUE US KIND,
-- and listings merge the sets of the pairs qk names. An enqueue, a claim
-- and a completion each write one entry instead of two or three.
local NOST = {available = true, completed = true}
-- pairkey is the sqk set of state s for queue q and kind k, the pair
-- recorded in qk (once per script) so that listings find the set.
local QKSEEN = {}
local function pairkey(s, q, k)
  local pk = q .. US .. k
  if not QKSEEN[pk] then redis.call('SADD', K('qk'), pk); QKSEEN[pk] = true end
  return K('sqk', s, pk)
end
-- index adds the job to (or removes it from) every index its fields
-- place it in.
local function index(J, add)
  local id, s = J.id, J.s
  local m = J.sca .. ':' .. id
  -- Running jobs stay out of the state indexes: a claim and a completion
  -- each spare entries, and listings gather the few running jobs from
  -- the lease set.
  if NOST[s] then
    zlex(add, pairkey(s, J.q, J.k), m)
  elseif s ~= 'running' then
    zlex(add, K('st', s), m)
    zlex(add, K('sq', s, J.q), m)
    zlex(add, K('sk', s, J.k), m)
  end
  if J.ep ~= '' then
    local g = s .. US .. J.q .. US .. J.k .. US .. J.ep
    zlex(add, K('eg', g), m)
    zlex(add, K('egi', g), id)
    egcount(g, add and 1 or -1)
  end
  if s == 'available' then
    local key, am = K('av', J.q, cls(J.c)), J.sch .. ':' .. id
    zset(add, key, J.pr, am)
    if J.dl ~= '' then zlex(add, K('dl', J.q), J.dl .. ':' .. id) end
  elseif s == 'scheduled' or s == 'retryable' then
    zlex(add, K('due', s), J.sch .. ':' .. id)
  elseif s == 'running' then
    zlex(add, K('run'), J.lx .. ':' .. id)
  end
end
-- commit writes J over O (the job as read): its changed fields and its
-- indexes, and with autocount the counters of the state it moved. J is a
-- changed copy of O, or only the changes with O as its __index (pairs
-- then walks only those).
local function commit(O, J, autocount)
  index(O, false)
  local a, d = {}, {}
  for k, v in pairs(J) do
    if O[k] ~= v then
      if v == '' then d[#d + 1] = k else a[#a + 1] = k; a[#a + 1] = v end
    end
  end
  if #a > 0 then redis.call('HSET', K('job', J.id), unpack(a)) end
  if #d > 0 then redis.call('HDEL', K('job', J.id), unpack(d)) end
  index(J, true)
  if autocount and (O.s ~= J.s or O.q ~= J.q) then count(O.q, O.s, -1); count(J.q, J.s, 1) end
end
-- create writes a new job and its indexes, and counts it. Under ZB (a
-- batch) its index entries, the ids entry among them, are gathered, and
-- each queue is added to queues once per script.
local QSEEN = {}
local function create(J)
  redis.call('HSET', K('job', J.id), unpack(flat(J, true)))
  zlex(true, K('ids'), J.id)
  if not QSEEN[J.q] then redis.call('SADD', K('queues'), J.q); QSEEN[J.q] = true end
  if J.fp ~= '' then redis.call('SADD', K('fpj', J.fp), J.id) end
  index(J, true)
  count(J.q, J.s, 1)
end
-- remove deletes a job with its timeline, errors and index entries.
local function remove(O, autocount)
  index(O, false)
  redis.call('DEL', K('job', O.id), K('ev', O.id), K('err', O.id), K('sig', O.id))
  redis.call('ZREM', K('ids'), O.id)
  if O.fp ~= '' then redis.call('SREM', K('fpj', O.fp), O.id) end
  if O.sb ~= '' then redis.call('SREM', K('sup'), O.id) end
  if autocount then count(O.q, O.s, -1) end
end
-- zmany adds (at score 0) or removes many members of one sorted set in
-- as few calls as unpack allows: the hot path's index work is one call
-- per index per batch, not one per job.
local function zmany(add, key, ms)
  for i = 1, #ms, 500 do
    local a = {}
    for j = i, math.min(i + 499, #ms) do
      if add then a[#a + 1] = '0' end
      a[#a + 1] = ms[j]
    end
    if add then redis.call('ZADD', key, unpack(a)) else redis.call('ZREM', key, unpack(a)) end
  end
end
-- group appends m to the list at G[k].
local function group(G, k, m)
  local l = G[k]
  if not l then l = {}; G[k] = l end
  l[#l + 1] = m
end
local function event(id, kind, actor, from, to, attempt, msg)
  redis.call('RPUSH', K('ev', id), table.concat({NOW, kind, actor, from, to, attempt, msg}, US))
end
local function bump(J) J.v = inc(J.v) end
local function quarantined(fp)
  return fp ~= '' and redis.call('HGET', K('fpr', fp), 'st') == 'quarantined'
end
-- spec reads an action spec from A with prefix x: from-states, to-state,
-- reason and effects, as the engine derived them.
local function spec(A, x)
  local S = {from = set(split(A[x .. 'from'])), to = A[x .. 'to'], reason = A[x .. 'reason'] or ''}
  for _, f in ipairs({'clear', 'schednow', 'fin', 'reopen', 'onemore', 'reset', 'del', 'rquar', 'rsuper'}) do
    S[f] = A[x .. f] == '1'
  end
  return S
end
-- apply writes spec S on J (in place); deadline is a new deadline or ''.
local function apply(J, S, deadline)
  J.s = S.to
  if S.onemore then
    local a, ma = tonumber(J.a), tonumber(J.ma)
    if ma <= a then J.ma = istr(a + 1) end
  end
  if S.reset then J.c = '0' end
  if S.schednow then J.sch = NOW end
  if S.fin then J.fin = NOW; J.rs = S.reason
  elseif S.reopen then J.fin = ''; J.rs = '' end
  if S.clear then J.lid = ''; J.lw = ''; J.lx = '' end
  J.sca = NOW
  bump(J)
  if S.onemore then
    if deadline ~= nil and deadline ~= '' then J.dl = deadline
    elseif J.dl ~= '' and J.dl <= NOW then J.dl = '' end
  end
end
local function opflat(O) local r = {}; for k, v in pairs(O) do r[#r + 1] = k; r[#r + 1] = v end; return r end
local function loadop(id)
  local r = redis.call('HGETALL', K('op', id))
  if #r == 0 then return nil end
  local O = {}
  for i = 1, #r, 2 do O[r[i]] = r[i + 1] end
  return O
end
local function saveop(O) redis.call('HSET', K('op', O.id), unpack(opflat(O))) end
local IE = idem_check()
if IE then return redis.error_reply(IE) end
`

// luaInsert writes new jobs (JobInsertMany).
//
// ARGV[4] "1" to refuse quarantined fingerprints; then 14 values per job:
// id, queue, kind, payload, schema version, metadata, tags (JSON), priority,
// max attempts, fingerprint, scheduled_at (time, or "" for now plus the
// delay), delay ("s:ns"), deadline (time or ""), timeout (ns).
//
// Returns {now, results}, one result per job: {"N", state, scheduled_at}
// written (every other field is the job as sent, as of now: JobInsertMany
// builds the job from its parameters rather than have the script send
// back what it was sent), {"E", job} existing with the same content, {"C"}
// existing with other content, {"Q"} refused as quarantined.
//
// The index entries of the new jobs are gathered (ZB) and written once
// per key for the batch; fingerprints are looked up only when quarantine
// records exist.
var luaInsert = script(`
local refuse = ARGV[4] == '1' and redis.call('SCARD', K('fprs')) > 0
ZB = {}
local res, recs, due, idsk = {}, {}, {}, K('ids')
for i = 5, #ARGV, 14 do
  local id, q, k, fp = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 9]
  local r
  if refuse and quarantined(fp) then
    r = {'Q'}
    recs[#recs + 1] = enc({'Q', id, fp})
  else
    local O = load(id)
    if O then
      if O.q ~= q or O.k ~= k or O.fp ~= fp then
        r = {'C'}
        recs[#recs + 1] = enc({'C', id})
      else
        r = {'E', out(O, false)}
        if IK ~= '' then recs[#recs + 1] = enc({'E', rec(O, false)}) end
      end
    else
      local sch = ARGV[i + 10]
      if sch == '' then
        local d = ARGV[i + 11]
        sch = due[d]
        if not sch then sch = tadd(d); due[d] = sch end
      end
      local st = 'available'
      if sch > NOW then st = 'scheduled' end
      local p, sv, m, tg, pr, ma, dl, to = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7],
        ARGV[i + 8], ARGV[i + 12], ARGV[i + 13]
      -- create's writes, spelled out for a new job: its stored fields
      -- (flat's), the ones the claim and the completion look up first;
      -- its index entries (index) and counter.
      local h = {'s', st, 'v', '1', 'sca', NOW, 'q', q, 'k', k, 'sv', sv, 'sch', sch, 'ma', ma, 'cr', NOW, 'id', id}
      if pr ~= '0' then h[#h + 1] = 'pr'; h[#h + 1] = pr end
      if to ~= '0' then h[#h + 1] = 'to'; h[#h + 1] = to end
      if tg ~= '' and tg ~= '[]' then h[#h + 1] = 'tg'; h[#h + 1] = tg end
      if fp ~= '' then h[#h + 1] = 'fp'; h[#h + 1] = fp end
      if dl ~= '' then h[#h + 1] = 'dl'; h[#h + 1] = dl end
      if m ~= '' then h[#h + 1] = 'm'; h[#h + 1] = m end
      if p ~= '' then h[#h + 1] = 'p'; h[#h + 1] = p end
      redis.call('HSET', P .. 'job:' .. id, unpack(h))
      zlex(true, idsk, id)
      if not QSEEN[q] then redis.call('SADD', K('queues'), q); QSEEN[q] = true end
      if fp ~= '' then redis.call('SADD', K('fpj', fp), id) end
      local sm = NOW .. ':' .. id
      if st == 'available' then
        zlex(true, pairkey(st, q, k), sm)
        zset(true, K('av', q, '0'), pr, sch .. ':' .. id)
        if dl ~= '' then zlex(true, K('dl', q), dl .. ':' .. id) end
      else
        zlex(true, K('st', st), sm)
        zlex(true, K('sq', st, q), sm)
        zlex(true, K('sk', st, k), sm)
        zlex(true, K('due', st), sch .. ':' .. id)
      end
      count(q, st, 1)
      r = {'N', st, sch}
      if IK ~= '' then
        local J = {id = id, q = q, k = k, p = p, sv = sv, m = m, tg = tg, pr = pr, s = st, a = '0', ma = ma, c = '0',
          fp = fp, f = '0', sch = sch, dl = dl, to = to, cr = NOW, sca = NOW, v = '1'}
        recs[#recs + 1] = enc({'N', rec(J, false)})
      end
    end
  end
  res[#res + 1] = r
end
idem_record('I' .. enc(recs))
return {NOW, res}
`)

// luaClaim archives a queue's available jobs past their deadline and moves
// up to a limit of available jobs to running under a new lease (JobClaim).
//
// ARGV[4...] name/value pairs: queue, worker, lease (lease id), limit,
// suspects, lone ("1"), dur (lease duration "s:ns"), kinds (kind=version
// pairs joined by US; "" for any kind), and the past-deadline write
// pd_to, pd_reason, pd_le, pd_ep, ev_kind, ev_actor, ev_from, ev_to, ev_msg
// (pd_to "" leaves such jobs alone).
//
// Returns {now, jobs, dead, due}: each job as {fields, errors}, jobs packed in
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
    if J and (kinds == nil or kinds[J.k] ~= nil) and routed(J) then
      due[#due + 1] = out(J, true)
    elseif J and (kinds == nil or kinds[J.k] ~= nil) then
      local O = copy(J)
      J.s = A.pd_to; J.rs = A.pd_reason; J.fin = NOW; J.sca = NOW; J.le = A.pd_le; J.ep = A.pd_ep
      bump(J)
      commit(O, J, true)
      event(J.id, A.ev_kind, A.ev_actor, A.ev_from, A.ev_to, J.a, A.ev_msg)
      dead[#dead + 1] = out(J, true)
    end
  end
end
local jobs = {}
local limit = tonumber(A.limit)
local exp = tadd(A.dur)
-- The fast path: a job without a deadline leaves two index entries (its
-- queue and kind's sqk of available, and av) and gets one (run); they are
-- written per batch, one call per index, after the jobs' hashes. A job
-- with an error pattern (one that failed before: a retry, an operator's
-- redrive) also moves its error group's two entries from available to
-- running, as index does, gathered (ZB). A job with a deadline takes the
-- general path.
local sk, runm, NOERRS = {}, {}, {}
-- PICK: the fields the fast path reads from a job's hash, one table
-- lookup a field rather than a chain of comparisons.
local PICK = {f = true, v = true, sca = true, k = true, sv = true, a = true, c = true, ne = true, le = true, dl = true,
  ep = true}
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
      local H = {k = '', sv = '0', f = '0', v = '0', sca = '', a = '0', c = '0'}
      for i = 1, #r, 2 do
        local f = r[i]
        if PICK[f] then H[f] = r[i + 1] end
      end
      local dl, ep = H.dl or '', H.ep or ''
      local ok = #r > 0 and (dl == '' or dl >= NOW)
      if ok and kinds ~= nil then
        local v = kinds[H.k]
        ok = v ~= nil and tonumber(H.sv) <= v
      end
      if not ok then
        skipped = skipped + 1
      elseif dl == '' then
        local f, v = inc(H.f), inc(H.v)
        redis.call('HSET', jk, 's', 'running', 'f', f, 'lid', A.lease, 'lw', A.worker, 'lx', exp,
          'ata', NOW, 'atb', A.worker, 'sca', NOW, 'v', v)
        avm[#avm + 1] = m
        fast = fast + 1
        local sm = H.sca .. ':' .. id
        group(sk, H.k, sm)
        runm[#runm + 1] = exp .. ':' .. id
        if ep ~= '' then egmove('available', 'running', q, H.k, ep, id, sm, NOW .. ':' .. id) end
        -- A job that never failed has no error list (ne counts its
        -- entries; jobs of older builds lack ne but have a last error, an
        -- attempt or a crash): reading it would cost a call per job, and
        -- a table of its own a table per job.
        local es = NOERRS
        if H.ne or H.le or H.a ~= '0' or H.c ~= '0' then es = errs(id) end
        jobs[#jobs + 1] = {r, es}
        got = got + 1
      else
        local J = load(id)
        local O = copy(J)
        J.s = 'running'; J.f = istr(tonumber(J.f) + 1); J.lid = A.lease; J.lw = A.worker; J.lx = exp
        J.ata = NOW; J.atb = A.worker; J.sca = NOW
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
if #runm > 0 then
  for k, ms in pairs(sk) do zmany(false, K('sqk', 'available', q .. US .. k), ms) end
  zmany(true, K('run'), runm)
end
-- One MessagePack string rather than a reply of some forty strings a job:
-- the reply's encoding was a third of the claim's time on the server.
return {NOW, cmsgpack.pack(jobs), dead, due}
`)

// luaComplete finishes successful jobs (JobCompleteMany).
//
// ARGV[4] "1" to end the probation of each completed job's fingerprint;
// then 4 values per item: id, lease id, fence, "1" to delete the job
// instead.
//
// Returns one integer per item: 1 applied, 0 lease lost.
var luaComplete = script(`
-- Probation records are looked for only when quarantine records exist.
local probe = ARGV[4] == '1' and redis.call('SCARD', K('fprs')) > 0
local res, fps = {}, {}
-- Index writes other than the fast path's own (error groups, deleted
-- jobs) are gathered (ZB) and written once per key, as the claim's.
ZB = {}
-- The fast path: a job leaves one index entry (run) and gets one (its
-- queue and kind's sqk of completed); they are written per batch, one
-- call per index. A job with an error pattern also moves its error
-- group's entries from running to completed (gathered, ZB). A job deleted
-- on completion takes the general path.
local runm, sqk, nq = {}, {}, {}
for i = 5, #ARGV, 4 do
  local id = ARGV[i]
  local key = K('job', id)
  local h
  if probe then h = redis.call('HMGET', key, 's', 'lid', 'f', 'lx', 'q', 'k', 'v', 'ep', 'sca', 'fp')
  else h = redis.call('HMGET', key, 's', 'lid', 'f', 'lx', 'q', 'k', 'v', 'ep', 'sca') end
  if h[1] == 'running' and h[2] == ARGV[i + 1] and h[3] == ARGV[i + 2] then
    if ARGV[i + 3] == '1' then
      remove(load(id), true)
    else
      local q = h[5]
      redis.call('HSET', key, 's', 'completed', 'fin', NOW, 'sca', NOW, 'v', inc(h[7]))
      redis.call('HDEL', key, 'lid', 'lw', 'lx')
      runm[#runm + 1] = h[4] .. ':' .. id
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
  for pk, ms in pairs(sqk) do zmany(true, K('sqk', 'completed', pk), ms) end
  for q, n in pairs(nq) do count(q, 'running', -n); count(q, 'completed', n) end
end
if probe then
  for fp in pairs(fps) do
    if redis.call('HGET', K('fpr', fp), 'st') == 'probation' then
      redis.call('DEL', K('fpr', fp))
      redis.call('SREM', K('fprs'), fp)
    end
  end
end
return res
`)

// luaRenew extends leases (JobLeaseRenew).
//
// ARGV[4] the lease duration ("s:ns"); then 3 values per item: id, lease
// id, fence.
//
// Returns one integer per item: 1 renewed, 0 lease lost.
//
// A running job is only in the lease set (run) and, with an error
// pattern, its error group's sets, whose members a renewal leaves as they
// are: it reads the five fields it checks and writes two, and the lease
// set's entries move once per batch.
var luaRenew = script(`
local exp = tadd(ARGV[4])
local res, old, new = {}, {}, {}
for i = 5, #ARGV, 3 do
  local id = ARGV[i]
  local key = P .. 'job:' .. id
  local h = redis.call('HMGET', key, 's', 'lid', 'f', 'lx', 'v')
  if h[1] == 'running' and h[2] == ARGV[i + 1] and h[3] == ARGV[i + 2] then
    redis.call('HSET', key, 'lx', exp, 'v', inc(h[5]))
    old[#old + 1] = (h[4] or '') .. ':' .. id
    new[#new + 1] = exp .. ':' .. id
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
zmany(false, K('run'), old)
zmany(true, K('run'), new)
return res
`)

// luaFinish applies one fenced transition out of running as the engine
// resolved it (JobFinish).
//
// ARGV[4...] name/value pairs: id, lease, fence; the guards ifexp and
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
if not J or J.s ~= 'running' or J.lid ~= A.lease or J.f ~= A.fence then return redis.error_reply('LEASE') end
if A.ifbefore ~= '' and NOW > A.ifbefore then return redis.error_reply('LEASE bound') end
if A.ifexp == '1' and J.lx >= NOW then return redis.error_reply('LEASE renewed') end
if A.ifgone == '1' then
  local x = redis.call('HGET', K('w', J.lw), 'x')
  if x and x >= NOW then return redis.error_reply('LEASE alive ' .. J.lw) end
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
J.s = A.to
J.rs = A.reason
if A.charge == 'attempt' then J.a = istr(tonumber(J.a) + 1)
elseif A.charge == 'crash' then J.c = istr(tonumber(J.c) + 1) end
if A.sched == 'now' then J.sch = NOW elseif A.sched == 'after' then J.sch = tadd(A.delay) end
if A.fin == '1' then J.fin = NOW else J.fin = '' end
if A.err == '1' then
  local key = K('err', J.id)
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
  J.le = A.err_le; J.ep = A.err_ep; J.ne = istr(n)
end
if A.cp == '1' then J.cp = A.cp_v end
J.lid = ''; J.lw = ''; J.lx = ''
J.sca = NOW
bump(J)
commit(O, J, false)
if A.ev == '1' then event(J.id, A.ev_kind, A.ev_actor, A.ev_from, A.ev_to, A.ev_att, A.ev_msg) end
if A.fp == '1' then
  local fp = A.fp_fp
  local key = K('fpr', fp)
  local st = redis.call('HGET', key, 'st')
  if A.fp_quar == '1' then
    if st then
      local since = redis.call('HGET', key, 'since')
      if st ~= 'quarantined' then since = NOW end
      redis.call('HSET', key, 'kind', A.fp_kind, 'st', 'quarantined', 'since', since, 'le', A.fp_le, 'lj', A.fp_lj)
      redis.call('HINCRBY', key, 'cr', tonumber(A.fp_add))
    else
      local sum = 0
      for _, id in ipairs(redis.call('SMEMBERS', K('fpj', fp))) do
        sum = sum + tonumber(redis.call('HGET', K('job', id), 'c') or '0')
      end
      redis.call('HSET', key, 'fp', fp, 'kind', A.fp_kind, 'st', 'quarantined', 'since', NOW, 'cr', istr(sum),
        'le', A.fp_le, 'lj', A.fp_lj)
      redis.call('SADD', K('fprs'), fp)
    end
  elseif st and tonumber(A.fp_add) ~= 0 then
    redis.call('HINCRBY', key, 'cr', tonumber(A.fp_add))
    redis.call('HSET', key, 'le', A.fp_le, 'lj', A.fp_lj)
  end
  if A.h == '1' then
    local from = set(split(A.h_from))
    for _, id in ipairs(redis.call('SMEMBERS', K('fpj', fp))) do
      local H = load(id)
      if H and from[H.s] then
        local HO = copy(H)
        H.s = A.h_to; H.rs = A.h_reason; H.fin = NOW; H.sca = NOW
        bump(H)
        commit(HO, H, true)
        event(id, A.h_kind, A.h_actor, HO.s, A.h_to, H.a, A.h_msg)
      end
    end
  end
end
` + luaFinishWorkflow + `
return out(J, true)
`)

// luaScheduleDue moves scheduled and retryable jobs whose time has come to
// available (JobScheduleDue).
//
// ARGV[4] the target state, ARGV[5] the limit, ARGV[6] the from-states in
// order, joined by US.
//
// Returns the queues that got work (with repeats).
//
// The index writes are gathered (ZB): each index key is written once for
// the batch. Each due set is read once, before any of them is written.
var luaScheduleDue = script(`
ZB = {}
local to, limit = ARGV[4], tonumber(ARGV[5])
local moved, queues = 0, {}
for _, from in ipairs(split(ARGV[6])) do
  if moved >= limit then break end
  local ms = redis.call('ZRANGEBYLEX', K('due', from), '-', '(' .. NOW1, 'LIMIT', 0, limit - moved)
  for _, m in ipairs(ms) do
    local J = load(string.sub(m, 21))
    if J and J.s == from then
      local O = copy(J)
      J.s = to; J.sca = NOW
      bump(J)
      commit(O, J, true)
      moved = moved + 1
      queues[#queues + 1] = J.q
    end
  end
end
return queues
`)

// luaDeleteExpired deletes terminal jobs past their retention
// (JobDeleteExpired).
//
// ARGV[4] the limit; then 4 values per sweep: state, retention ("s:ns";
// "0:0" deletes everything), queue ("" for every queue but the ones
// listed next), queues excluded (joined by US).
//
// Returns how many jobs were deleted.
var luaDeleteExpired = script(`
local limit = tonumber(ARGV[4])
local total = 0
for i = 5, #ARGV, 4 do
  if total >= limit then break end
  local st, ret, q, excl = ARGV[i], ARGV[i + 1], ARGV[i + 2], set(split(ARGV[i + 3]))
  local cut = NOW1
  if ret ~= '0:0' then
    local c = string.find(ret, ':', 1, true)
    local s, ns = -tonumber(string.sub(ret, 1, c - 1)), -tonumber(string.sub(ret, c + 1))
    if ns < 0 then ns = ns + 1000000000; s = s - 1 end
    cut = tadd(istr(s) .. ':' .. istr(ns))
  end
  -- A state without st (NOST) is walked by its queue and kind sets, the
  -- excluded queues (which have retentions of their own) left out.
  local keys = {K('st', st)}
  if NOST[st] then
    keys = {}
    for _, pk in ipairs(redis.call('SMEMBERS', K('qk'))) do
      local qq = split(pk)[1]
      if (q == '' or qq == q) and not excl[qq] then keys[#keys + 1] = K('sqk', st, pk) end
    end
  elseif q ~= '' then keys = {K('sq', st, q)} end
  for _, key in ipairs(keys) do
    local skipped = 0
    while total < limit do
      local ms = redis.call('ZRANGEBYLEX', key, '-', '(' .. cut, 'LIMIT', skipped, math.min(500, limit - total + 50))
      if #ms == 0 then break end
      for _, m in ipairs(ms) do
        if total >= limit then break end
        local J = load(string.sub(m, 21))
        if J and J.s == st and not excl[J.q] and J.fin ~= '' and J.fin < cut then
          remove(J, true)
          total = total + 1
        else
          skipped = skipped + 1
        end
      end
    end
  end
end
return total
`)

// luaAction applies one operator action's spec to one job (JobAction).
//
// ARGV[4...] name/value pairs: id; the spec as s_from (states joined by
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
if not S.from[J.s] then return redis.error_reply('STATE ' .. J.s) end
if S.rsuper and J.sb ~= '' and A.force ~= '1' then return redis.error_reply('SUPER ' .. J.sb) end
if S.rquar and quarantined(J.fp) then return redis.error_reply('QUAR ' .. J.fp) end
local O = copy(J)
if S.del then
  remove(J, true)
  idem_record('')
  return {}
end
apply(J, S, A.deadline)
commit(O, J, true)
if A.ev == '1' then event(J.id, A.ev_kind, A.ev_actor, O.s, A.ev_to, O.a, A.ev_msg) end
idem_record(rec(J, false))
return out(J, false)
`)

// luaUpdatePayload replaces a job's payload and fingerprint
// (JobUpdatePayload).
//
// ARGV[4...] name/value pairs: id, payload, fp, version, running (the
// state that refuses the edit), ev_kind, ev_actor, ev_msg.
//
// Returns the job as written. Errors: "NOTFOUND", "STATE <state>",
// "VERSION <version>".
var luaUpdatePayload = script(`
local A = args(4)
local J = load(A.id)
if not J then return redis.error_reply('NOTFOUND') end
if J.s == A.running then return redis.error_reply('STATE ' .. J.s) end
if J.v ~= A.version then return redis.error_reply('VERSION ' .. J.v) end
if J.fp ~= '' then redis.call('SREM', K('fpj', J.fp), J.id) end
J.p = A.payload; J.fp = A.fp
if J.fp ~= '' then redis.call('SADD', K('fpj', J.fp), J.id) end
bump(J)
redis.call('HSET', K('job', J.id), 'p', J.p, 'fp', J.fp, 'v', J.v)
event(J.id, A.ev_kind, A.ev_actor, J.s, J.s, J.a, A.ev_msg)
idem_record(rec(J, true))
return out(J, true)
`)

// luaRetryWithInput inserts the corrected copy of a finished job and marks
// the original superseded (JobRetryCopy).
//
// ARGV[4...] name/value pairs: id, newid, payload, fp, allowed (the states
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
if not set(split(A.allowed))[J.s] then return redis.error_reply('STATE ' .. J.s) end
if quarantined(A.fp) then return redis.error_reply('QUAR ' .. A.fp) end
if redis.call('EXISTS', K('job', A.newid)) == 1 then return redis.error_reply('CONFLICT') end
local C = {id = A.newid, q = J.q, k = J.k, p = A.payload, sv = J.sv, m = J.m, tg = J.tg, pr = J.pr, s = A.to,
  a = '0', ma = J.ma, c = '0', fp = A.fp, f = '0', sch = NOW, dl = '', to = J.to, cr = NOW, ata = '', atb = '',
  sca = NOW, fin = '', rs = '', lid = '', lw = '', lx = '', v = '1', cp = '', dlo = '', ro = J.id, sb = '',
  le = '', ep = ''}
create(C)
J.sb = A.newid
bump(J)
redis.call('HSET', K('job', J.id), 'sb', J.sb, 'v', J.v)
redis.call('SADD', K('sup'), J.id)
event(J.id, A.o_kind, A.o_actor, J.s, J.s, J.a, A.o_msg)
event(C.id, A.c_kind, A.c_actor, '', A.c_to, '0', A.c_msg)
idem_record(rec(C, true))
return out(C, true)
`)

// luaRelease lifts a fingerprint's quarantine: the record goes on
// probation and its jobs in the spec's from-states get the spec's write
// (FingerprintRelease).
//
// ARGV[4...] name/value pairs: fp; the spec (s_ prefix, as luaAction);
// ev_kind, ev_actor, ev_to, ev_msg.
//
// Returns how many jobs were released. Errors: "NOTFOUND".
var luaRelease = script(`
local A = args(4)
local S = spec(A, 's_')
local key = K('fpr', A.fp)
if redis.call('EXISTS', key) == 0 then return redis.error_reply('NOTFOUND') end
redis.call('HSET', key, 'st', 'probation')
local n = 0
for _, from in ipairs(split(A.s_from)) do
  for _, id in ipairs(redis.call('SMEMBERS', K('fpj', A.fp))) do
    local J = load(id)
    if J and J.s == from then
      local O = copy(J)
      apply(J, S, '')
      commit(O, J, true)
      event(id, A.ev_kind, A.ev_actor, from, A.ev_to, O.a, A.ev_msg)
      n = n + 1
    end
  end
end
idem_record('N' .. n)
return n
`)

// luaPause records a queue as paused or resumed (QueuePause, QueueResume).
//
// ARGV[4] the queue, ARGV[5] "1" paused or "0" resumed, ARGV[6] the actor.
//
// Returns 1.
var luaPause = script(`
redis.call('HSET', K('paused'), ARGV[4], ARGV[5])
redis.call('HSET', K('pausedby'), ARGV[4], NOW .. US .. ARGV[6])
idem_record('')
return 1
`)

// luaHeartbeat records that a worker process lives (WorkerHeartbeat).
//
// ARGV[4] id, ARGV[5] host, ARGV[6] pid, ARGV[7] queues (JSON), ARGV[8]
// TTL ("s:ns").
//
// Returns 1.
var luaHeartbeat = script(`
local key = K('w', ARGV[4])
if redis.call('HEXISTS', key, 'st') == 0 then redis.call('HSET', key, 'st', NOW) end
redis.call('HSET', key, 'host', ARGV[5], 'pid', ARGV[6], 'qs', ARGV[7], 'hb', NOW, 'x', tadd(ARGV[8]))
redis.call('SADD', K('workers'), ARGV[4])
return 1
`)

// luaWorkerDelete removes a worker's record (WorkerDelete).
//
// ARGV[4] id. Returns 1.
var luaWorkerDelete = script(`
redis.call('DEL', K('w', ARGV[4]))
redis.call('SREM', K('workers'), ARGV[4])
return 1
`)

// luaLeader takes or renews a maintenance lease (LeaderAttempt).
//
// ARGV[4] name, ARGV[5] holder, ARGV[6] TTL ("s:ns").
//
// Returns 1 when holder leads, 0 otherwise.
var luaLeader = script(`
local key = K('lead', ARGV[4])
local h = redis.call('HMGET', key, 'holder', 'x')
if h[1] and h[1] ~= ARGV[5] and h[2] >= NOW then return 0 end
redis.call('HSET', key, 'holder', ARGV[5], 'x', tadd(ARGV[6]))
return 1
`)

// luaResign gives a maintenance lease up (LeaderResign).
//
// ARGV[4] name, ARGV[5] holder. Returns 1.
var luaResign = script(`
local key = K('lead', ARGV[4])
if redis.call('HGET', key, 'holder') == ARGV[5] then redis.call('DEL', key) end
return 1
`)

// luaReconcile recounts the counters from the indexes of the jobs: the
// per-queue state sets, the queue-and-kind sets of the states without
// them (NOST), and the lease set (running) (JobCountReconcile).
//
// ARGV[4] the states, joined by US. Returns 1.
var luaReconcile = script(`
local qs = {}
for _, q in ipairs(redis.call('SMEMBERS', K('queues'))) do qs[q] = true end
for _, f in ipairs(redis.call('HKEYS', K('counts'))) do qs[split(f)[1]] = true end
redis.call('DEL', K('counts'))
local function add(q, s, n) if n > 0 then redis.call('HINCRBY', K('counts'), q .. US .. s, n) end end
local qks = redis.call('SMEMBERS', K('qk'))
for _, s in ipairs(split(ARGV[4])) do
  if NOST[s] then
    for _, pk in ipairs(qks) do add(split(pk)[1], s, redis.call('ZCARD', K('sqk', s, pk))) end
  elseif s ~= 'running' then
    for q in pairs(qs) do add(q, s, redis.call('ZCARD', K('sq', s, q))) end
  end
end
for _, m in ipairs(redis.call('ZRANGE', K('run'), 0, -1)) do
  local q = redis.call('HGET', K('job', string.sub(m, 21)), 'q')
  if q then add(q, 'running', 1) end
end
return 1
`)

// luaMigratePairs moves a chunk of a queue's sq set of a state without st
// (NOST), with the jobs' entries in that state's sk sets, into the
// queue-and-kind sets of schema version 4 (openSchema, from version 3 or
// older). A chunk keeps the script short on a large namespace.
//
// ARGV[4] the state, ARGV[5] the queue, ARGV[6] the chunk's size.
//
// Returns how many members the queue's sq set still holds.
// luaRegroupError moves one job from error pattern ARGV[5] to ARGV[6]
// (schema version 5): its eg and egi entries, both groups' counts and its
// ep field, read and written in one script so that no transition of the
// job falls between. A job whose pattern is no longer ARGV[5] is left.
var luaRegroupError = script(`
local id, from, to = ARGV[4], ARGV[5], ARGV[6]
local key = K('job', id)
local h = redis.call('HMGET', key, 's', 'q', 'k', 'ep', 'sca')
if not h[1] or h[4] ~= from then return 0 end
local pre = h[1] .. US .. h[2] .. US .. h[3] .. US
local m = h[5] .. ':' .. id
local gf, gt = pre .. from, pre .. to
redis.call('ZREM', K('eg', gf), m)
redis.call('ZREM', K('egi', gf), id)
egcount(gf, -1)
redis.call('ZADD', K('eg', gt), 0, m)
redis.call('ZADD', K('egi', gt), 0, id)
egcount(gt, 1)
redis.call('HSET', key, 'ep', to)
return 1
`)

var luaMigratePairs = script(`
local st, q, limit = ARGV[4], ARGV[5], tonumber(ARGV[6])
local key = K('sq', st, q)
local ms = redis.call('ZRANGE', key, 0, limit - 1)
for _, m in ipairs(ms) do
  local k = redis.call('HGET', K('job', string.sub(m, 21)), 'k')
  if k then
    redis.call('ZADD', pairkey(st, q, k), 0, m)
    redis.call('ZREM', K('sk', st, k), m)
  end
end
if #ms > 0 then redis.call('ZREM', key, unpack(ms)) end
return redis.call('ZCARD', key)
`)
