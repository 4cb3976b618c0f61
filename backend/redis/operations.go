package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Bulk operations: persisted, leased, applied batch by batch, each batch
// one script. Operations are hashes at {ns}:op:ID (fields: OF in
// fields.go; zp is what the last batch's index writes cost, see
// luaOpBatch), listed by {ns}:ops and, while pending or running,
// {ns}:opa (both "created:id" members).

const defaultOperationLease = 30 * time.Second

// maxBatchScript is the most jobs one bulk batch script changes, and
// batchScriptBudget the server's time the whole script may take: its walk
// stops at seven eighths of it, its index writes included (see
// luaOpBatch). The budget is measured by the server's clock (TIME), so on
// a loaded machine a script's time includes the time the server waited
// for a core: it then takes fewer jobs. A stall of the machine itself (8
// ms seen here) can still push one past the 10 ms a script may block the
// server (redis_slowlog_ours in scripts/bench deadletter counts them).
const (
	maxBatchScript    = 1000
	batchScriptBudget = 2 * time.Millisecond
)

// A selector with conditions only Go evaluates (goFiltered) is judged
// here, job by job, before its batch's script runs; the script walks as
// far as its budget lets it, a few dozen jobs it writes or a few hundred
// it passes by. Judging the engine's whole window (ten batches of ids)
// each time read about a hundred times the jobs the script then walked:
// a retry by error text on 300,000 archived jobs made no progress in a
// minute (3.3 million job reads). So the window judged follows the walk:
// twice as far as the operation's previous batch got, from
// minVerdictWindow up to the engine's window.
const (
	minVerdictWindow   = 32
	firstVerdictWindow = 128
)

// opRow is an operation hash: the operation and its runner's state.
type opRow struct {
	op     *sluicetype.Operation
	cursor string
	holder string
	fence  int64
}

func opFrom(m map[string]string) (*opRow, error) {
	h := hashReader{m: m}
	op := &sluicetype.Operation{
		ID: m[oID], Action: sluicetype.Action(m[oAction]), Status: sluicetype.OperationStatus(m[oStatus]), CreatedBy: m[oCreatedBy],
		CreatedAt: h.time(oCreatedAt), StartedAt: h.timePtr(oStartedAt), FinishedAt: h.timePtr(oFinished),
		Matched: h.int64(oMatched), Processed: h.int64(oProcessed), Succeeded: h.int64(oSucceeded), Failed: h.int64(oFailed),
		Error: m[oError], Rate: h.int(oRate), StartAt: h.timePtr(oStartAt),
	}
	if sel := m[oSelector]; sel != "" {
		if err := json.Unmarshal([]byte(sel), &op.Selector); err != nil {
			return nil, fmt.Errorf("operation %s: %w", op.ID, fieldErr(oSelector, err))
		}
	}
	row := &opRow{op: op, cursor: m[oCursor], holder: m[oHolder], fence: h.int64(oFence)}
	if h.err != nil {
		return nil, fmt.Errorf("operation %s: %w", op.ID, h.err)
	}
	c, err := backend.DecodeCanary(m[oCanary], m[oCanaryRecent])
	if err != nil {
		return nil, fmt.Errorf("operation %s: %w", op.ID, fieldErr(oCanary, err))
	}
	op.Canary = c
	return row, nil
}

// luaOpInsert persists a new pending operation (OperationInsert).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, act, sel (the selector as JSON), by,
// mt (matched), rt (rate), sw (start time, "" for at once), cy (the
// canary's JSON, "" for none) and cyr (its window's ids, joined by US).
//
// Returns the operation's fields. Errors: "CONFLICT".
var luaOpInsert = script(`
local A = args(4)
if redis.call('EXISTS', K('op', A.id)) == 1 then return redis.error_reply('CONFLICT') end
local O = {[OF.id] = A.id, [OF.action] = A.act, [OF.selector] = A.sel, [OF.status] = 'pending',
  [OF.created_by] = A.by, [OF.created_at] = NOW, [OF.started_at] = '', [OF.finished_at] = '',
  [OF.matched] = A.mt, [OF.processed] = '0', [OF.succeeded] = '0', [OF.failed] = '0', [OF.error] = '',
    [OF.rate] = A.rt, [OF.cursor] = '', [OF.lease_holder] = '', [OF.lease_fence] = '0', [OF.lease_expires] = '',
  [OF.start_at] = A.sw, [OF.canary] = A.cy, [OF.canary_recent] = A.cyr}
saveop(O)
redis.call('ZADD', K('ops'), 0, NOW .. ':' .. A.id)
redis.call('ZADD', K('opa'), 0, NOW .. ':' .. A.id)
idem_record('O' .. enc(opflat(O)))
return opflat(O)
`)

