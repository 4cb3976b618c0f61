package redis

// The scripts of bulk operations and idempotency keys. Operations are
// hashes at {ns}:op:ID (fields: id, act, sel, st, by, cr, sa, fa, mt, pc,
// sc, fl, er, rt, cur, lh, lf, lx, and zp, what the last batch's index
// writes cost, see luaOpBatch), listed by {ns}:ops and, while pending
// or running, {ns}:opa (both "created:id" members).

// luaOpInsert persists a new pending operation (OperationInsert).
//
// ARGV[4...] name/value pairs: id, act, sel (the selector as JSON), by,
// mt (matched), rt (rate).
//
// Returns the operation's fields. Errors: "CONFLICT".
var luaOpInsert = script(`
local A = args(4)
if redis.call('EXISTS', K('op', A.id)) == 1 then return redis.error_reply('CONFLICT') end
local O = {id = A.id, act = A.act, sel = A.sel, st = 'pending', by = A.by, cr = NOW, sa = '', fa = '',
  mt = A.mt, pc = '0', sc = '0', fl = '0', er = '', rt = A.rt, cur = '', lh = '', lf = '0', lx = ''}
saveop(O)
redis.call('ZADD', K('ops'), 0, NOW .. ':' .. A.id)
redis.call('ZADD', K('opa'), 0, NOW .. ':' .. A.id)
idem_record('O' .. enc(opflat(O)))
return opflat(O)
`)

// luaOpCancel marks a pending or running operation cancelled
// (OperationCancel).
//
// ARGV[4] id, ARGV[5] the message recorded as its error.
//
// Returns the operation's fields. Errors: "NOTFOUND", "STATE <status>".
var luaOpCancel = script(`
local O = loadop(ARGV[4])
if not O then return redis.error_reply('NOTFOUND') end
if O.st ~= 'pending' and O.st ~= 'running' then return redis.error_reply('STATE ' .. O.st) end
O.st = 'cancelled'; O.fa = NOW; O.er = ARGV[5]; O.lh = ''; O.lx = ''
saveop(O)
redis.call('ZREM', K('opa'), O.cr .. ':' .. O.id)
idem_record('O' .. enc(opflat(O)))
return opflat(O)
`)

// luaOpClaim leases the oldest pending or running operation whose lease is
// free or expired (OperationClaim).
//
// ARGV[4] holder, ARGV[5] TTL ("s:ns").
//
// Returns the operation's fields, or {} when there is none.
var luaOpClaim = script(`
for _, m in ipairs(redis.call('ZRANGEBYLEX', K('opa'), '-', '+')) do
  local O = loadop(string.sub(m, 21))
  if O and (O.st == 'pending' or O.st == 'running') and (O.lh == '' or O.lx <= NOW) then
    O.lh = ARGV[4]; O.lf = istr(tonumber(O.lf) + 1); O.lx = tadd(ARGV[5]); O.st = 'running'
    if O.sa == '' then O.sa = NOW end
    saveop(O)
    return opflat(O)
  end
end
return {}
`)

// luaOpFinish sets a running operation's status and error, fenced on its
// lease (OperationFinish).
//
// ARGV[4...] name/value pairs: id, st (the status), final ("1" sets
// finished_at), er ("" keeps the error), holder, fence.
//
// Returns the operation's fields. Errors: "LEASE".
var luaOpFinish = script(`
local A = args(4)
local O = loadop(A.id)
if not O or O.st ~= 'running' or O.lh ~= A.holder or O.lf ~= A.fence then return redis.error_reply('LEASE') end
O.st = A.st
if A.final == '1' then
  O.fa = NOW
  redis.call('ZREM', K('opa'), O.cr .. ':' .. O.id)
end
if A.er ~= '' then O.er = A.er end
saveop(O)
return opflat(O)
`)

