package redis

// The Lua side of the store. Every transition is one script: the job
// hash's field list (luaPrelude, fields.go), the shared library (luaLib)
// and the script's body, which sits beside the Go function that runs it.
// Each script takes
//
//	KEYS[1] the namespace's schema key, {ns}:schema. Every other key the
//	        script touches is derived from it by prefix ({ns}:...), so it
//	        carries the same hash tag and lives in the same cluster slot.
//	ARGV[1] ARGV[2] ARGV[3] the idempotency key, claim token and step the
//	        write runs under ("" when none): the claim is checked before
//	        anything is written, and the step is recorded after the write,
//	        in the same script.
//	ARGV[4...] the script's own arguments, listed on each: name/value
//	        pairs read into A (args), or a batch's head and records at
//	        offsets Go constants name (batchLayout).
//	ARGV[#ARGV] the audit record the write appends ("" when none): luaLib
//	        takes it off ARGV before the script's body runs, and the
//	        script appends it to {ns}:audit after a body that did not
//	        refuse, so the action and its record are one script.
//
// A script reads and writes a hash's fields by the names its table gives
// (J[F.state], HMGET key F.state ...), never by a literal name
// (TestScriptsNameFieldsByTable): the tables are the Go constants the Go
// side reads the hashes by, and script puts each name in place of its
// reference when the script is built (expandRefs), so the compiled
// script holds the same constants a literal would.
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
  local h = redis.call('HMGET', K('idem', IK), IF.status, IF.token)
  if h[1] ~= 'in_flight' or h[2] ~= ITOK then return 'IDEMHELD' end
  if redis.call('HEXISTS', K('idems', IK), ISTEP) == 1 then return 'IDEMSTEP' end
  return nil
end
local function idem_record(res)
  if IK ~= '' then redis.call('HSET', K('idems', IK), ISTEP, res) end
end