// OperationInsert persists a new pending operation created now.
func (s *Store) OperationInsert(ctx context.Context, p *backend.OperationInsertParams) (*sluicetype.Operation, error) {
	sel, err := json.Marshal(p.Selector)
	if err != nil {
		return nil, fmt.Errorf("redis: operation %s: selector: %w", p.ID, err)
	}
	canary, err := backend.EncodeCanary(p.Canary)
	if err != nil {
		return nil, fmt.Errorf("redis: operation %s: %w", p.ID, err)
	}
	v, err := s.run(ctx, "insert operation "+p.ID, luaOpInsert, "id", p.ID, "act", string(p.Action), "sel", string(sel),
		"by", p.CreatedBy, "mt", strconv.FormatInt(p.Matched, 10), "rt", strconv.Itoa(p.Rate), "sw", tptr(p.StartAt),
		"cy", canary, "cyr", backend.EncodeRecent(p.Canary))
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "CONFLICT" {
			return nil, fmt.Errorf("insert operation %s: %w: the id exists", p.ID, sluicetype.ErrConflict)
		}
		return nil, err
	}
	r, err := opFrom(fieldMap(v))
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// OperationGet returns one operation or ErrNotFound.
func (s *Store) OperationGet(ctx context.Context, p *backend.OperationGetParams) (*sluicetype.Operation, error) {
	m, err := s.c.HGetAll(ctx, s.key("op", p.ID)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: operation %s: %w", p.ID, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrNotFound)
	}
	r, err := opFrom(m)
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// OperationList pages operations newest first by (created_at, id).
func (s *Store) OperationList(ctx context.Context, p *backend.OperationListParams) ([]*sluicetype.Operation, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.DefaultListLimit
	}
	max := "+"
	if p.After != nil {
		max = "(" + member(p.After.At, p.After.ID)
	}
	ms, err := s.c.ZRevRangeByLex(ctx, s.key("ops"), &goredis.ZRangeBy{Min: "-", Max: max, Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list operations: %w", err)
	}
	pipe := s.c.Pipeline()
	cs := make([]*goredis.MapStringStringCmd, len(ms))
	for i, id := range memberIDs(ms) {
		cs[i] = pipe.HGetAll(ctx, s.key("op", id))
	}
	if len(ms) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("redis: list operations: %w", err)
		}
	}
	var out []*sluicetype.Operation
	for _, c := range cs {
		if len(c.Val()) == 0 {
			continue
		}
		r, err := opFrom(c.Val())
		if err != nil {
			return nil, err
		}
		out = append(out, r.op)
	}
	return out, nil
}

// luaOpCancel marks a pending or running operation cancelled
// (OperationCancel).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.id -> the operation
// A.message -> the message recorded as its error
//
// Returns the operation's fields. Errors: "NOTFOUND", "STATE <status>".
var luaOpCancel = script(`
local A = args(4)
local O = loadop(A.id)
if not O then return redis.error_reply('NOTFOUND') end
if O[OF.status] ~= 'pending' and O[OF.status] ~= 'running' and O[OF.status] ~= 'halted' then
  return redis.error_reply('STATE ' .. O[OF.status])
end
O[OF.status] = 'cancelled'; O[OF.finished_at] = NOW; O[OF.error] = A.message; O[OF.lease_holder] = '';
  O[OF.lease_expires] = ''
saveop(O)
redis.call('ZREM', K('opa'), O[OF.created_at] .. ':' .. O[OF.id])
idem_record('O' .. enc(opflat(O)))
return opflat(O)
`)

// OperationCancel marks a pending, running or halted operation cancelled.
func (s *Store) OperationCancel(ctx context.Context, p *backend.OperationCancelParams) (*sluicetype.Operation, error) {
	return s.operationMove(ctx, "cancel", p.ID, luaOpCancel, "id", p.ID, "message", p.Message)
}