// luaOpBatch applies one batch of a bulk operation, fenced on its lease
// and cursor (OperationProcessBatch).
//
// ARGV[4...] name/value pairs: id, holder, fence, after (the cursor),
// limit, window, budget (microseconds of the server's time the whole
// script may take: its walk, index writes included, stops at seven
// eighths of it), ttl ("s:ns"), cutoff (a time); the spec (s_ prefix,
// as luaAction); the selector's indexed conditions f_states, f_queues,
// f_kinds, f_ids (joined by US), f_fp, f_ep, f_ca, f_cb, f_fa, f_fb
// (times or ""), f_sup ("1" takes superseded jobs in); f_more ("1": the
// selector has conditions only the Go side evaluates, whose verdicts
// f_verdicts lists as id US version US 0|1 records joined by RS); and the
// event ev ("1") with ev_kind, ev_actor, ev_to, ev_msg.
//
// The window is the next ids past the cursor among all jobs, or, for a
// selector with an error pattern, among the jobs of the error groups it
// names (their id sets, {ns}:egi:GROUP). Each job of the window is read
// once (HMGET of the fields the selector, the spec, the event and the
// indexes need: never its payload, metadata, tags, checkpoint or error
// text), judged and, when it matches, written at once; its index writes
// are gathered and written once per key (ZB) when the walk ends, timed.
// The walk stops early, its cursor at the last job it looked at, once
// the time it has run plus what its gathered index writes will take (at
// the rate the operation's previous batch measured, zp; an operation's
// first batch writes and times its first eight jobs' entries) passes its
// share of the budget (checked with TIME every 8 jobs), so that it never
// blocks the server for long whatever the load, and no job it read is
// read again by the next batch.
// A job of a Go-judged selector whose version moved since its verdict
// ends the batch before it (the next batch judges it again), or, when the
// batch has written nothing yet, is refused as "RETRY".
//
// Returns {"over", op} for an operation that is no longer running, or
// {"ok", op, cursor, exhausted (0|1), refused (id US fingerprint ...)}.
// Errors: "NOTFOUND", "LEASE", "RETRY" (a job changed since the Go side
// judged it: nothing was written, run the batch again).
var luaOpBatch = script(`
local A = args(4)
local O = loadop(A.id)
if not O then return redis.error_reply('NOTFOUND') end
if O.st == 'cancelled' or O.st == 'completed' or O.st == 'failed' then return {'over', opflat(O)} end
if O.st ~= 'running' or O.lh ~= A.holder or O.lf ~= A.fence or O.cur ~= A.after then
  return redis.error_reply('LEASE')
end
local S = spec(A, 's_')
local limit, window = tonumber(A.limit), tonumber(A.window)
local min = '-'
if A.after ~= '' then min = '(' .. A.after end
local states = set(split(A.f_states))
local queues, kinds, ids = split(A.f_queues), split(A.f_kinds), split(A.f_ids)
local qs, ks, is = set(queues), set(kinds), set(ids)
-- groups: for an error group selector, the id sets (egi) of the groups
-- it names, so a group's bulk retry reads its own jobs. Each is read a
-- chunk at a time like the ids below, and nextid merges their heads (a
-- job is in one group only). Reading the window whole (ten batches of
-- ids) and sorting it cost about 9 ms a script, which left the budget
-- room for eight jobs: 700 jobs/s and every script in the slow log.
local groups
if A.f_ep ~= '' then
  groups = {}
  for _, g in ipairs(redis.call('HKEYS', K('egc'))) do
    local f = split(g)
    if f[4] == A.f_ep and states[f[1]] and (#queues == 0 or qs[f[2]]) and (#kinds == 0 or ks[f[3]]) then
      groups[#groups + 1] = {key = K('egi', g), from = min, buf = {}, i = 1, size = 16, done = false}
    end
  end
end
local function groupnext()
  local best, bg = nil, nil
  for _, G in ipairs(groups) do
    if G.i > #G.buf and not G.done then
      G.buf = redis.call('ZRANGEBYLEX', G.key, G.from, '+', 'LIMIT', 0, G.size)
      G.done = #G.buf < G.size
      G.size = math.min(G.size * 2, 256)
      G.i = 1
      if #G.buf > 0 then G.from = '(' .. G.buf[#G.buf] end
    end
    local id = G.buf[G.i]
    if id and (best == nil or id < best) then best, bg = id, G end
  end
  if bg then bg.i = bg.i + 1 end
  return best
end
-- nextid is the window's next id (nil past its end). All jobs' ids are
-- read a chunk at a time: a batch that stops early has not paid for the
-- whole window.
local chunk, ci, from, scanned, csize = {}, 0, min, 0, 16
local function nextid()
  if scanned >= window then return nil end
  if groups then return groupnext() end
  ci = ci + 1
  if ci > #chunk then
    -- Chunks of 16, 32, ... 256 ids: a batch that stops early has read
    -- few ids past its end.
    chunk = redis.call('ZRANGEBYLEX', K('ids'), from, '+', 'LIMIT', 0, math.min(csize, window - scanned))
    csize = math.min(csize * 2, 256)
    ci = 1
    if #chunk == 0 then return nil end
    from = '(' .. chunk[#chunk]
  end
  return chunk[ci]
end
local verdicts = {}
if A.f_more == '1' then
  for _, r in ipairs(split(A.f_verdicts, RS)) do
    local f = split(r)
    verdicts[f[1]] = {f[2], f[3] == '1'}
  end
end
-- The budget is the whole script's. The index writes are most of a
-- retry's time (a member out of a set of a million, and into another):
-- unseen by the clock until written, they took from one to seven times
-- the walk's own time. Written every eight jobs so that the clock saw
-- them, they cost a call per key each time, most of the calls a job
-- made. So they are written once, when the walk ends, and timed: per,
-- microseconds a gathered write, the calls' own cost included, kept in
-- the operation's row (zp) for its next batch. The walk stops when its
-- time so far and its gathered writes' predicted time pass seven eighths
-- of the budget, leaving the rest for the operation's row and the
-- misprediction. An operation's first batch times its first eight jobs'
-- writes instead.
local budget = tonumber(A.budget) * 7 / 8
local function elapsed()
  local t = redis.call('TIME')
  return (tonumber(t[1]) - NOW_S) * 1000000 + tonumber(t[2]) - NOW_NS / 1000
end
local per = tonumber(O.zp or '')
local function timedflush()
  local n, t0 = ZBN, elapsed()
  flushz()
  local t1 = elapsed()
  per = (t1 - t0) / math.max(n, 1)
  return t1
end
local function late()
  if per == nil then return timedflush() > budget end
  return elapsed() + ZBN * per > budget
end
-- Each job is read once, with only the fields the selector, the spec,
-- the event and the indexes need (not its payload, metadata, tags,
-- checkpoint or error text), judged, and written at once: its index
-- writes are gathered and written once per key when the script ends (ZB).
-- Fields a spec only sets or clears (lid, lw, rs; fin and cr unless the
-- selector tests them) are not read: commit then writes them whatever
-- the job held, which is the same change.
local BF = {'id', 'q', 'k', 'pr', 's', 'a', 'ma', 'c', 'fp', 'sch', 'dl', 'sca', 'lx', 'v', 'sb', 'ep'}
if A.f_ca ~= '' or A.f_cb ~= '' then BF[#BF + 1] = 'cr' end
if A.f_fa ~= '' or A.f_fb ~= '' then BF[#BF + 1] = 'fin' end
local function loadb(id)
  local r = redis.call('HMGET', K('job', id), unpack(BF))
  if not r[1] then return nil end
  local J = {}
  for i, f in ipairs(BF) do J[f] = r[i] or DEF[f] or '' end
  return J
end
-- Quarantined fingerprints: the few quarantine records are read once
-- (not one lookup per job); many are looked up per fingerprint, once.
local quar, qall = {}, false
if S.rquar and redis.call('SCARD', K('fprs')) <= 256 then
  qall = true
  for _, fp in ipairs(redis.call('SMEMBERS', K('fprs'))) do quar[fp] = quarantined(fp) end
end
local refused, n, stopped, last, lastfound = {}, 0, false, nil, nil
local OVER = {}
ZB = {}
while true do
  if n + #refused / 2 >= limit then stopped = true; break end
  if scanned > 0 and scanned % 8 == 0 and late() then stopped = true; break end
  local id = nextid()
  if id == nil then break end
  local J = loadb(id)
  local ok = J ~= nil and states[J.s] and J.sca <= A.cutoff
  if ok and #queues > 0 then ok = qs[J.q] end
  if ok and #kinds > 0 then ok = ks[J.k] end
  if ok and #ids > 0 then ok = is[J.id] end
  if ok and A.f_fp ~= '' then ok = J.fp == A.f_fp end
  if ok and A.f_ep ~= '' then ok = J.ep == A.f_ep end
  if ok and A.f_ca ~= '' then ok = J.cr > A.f_ca end
  if ok and A.f_cb ~= '' then ok = J.cr < A.f_cb end
  if ok and A.f_fa ~= '' then ok = J.fin ~= '' and J.fin > A.f_fa end
  if ok and A.f_fb ~= '' then ok = J.fin ~= '' and J.fin < A.f_fb end
  if ok and A.f_sup ~= '1' then ok = J.sb == '' end
  if ok and A.f_more == '1' then
    local v = verdicts[id]
    if v == nil or v[1] ~= J.v then
      -- Changed since the Go side judged it: the batch ends before it
      -- (the next one judges it again), or, having written nothing,
      -- is run again.
      if n == 0 and #refused == 0 then return redis.error_reply('RETRY') end
      stopped = true
      break
    end
    ok = v[2]
  end
  scanned, last = scanned + 1, id
  if ok then
    lastfound = id
    local fp = J.fp
    local q = false
    if S.rquar and fp ~= '' then
      q = quar[fp]
      if q == nil then
        q = false
        if not qall then q = quarantined(fp) end
        quar[fp] = q
      end
    end
    if q then
      refused[#refused + 1] = J.id
      refused[#refused + 1] = fp
    else
      if A.ev == '1' then event(J.id, A.ev_kind, A.ev_actor, J.s, A.ev_to, J.a, A.ev_msg) end
      if S.del then
        remove(J, true)
      else
        -- The job after the change is the writes over J as read (OVER):
        -- commit then compares only the fields apply wrote, and no job
        -- is copied field by field.
        OVER.__index = J
        local N = setmetatable({}, OVER)
        apply(N, S, '')
        commit(J, N, true)
      end
      n = n + 1
    end
  end
end
local cursor, done = A.after, 0
if stopped or scanned == window then cursor = last or A.after
else
  if lastfound then cursor = lastfound end
  done = 1
end
if ZBN > 0 then
  timedflush()
  O.zp = string.format('%.3f', per)
end
local nr = #refused / 2
O.pc = istr(tonumber(O.pc) + n + nr); O.sc = istr(tonumber(O.sc) + n); O.fl = istr(tonumber(O.fl) + nr)
O.cur = cursor; O.lx = tadd(A.ttl)
saveop(O)
return {'ok', opflat(O), cursor, done, refused}
`)