-- Jobs are hashes at {ns}:job:ID, their fields F (FIELDS, DEF: fields.go).
-- Empty fields are not stored (a job hash holds what it has), nor (since
-- schema version 2) the fields of DEF at their default; load gives every
-- field, its default or '' when absent. A hash of version 1, which
-- stored the defaults, reads the same.
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
    if v ~= '' and v ~= DEF[k] and (payload or k ~= F.payload) then r[#r + 1] = k; r[#r + 1] = v end
  end
  return r
end
local function errs(id) return redis.call('LRANGE', K('err', id), 0, -1) end
local function out(J, payload) return {flat(J, payload), errs(J[F.id])} end
local function rec(J, payload) return 'J' .. enc({enc(flat(J, payload)), enc(errs(J[F.id]))}) end

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
-- Unique keys: {ns}:uq:KEY names the job holding KEY, and holds it only
-- while that job's state has its bit in the job's unique_states mask. A
-- move out of the holding states through commit or remove gives the
-- name up at once; one that does not (the hot paths of the claim and the
-- completion) leaves a name uholder reads as free, because it checks the
-- named job's state every time, in the same script as the write it
-- guards.
local function uholds(st, mask) return bit.band(tonumber(mask) or 0, UBIT[st] or 0) ~= 0 end
local function uholder(key)
  local id = redis.call('GET', K('uq', key))
  if not id then return nil end
  local h = redis.call('HMGET', K('job', id), F.state, F.unique_states, F.unique_key)
  if h[1] and h[3] == key and uholds(h[1], h[2]) then return id end
  return nil
end
-- umove gives up or takes O's key as its move to J's state says (a move
-- into the holding states was checked by its script first).
local function umove(O, J)
  local key = O[F.unique_key]
  if uholds(J[F.state], J[F.unique_states]) then
    if not uholds(O[F.state], O[F.unique_states]) then redis.call('SET', K('uq', key), J[F.id]) end
  elseif redis.call('GET', K('uq', key)) == O[F.id] then
    redis.call('DEL', K('uq', key))
  end
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
  local id, s = J[F.id], J[F.state]
  local m = J[F.state_changed_at] .. ':' .. id
  -- Running jobs stay out of the state indexes: a claim and a completion
  -- each spare entries, and listings gather the few running jobs from
  -- the lease set.
  if NOST[s] then
    zlex(add, pairkey(s, J[F.queue], J[F.kind]), m)
  elseif s ~= 'running' then
    zlex(add, K('st', s), m)
    zlex(add, K('sq', s, J[F.queue]), m)
    zlex(add, K('sk', s, J[F.kind]), m)
  end
  if J[F.pattern] ~= '' then
    local g = s .. US .. J[F.queue] .. US .. J[F.kind] .. US .. J[F.pattern]
    zlex(add, K('eg', g), m)
    zlex(add, K('egi', g), id)
    egcount(g, add and 1 or -1)
  end
  if s == 'available' then
    local key, am = K('av', J[F.queue], cls(J[F.crash_attempt])), J[F.scheduled_at] .. ':' .. id
    zset(add, key, J[F.priority], am)
    if J[F.deadline] ~= '' then zlex(add, K('dl', J[F.queue]), J[F.deadline] .. ':' .. id) end
  elseif s == 'scheduled' or s == 'retryable' then
    zlex(add, K('due', s), J[F.scheduled_at] .. ':' .. id)
  elseif s == 'running' then
    zlex(add, K('run'), J[F.lease_expires] .. ':' .. id)
    -- rk:KIND: the kind's running jobs, which a claim under the kind's
    -- limit counts (SCARD) rather than reading every running job.
    if add then redis.call('SADD', K('rk', J[F.kind]), id) else redis.call('SREM', K('rk', J[F.kind]), id) end
  end
end
-- commit writes J over O (the job as read): its changed fields and its
-- indexes, and with autocount the counters of the state it moved. J is a
-- changed copy of O, or only the changes with O as its __index (pairs
-- then walks only those).
local function commit(O, J, autocount)
  -- A partial read (a bulk batch's) may lack the key: nil, not ''.
  if (O[F.unique_key] or '') ~= '' and O[F.state] ~= J[F.state] then umove(O, J) end
  index(O, false)
  local a, d = {}, {}
  for k, v in pairs(J) do
    if O[k] ~= v then
      if v == '' then d[#d + 1] = k else a[#a + 1] = k; a[#a + 1] = v end
    end
  end
  if #a > 0 then redis.call('HSET', K('job', J[F.id]), unpack(a)) end
  if #d > 0 then redis.call('HDEL', K('job', J[F.id]), unpack(d)) end
  index(J, true)
  if autocount and (O[F.state] ~= J[F.state] or O[F.queue] ~= J[F.queue]) then count(O[F.queue], O[F.state], -1);
    count(J[F.queue], J[F.state], 1) end
end
-- create writes a new job and its indexes, and counts it. Under ZB (a
-- batch) its index entries, the ids entry among them, are gathered, and
-- each queue is added to queues once per script.
local QSEEN = {}
local function create(J)
  redis.call('HSET', K('job', J[F.id]), unpack(flat(J, true)))
  zlex(true, K('ids'), J[F.id])
  if not QSEEN[J[F.queue]] then redis.call('SADD', K('queues'), J[F.queue]); QSEEN[J[F.queue]] = true end
  if J[F.fingerprint] ~= '' then redis.call('SADD', K('fpj', J[F.fingerprint]), J[F.id]) end
  if (J[F.unique_key] or '') ~= '' then
    redis.call('SADD', K('ukj', J[F.unique_key]), J[F.id])
    redis.call('SADD', K('ukjobs'), J[F.id])
  end
  index(J, true)
  count(J[F.queue], J[F.state], 1)
end
-- remove deletes a job with its timeline, errors and index entries.
local function remove(O, autocount)
  index(O, false)
  redis.call('DEL', K('job', O[F.id]), K('ev', O[F.id]), K('err', O[F.id]), K('sig', O[F.id]))
  redis.call('ZREM', K('ids'), O[F.id])
  if O[F.fingerprint] ~= '' then redis.call('SREM', K('fpj', O[F.fingerprint]), O[F.id]) end
  if O[F.superseded_by] ~= '' then redis.call('SREM', K('sup'), O[F.id]) end
  if (O[F.unique_key] or '') ~= '' then
    redis.call('SREM', K('ukj', O[F.unique_key]), O[F.id])
    redis.call('SREM', K('ukjobs'), O[F.id])
    if redis.call('GET', K('uq', O[F.unique_key])) == O[F.id] then redis.call('DEL', K('uq', O[F.unique_key])) end
  end
  if autocount then count(O[F.queue], O[F.state], -1) end
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
-- smany adds ms to the set key (or removes them), 500 a call.
local function smany(add, key, ms)
  for i = 1, #ms, 500 do
    local a = {}
    for j = i, math.min(i + 499, #ms) do a[#a + 1] = ms[j] end
    if add then redis.call('SADD', key, unpack(a)) else redis.call('SREM', key, unpack(a)) end
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
local function bump(J) J[F.version] = inc(J[F.version]) end
local function quarantined(fp)
  return fp ~= '' and redis.call('HGET', K('fpr', fp), QF.status) == 'quarantined'
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
  J[F.state] = S.to
  if S.onemore then
    local a, ma = tonumber(J[F.attempt]), tonumber(J[F.max_attempts])
    if ma <= a then J[F.max_attempts] = istr(a + 1) end
  end
  if S.reset then J[F.crash_attempt] = '0' end
  if S.schednow then J[F.scheduled_at] = NOW end
  if S.fin then J[F.finalized_at] = NOW; J[F.reason] = S.reason
  elseif S.reopen then J[F.finalized_at] = ''; J[F.reason] = '' end
  if S.clear then J[F.lease_id] = ''; J[F.lease_worker] = ''; J[F.lease_expires] = '' end
  J[F.state_changed_at] = NOW
  bump(J)
  if S.onemore then
    if deadline ~= nil and deadline ~= '' then J[F.deadline] = deadline
    elseif J[F.deadline] ~= '' and J[F.deadline] <= NOW then J[F.deadline] = '' end
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
local function saveop(O) redis.call('HSET', K('op', O[OF.id]), unpack(opflat(O))) end
-- Audit: ARGV's last value is the record the write appends (JSON,
-- backend.AuditWriteFrom; '' for none), taken off ARGV before the body
-- reads it. script appends it after the body, unless the body refused.
local AUD = ARGV[#ARGV]
ARGV[#ARGV] = nil
local function audit_append(rec)
  return redis.call('XADD', K('audit'), '*', 'at', NOW, 'r', rec)
end
local IE = idem_check()
if IE then return redis.error_reply(IE) end
`