// operationMove runs an operator's change of operation id (verb: cancel,
// resume) as lua, a script that refuses with NOTFOUND or STATE <status>
// when the operation is not there or may not leave its status.
func (s *Store) operationMove(ctx context.Context, verb, id string, lua *luaScript, args ...any) (*sluicetype.Operation, error) {
	v, err := s.run(ctx, verb+" operation "+id, lua, args...)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("%s operation %s: %w", verb, id, sluicetype.ErrNotFound)
			case "STATE":
				return nil, fmt.Errorf("%s operation %s: %w: it is %s", verb, id, sluicetype.ErrWrongState, r.arg)
			}
		}
		return nil, err
	}
	r, err := opFrom(fieldMap(v))
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// luaOpClaim leases the oldest pending or running operation whose lease is
// free or expired and whose start time, if it has one, has come
// (OperationClaim); a scheduled operation stays in opa, passed over.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.holder -> who takes the lease
// A.ttl -> how long it lasts ("s:ns")
//
// Returns the operation's fields, or {} when there is none.
var luaOpClaim = script(`
local A = args(4)
for _, m in ipairs(redis.call('ZRANGEBYLEX', K('opa'), '-', '+')) do
  local O = loadop(string.sub(m, 21))
  if O and (O[OF.status] == 'pending' or O[OF.status] == 'running') and (O[OF.lease_holder] == '' or O[OF.lease_expires] <= NOW)
    and (O[OF.start_at] == nil or O[OF.start_at] == '' or O[OF.start_at] <= NOW) then
    O[OF.lease_holder] = A.holder; O[OF.lease_fence] = istr(tonumber(O[OF.lease_fence]) + 1);
      O[OF.lease_expires] = tadd(A.ttl); O[OF.status] = 'running'
    if O[OF.started_at] == '' then O[OF.started_at] = NOW end
    saveop(O)
    return opflat(O)
  end
end
return {}
`)

// OperationClaim leases the oldest pending or running operation whose
// lease is free or expired and whose start time has come.
func (s *Store) OperationClaim(ctx context.Context, p *backend.OperationClaimParams) (*backend.OperationLease, error) {
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	v, err := s.run(ctx, "claim operation", luaOpClaim, "holder", p.Holder, "ttl", dstr(ttl))
	if err != nil {
		return nil, err
	}
	m := fieldMap(v)
	if len(m) == 0 {
		return nil, nil
	}
	r, err := opFrom(m)
	if err != nil {
		return nil, err
	}
	return &backend.OperationLease{Operation: r.op, Holder: r.holder, Fence: r.fence, Cursor: r.cursor}, nil
}

// luaOpFinish sets a running operation's status and error, fenced on its
// lease (OperationFinish).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, st (the status), final ("1" sets
// finished_at), er ("" keeps the error), holder, fence.
//
// Returns the operation's fields. Errors: "LEASE".
var luaOpFinish = script(`
local A = args(4)
local O = loadop(A.id)
if not O or O[OF.status] ~= 'running' or O[OF.lease_holder] ~= A.holder or O[OF.lease_fence] ~= A.fence then return redis.error_reply('LEASE') end
O[OF.status] = A.st
if A.final == '1' then
  O[OF.finished_at] = NOW
  redis.call('ZREM', K('opa'), O[OF.created_at] .. ':' .. O[OF.id])
end
if A.er ~= '' then O[OF.error] = A.er end
saveop(O)
return opflat(O)
`)