// Idempotency records are hashes at {ns}:idem:KEY (fields: h, st
// ("in_flight" or "done"), tok, cx (claim expiry), cr, x (expiry), resp),
// their steps a hash at {ns}:idems:KEY (step -> result), and
// {ns}:idemx lists records by expiry ("expiry:key" members).

// luaIdemClaim claims a key (IdempotencyClaim).
//
// ARGV[4] key, ARGV[5] request hash, ARGV[6] token, ARGV[7] TTL, ARGV[8]
// claim TTL (both "s:ns").
//
// Returns {"new", expiry}, {"done", expiry, response} or {"take", expiry,
// steps (step, result, ...)}. Errors: "MISMATCH", "INFLIGHT <claim
// expiry>".
var luaIdemClaim = script(`
local key, skey = K('idem', ARGV[4]), K('idems', ARGV[4])
local h = redis.call('HMGET', key, 'h', 'st', 'cx', 'x', 'resp')
if not h[4] or h[4] <= NOW then
  if h[4] then redis.call('ZREM', K('idemx'), h[4] .. ':' .. ARGV[4]) end
  redis.call('DEL', key, skey)
  local x = tadd(ARGV[7])
  redis.call('HSET', key, 'h', ARGV[5], 'st', 'in_flight', 'tok', ARGV[6], 'cx', tadd(ARGV[8]), 'cr', NOW, 'x', x, 'resp', '')
  redis.call('ZADD', K('idemx'), 0, x .. ':' .. ARGV[4])
  return {'new', x}
end
if h[1] ~= ARGV[5] then return redis.error_reply('MISMATCH') end
if h[2] == 'done' then return {'done', h[4], h[5]} end
if h[3] > NOW then return redis.error_reply('INFLIGHT ' .. h[3]) end
redis.call('HSET', key, 'tok', ARGV[6], 'cx', tadd(ARGV[8]))
return {'take', h[4], redis.call('HGETALL', skey)}
`)