// OperationFinish sets a running operation's status and error, fenced on
// its lease.
func (s *Store) OperationFinish(ctx context.Context, p *backend.OperationFinishParams) (*sluicetype.Operation, error) {
	final := p.Status != sluicetype.OperationRunning && p.Status != sluicetype.OperationPending
	v, err := s.run(ctx, "finish operation "+p.ID, luaOpFinish, "id", p.ID, "st", string(p.Status), "final", flag(final),
		"er", p.Error, "holder", p.Holder, "fence", strconv.FormatInt(p.Fence, 10))
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "LEASE" {
			return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		return nil, err
	}
	r, err := opFrom(fieldMap(v))
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// goFiltered reports whether a selector has conditions only Go evaluates
// (the batch script tests the others itself).
func goFiltered(f *sluicetype.Filter) bool {
	return len(f.Tags) > 0 || f.Error != "" || len(f.Payload) > 0 || len(f.Meta) > 0
}

// luaOpBatch applies one batch of a bulk operation, fenced on its lease
// and cursor (OperationProcessBatch).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// id, holder, fence, after (the cursor),
// limit, window, budget (microseconds of the server's time the whole
// script may take: its walk, index writes included, stops at seven
// eighths of it), ttl ("s:ns"), cutoff (a time); the spec (s_ prefix,
// as luaAction); the selector's indexed conditions f_states, f_queues,
// f_kinds, f_ids (joined by US), f_fp, f_uk, f_ep, f_ca, f_cb, f_fa, f_fb
// (times or ""), f_sup ("1" takes superseded jobs in); f_more ("1": the
// selector has conditions only the Go side evaluates, whose verdicts
// f_verdicts lists as id US version US 0|1 records joined by RS); and the
// event ev ("1") with ev_kind, ev_actor, ev_to, ev_msg; rk, when above
// 0, appends the ids the batch changed to the canary's window (cyr),
// keeping the last rk.
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
// {"ok", op, cursor, exhausted (0|1), refused (id US fingerprint ...)}; a
// job refused because another job holds its unique key has "U holder
// key" in its fingerprint's place (a fingerprint is hex: never "U ...").
// Errors: "NOTFOUND", "LEASE", "RETRY" (a job changed since the Go side
// judged it: nothing was written, run the batch again).
var luaOpBatch = script(`
local A = args(4)
local O = loadop(A.id)
if not O then return redis.error_reply('NOTFOUND') end
if O[OF.status] == 'cancelled' or O[OF.status] == 'completed' or O[OF.status] == 'failed' or O[OF.status] == 'halted' then
  return {'over', opflat(O)}
end
if O[OF.status] ~= 'running' or O[OF.lease_holder] ~= A.holder or O[OF.lease_fence] ~= A.fence or O[OF.cursor] ~= A.after then
  return redis.error_reply('LEASE')
end
local S = spec(A, 's_')
local limit, window = tonumber(A.limit), tonumber(A.window)
local rk, changed = tonumber(A.rk) or 0, {}
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
local per = tonumber(O[OF.flush_cost] or '')
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
local BF = {F.id, F.queue, F.kind, F.priority, F.state, F.attempt, F.max_attempts, F.crash_attempt, F.fingerprint,
  F.scheduled_at, F.deadline, F.state_changed_at, F.lease_expires, F.version, F.superseded_by, F.pattern,
  F.unique_key, F.unique_states}
if A.f_ca ~= '' or A.f_cb ~= '' then BF[#BF + 1] = F.created_at end
if A.f_fa ~= '' or A.f_fb ~= '' then BF[#BF + 1] = F.finalized_at end
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
  local ok = J ~= nil and states[J[F.state]] and J[F.state_changed_at] <= A.cutoff
  if ok and #queues > 0 then ok = qs[J[F.queue]] end
  if ok and #kinds > 0 then ok = ks[J[F.kind]] end
  if ok and #ids > 0 then ok = is[J[F.id]] end
  if ok and A.f_fp ~= '' then ok = J[F.fingerprint] == A.f_fp end
  if ok and A.f_uk ~= '' then ok = J[F.unique_key] == A.f_uk end
  if ok and A.f_ep ~= '' then ok = J[F.pattern] == A.f_ep end
  if ok and A.f_ca ~= '' then ok = J[F.created_at] > A.f_ca end
  if ok and A.f_cb ~= '' then ok = J[F.created_at] < A.f_cb end
  if ok and A.f_fa ~= '' then ok = J[F.finalized_at] ~= '' and J[F.finalized_at] > A.f_fa end
  if ok and A.f_fb ~= '' then ok = J[F.finalized_at] ~= '' and J[F.finalized_at] < A.f_fb end
  if ok and A.f_sup ~= '1' then ok = J[F.superseded_by] == '' end
  if ok and A.f_more == '1' then
    local v = verdicts[id]
    if v == nil or v[1] ~= J[F.version] then
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
    local fp = J[F.fingerprint]
    local q = false
    if S.rquar and fp ~= '' then
      q = quar[fp]
      if q == nil then
        q = false
        if not qall then q = quarantined(fp) end
        quar[fp] = q
      end
    end
    local uh = nil
    if not q and (J[F.unique_key] or '') ~= '' and not S.del and uholds(S.to, J[F.unique_states])
      and not uholds(J[F.state], J[F.unique_states]) then
      local hid = uholder(J[F.unique_key])
      if hid and hid ~= J[F.id] then uh = 'U ' .. hid .. ' ' .. J[F.unique_key] end
    end
    if q then
      refused[#refused + 1] = J[F.id]
      refused[#refused + 1] = fp
    elseif uh then
      refused[#refused + 1] = J[F.id]
      refused[#refused + 1] = uh
    else
      if A.ev == '1' then event(J[F.id], A.ev_kind, A.ev_actor, J[F.state], A.ev_to, J[F.attempt], A.ev_msg) end
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
      if rk > 0 then changed[#changed + 1] = J[F.id] end
    end
  end
end
if rk > 0 and #changed > 0 then
  local all = split(O[OF.canary_recent])
  for _, id in ipairs(changed) do all[#all + 1] = id end
  O[OF.canary_recent] = table.concat(all, US, math.max(1, #all - rk + 1), #all)
end
local cursor, done = A.after, 0
if stopped or scanned == window then cursor = last or A.after
else
  if lastfound then cursor = lastfound end
  done = 1
end
if ZBN > 0 then
  timedflush()
  O[OF.flush_cost] = string.format('%.3f', per)
end
local nr = #refused / 2
O[OF.processed] = istr(tonumber(O[OF.processed]) + n + nr); O[OF.succeeded] = istr(tonumber(O[OF.succeeded]) + n);
  O[OF.failed] = istr(tonumber(O[OF.failed]) + nr)
O[OF.cursor] = cursor; O[OF.lease_expires] = tadd(A.ttl)
saveop(O)
return {'ok', opflat(O), cursor, done, refused}
`)

// OperationProcessBatch runs one batch the engine chose in one script,
// fenced on the operation lease and cursor. The script walks the window of
// ids past the cursor and tests the selector's indexed conditions itself;
// conditions only Go evaluates (tags, error text, payload and meta paths)
// are judged here first, job by job with its version, and the script
// takes those verdicts only for jobs whose version is unchanged (else it
// writes nothing and the batch is judged again).
func (s *Store) OperationProcessBatch(ctx context.Context, p *backend.OperationProcessBatchParams) (*backend.OperationBatchResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.OperationBatch
	}
	window := max(p.Window, limit)
	// A script blocks the server while it runs: a batch takes at most
	// maxBatchScript jobs (the engine's "up to Limit" allows fewer; the
	// cursor says where the next batch starts).
	limit = min(limit, maxBatchScript)
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	if p.Spec.To == "" || len(p.Spec.From) == 0 || len(p.Selector.States) == 0 {
		return nil, fmt.Errorf("operation %s: %w: a batch needs a spec and a selector narrowed to its states", p.ID, sluicetype.ErrInvalid)
	}
	sel := &p.Selector
	if err := checkFilter(sel); err != nil {
		return nil, err
	}
	judged := goFiltered(sel)
	if judged {
		window = min(window, s.verdictWindow(p.ID, p.After))
	}
	base := []any{"id", p.ID, "holder", p.Holder, "fence", strconv.FormatInt(p.Fence, 10), "after", p.After,
		"limit", strconv.Itoa(limit), "window", strconv.Itoa(window),
		"budget", strconv.FormatInt(cmp.Or(s.batchBudget, batchScriptBudget).Microseconds(), 10), "ttl", dstr(ttl), "cutoff", tstr(p.Cutoff),
		"f_states", joinStates(sel.States), "f_queues", strings.Join(sel.Queues, us), "f_kinds", strings.Join(sel.Kinds, us),
		"f_ids", strings.Join(sel.IDs, us), "f_fp", sel.Fingerprint, "f_uk", sel.UniqueKey, "f_ep", sel.ErrorPattern,
		"f_ca", tptr(sel.CreatedAfter), "f_cb", tptr(sel.CreatedBefore), "f_fa", tptr(sel.FinalizedAfter),
		"f_fb", tptr(sel.FinalizedBefore), "f_sup", flag(sel.IncludeSuperseded),
		"ev", flag(p.Spec.Event != ""), "ev_kind", string(p.Event.Kind), "ev_actor", p.Event.Actor,
		"ev_to", string(p.Event.To), "ev_msg", p.Event.Message, "rk", strconv.Itoa(p.Recent)}
	base = append(base, specArgs(p.Spec)...)
	var v any
	var err error
	var judgedIDs []string
	for range 20 {
		args := base
		if judged {
			var verdicts string
			verdicts, judgedIDs, err = s.verdicts(ctx, p.After, window, sel)
			if err != nil {
				return nil, err
			}
			args = append(append([]any(nil), base...), "f_more", "1", "f_verdicts", verdicts)
		}
		v, err = s.run(ctx, "operation "+p.ID+" batch", luaOpBatch, args...)
		if r, ok := asRefusal(err); ok && r.code == "RETRY" {
			continue
		}
		break
	}
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrNotFound)
			case "LEASE":
				return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
			case "RETRY":
				return nil, fmt.Errorf("operation %s: %w: its jobs kept changing under the batch", p.ID, sluicetype.ErrConflict)
			}
		}
		return nil, err
	}
	rep, _ := v.([]any)
	if len(rep) < 2 {
		return nil, fmt.Errorf("redis: operation %s batch: bad reply", p.ID)
	}
	r, err := opFrom(fieldMap(rep[1]))
	if err != nil {
		return nil, err
	}
	if rep[0] == "over" {
		if judged {
			s.walked(p.ID, nil, "", true)
		}
		return &backend.OperationBatchResult{Operation: r.op, Cursor: r.cursor}, nil
	}
	out := &backend.OperationBatchResult{Operation: r.op}
	out.Cursor, _ = rep[2].(string)
	done, _ := rep[3].(int64)
	out.Exhausted = done == 1
	if judged {
		s.walked(p.ID, judgedIDs, out.Cursor, out.Exhausted)
	}
	ref := strs(rep[4])
	for i := 0; i+1 < len(ref); i += 2 {
		if held, ok := strings.CutPrefix(ref[i+1], "U "); ok {
			holder, key, _ := strings.Cut(held, " ")
			out.Refused = append(out.Refused, &sluicetype.UniqueHeldError{Verb: string(p.Spec.Action), ID: ref[i], Key: key, HolderID: holder})
			continue
		}
		out.Refused = append(out.Refused, &sluicetype.QuarantinedError{Verb: string(p.Spec.Action), ID: ref[i], Fingerprint: ref[i+1]})
	}
	if p.Spec.To == sluicetype.StateAvailable {
		s.publishWake(ctx) // the batch's queues are not told apart: every queue
	}
	return out, nil
}