// luaIdemRenew extends a claim (IdempotencyRenew).
//
// ARGV[4] key, ARGV[5] token, ARGV[6] claim TTL ("s:ns").
//
// Returns 1. Errors: "LOST".
var luaIdemRenew = script(`
local key = K('idem', ARGV[4])
local h = redis.call('HMGET', key, 'st', 'tok')
if h[1] ~= 'in_flight' or h[2] ~= ARGV[5] then return redis.error_reply('LOST') end
redis.call('HSET', key, 'cx', tadd(ARGV[6]))
return 1
`)

// luaIdemComplete stores a claimed request's response and ends the claim
// (IdempotencyComplete).
//
// ARGV[4] key, ARGV[5] token, ARGV[6] response.
//
// Returns 1. Errors: "LOST".
var luaIdemComplete = script(`
local key = K('idem', ARGV[4])
local h = redis.call('HMGET', key, 'st', 'tok')
if h[1] ~= 'in_flight' or h[2] ~= ARGV[5] then return redis.error_reply('LOST') end
redis.call('HSET', key, 'st', 'done', 'tok', '', 'cx', '0000000000000000000', 'resp', ARGV[6])
redis.call('DEL', K('idems', ARGV[4]))
return 1
`)

// luaIdemRelease gives a claim up: the record goes when no step was
// committed under it, else its claim expires now (IdempotencyRelease).
//
// ARGV[4] key, ARGV[5] token.
//
// Returns 1. Errors: "LOST".
var luaIdemRelease = script(`
local key = K('idem', ARGV[4])
local h = redis.call('HMGET', key, 'st', 'tok', 'x')
if h[1] ~= 'in_flight' or h[2] ~= ARGV[5] then return redis.error_reply('LOST') end
if redis.call('EXISTS', K('idems', ARGV[4])) == 0 then
  redis.call('DEL', key)
  redis.call('ZREM', K('idemx'), h[3] .. ':' .. ARGV[4])
else
  redis.call('HSET', key, 'cx', '0000000000000000000')
end
return 1
`)

// luaIdemSweep deletes expired records; one whose live claim outlasts its
// expiry is left until the claim ends (IdempotencyDeleteExpired).
//
// ARGV[4] the limit. Returns how many records were deleted.
var luaIdemSweep = script(`
local limit = tonumber(ARGV[4])
local n, skipped = 0, 0
while n < limit do
  local ms = redis.call('ZRANGEBYLEX', K('idemx'), '-', '(' .. NOW1, 'LIMIT', skipped, limit - n)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    local k = string.sub(m, 21)
    local h = redis.call('HMGET', K('idem', k), 'st', 'cx')
    if h[1] == false or h[1] == 'done' or h[2] <= NOW then
      redis.call('DEL', K('idem', k), K('idems', k))
      redis.call('ZREM', K('idemx'), m)
      n = n + 1
    else
      skipped = skipped + 1
    end
  end
end
return n
`)