// verdictWindow is how many jobs past after to judge for operation id's
// next batch: twice what its previous batch walked (walked), or
// firstVerdictWindow for its first batch here.
func (s *Store) verdictWindow(id, after string) int {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if h, ok := s.opWalk[id]; ok && h.after == after {
		return h.next
	}
	return firstVerdictWindow
}

// walked notes how far a judged batch got: the cursor's place among the
// ids it judged. An operation exhausted or over is forgotten.
func (s *Store) walked(id string, ids []string, cursor string, exhausted bool) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if exhausted {
		delete(s.opWalk, id)
		return
	}
	n := sort.SearchStrings(ids, cursor)
	if n < len(ids) && ids[n] == cursor {
		n++
	}
	if s.opWalk == nil {
		s.opWalk = map[string]walkHint{}
	}
	s.opWalk[id] = walkHint{after: cursor, next: max(2*n, minVerdictWindow)}
}

// walkHint is where an operation's judged batches got to (walked).
type walkHint struct {
	after string // the cursor the next batch starts from
	next  int    // the window to judge for it
}

// verdicts judges the jobs of a batch's window on the whole selector:
// records "id US version US 0|1" joined by RS, and the ids judged, in
// order.
func (s *Store) verdicts(ctx context.Context, after string, window int, sel *sluicetype.Filter) (string, []string, error) {
	lo := "-"
	if after != "" {
		lo = "(" + after
	}
	var ids []string
	if sel.ErrorPattern != "" {
		// The script's window for a group selector (see luaOpBatch).
		gs, err := s.groupKeys(ctx)
		if err != nil {
			return "", nil, err
		}
		for _, g := range gs {
			if g.pattern != sel.ErrorPattern || !g.fits(sel, sel.States) {
				continue
			}
			more, err := s.c.ZRangeByLex(ctx, s.key("egi", g.raw), &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(window)}).Result()
			if err != nil {
				return "", nil, fmt.Errorf("redis: batch window: %w", err)
			}
			ids = append(ids, more...)
		}
		sort.Strings(ids)
		ids = ids[:min(len(ids), window)]
	} else {
		var err error
		ids, err = s.c.ZRangeByLex(ctx, s.key("ids"), &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(window)}).Result()
		if err != nil {
			return "", nil, fmt.Errorf("redis: batch window: %w", err)
		}
	}
	rs, err := s.rows(ctx, ids, needsPayload(sel), true)
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte('\x1e')
		}
		b.WriteString(r.j.ID + us + strconv.FormatInt(r.j.Version, 10) + us + flag(match(r, sel, false, nil)))
	}
	return b.String(), ids, nil
}
