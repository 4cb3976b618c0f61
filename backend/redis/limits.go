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

// Limits: concurrency limits across processes (backend.LimitStore), kept
// in one hash, limits: field scope US name, value concurrency US updated
// at US updated by US partition key US rate US rate window (ns).

// luaClaimLimits is the part of luaClaim that keeps a claim within the
// limits: it reads the limits hash, and when one covers the claim (its
// queue's, or a kind's) counts the running jobs each covers: a kind's from
// its set rk:KIND, a queue's and a partitioned kind's from the lease set
// run. The script is atomic, so no claim counts between this count and
// this claim's writes, and nothing is written per limit: a job leaving
// running frees its slot by leaving run and its kind's set rk:KIND (which
// every move in or out of running writes, lua.go's index and the claim's
// and completion's fast paths). The queue's limit caps
// the claim; room(kind) then admits a job of a limited kind while its
// limit leaves room, and the scan passes the others by.
const luaClaimLimits = `
local KROOM, KPART, KPRUN = nil, nil, nil
-- partof is a job's partition under a partitioned limit on key: its
-- payload's top-level field, "" when absent or unreadable.
local function partof(jk, key)
  local p = redis.call('HGET', jk, F.payload)
  if not p then return '' end
  local ok, v = pcall(cjson.decode, p)
  if not ok or type(v) ~= 'table' or v[key] == nil or type(v[key]) == 'table' then return '' end
  return tostring(v[key])
end
-- RATES: the rate limits the claim is under, each {key, n} for its
-- starts set lst:SCOPE US NAME (score: seconds), pruned to its window.
local RATES, KRATE, NOWF = {}, {}, tonumber(NOW_S) + tonumber(NOW_NS) / 1e9
-- LIMITED: a limit covers this claim (the reply says so, see JobClaimResult).
-- BOUND: a limit decided how many jobs the claim took (JobClaimResult's
-- Bound): room passed a job by, or the queue's limit left less than asked
-- and the claim took all of it (QROOM).
local LIMITED, BOUND, QROOM = false, false, nil
do
  local lraw = redis.call('HGETALL', K('limits'))
  local qmax, kmax, anyk = nil, {}, false
  local function ratecount(f, rate, win)
    local key = K('lst', f)
    local w = tonumber(win) or 0
    if w <= 0 then w = 1e9 end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', NOWF - w / 1e9)
    return rate - redis.call('ZCARD', key), key
  end
  for i = 1, #lraw, 2 do
    local f, v = lraw[i], lraw[i + 1]
    local e = string.find(f, US, 1, true)
    local sc, nm = string.sub(f, 1, e - 1), string.sub(f, e + 1)
    local parts = split(v)
    local n, key, rate = tonumber(parts[1]), parts[4] or '', tonumber(parts[5] or '0') or 0
    if sc == 'queue' and nm == q then
      if n > 0 then qmax = n end
      if rate > 0 then
        local left, rk = ratecount(f, rate, parts[6])
        limit = math.min(limit, math.max(0, left))
        RATES[#RATES + 1] = {rk, 'queue'}
      end
    elseif sc == 'kind' and (kinds == nil or kinds[nm] ~= nil) then
      if key ~= '' then KPART = KPART or {}; KPART[nm] = {key = key, max = n}
      elseif n > 0 then kmax[nm] = n end
      if rate > 0 then
        local left, rk = ratecount(f, rate, parts[6])
        KRATE[nm] = {left = math.max(0, left), key = rk, n = 0}
      end
      anyk = true
    end
  end
  LIMITED = qmax ~= nil or anyk or #RATES > 0
  if qmax ~= nil or anyk then
    local qrun, krun = 0, {}
    KPRUN = {}
    -- A kind's running jobs are its set rk:KIND; a queue's limit and a
    -- partitioned one read every running job (their queue, their payload).
    for k in pairs(kmax) do krun[k] = redis.call('SCARD', K('rk', k)) end
    if qmax ~= nil or KPART ~= nil then
      for _, m in ipairs(redis.call('ZRANGE', K('run'), 0, -1)) do
        local jk = P .. 'job:' .. string.sub(m, 21)
        local r = redis.call('HMGET', jk, F.kind, F.queue)
        if r[2] == q then qrun = qrun + 1 end
        if r[1] and KPART and KPART[r[1]] then
          local pk = r[1] .. US .. partof(jk, KPART[r[1]].key)
          KPRUN[pk] = (KPRUN[pk] or 0) + 1
        end
      end
    end
    if qmax ~= nil and qmax - qrun < limit then
      limit = math.max(0, qmax - qrun)
      QROOM = limit
    end
    KROOM = {}
    for k, n in pairs(kmax) do KROOM[k] = n - (krun[k] or 0) end
    for k, r in pairs(KRATE) do KROOM[k] = math.min(KROOM[k] or r.left, r.left) end
  end
  if #RATES > 0 and KPRUN == nil then KPRUN = {} end
  -- A claim of kinds that are all full takes nothing and scans nothing: a
  -- redrive of ten thousand jobs of a full kind must not cost each poll
  -- of every worker a walk of the queue's first thousand entries.
  if KROOM ~= nil and kinds ~= nil then
    local open = false
    for k in pairs(kinds) do
      if (KPART and KPART[k]) or KROOM[k] == nil or KROOM[k] > 0 then open = true; break end
    end
    if not open then limit = 0 end
  end
end
-- room admits a job (its kind k, its hash's key jk) while the limits on
-- its kind leave room, and counts it.
local function room(k, jk)
  local pt = KPART and KPART[k]
  if pt then
    local pk = k .. US .. partof(jk, pt.key)
    if (KPRUN[pk] or 0) >= pt.max then BOUND = true; return false end
    KPRUN[pk] = (KPRUN[pk] or 0) + 1
    return true
  end
  local r = KROOM and KROOM[k]
  if r == nil then return true end
  if r <= 0 then BOUND = true; return false end
  KROOM[k] = r - 1
  if KRATE[k] then KRATE[k].n = KRATE[k].n + 1 end
  return true
end
`

// luaClaimStarts records the claim's starts under its rate limits (after
// luaClaim's takes): one member per start in each limit's set.
const luaClaimStarts = `
if #jobs > 0 then
  for _, r in ipairs(RATES) do
    for i = 1, #jobs do redis.call('ZADD', r[1], NOWF, A.lease .. ':' .. i) end
  end
  for _, r in pairs(KRATE) do
    for i = 1, r.n do redis.call('ZADD', r.key, NOWF, A.lease .. ':' .. i) end
  end
end
`

// luaLimitList returns each limit's field and value, the jobs it counts
// running and its starts in its rate window: {field, value, running,
// starts, ...}.
var luaLimitList = script(`
local lraw = redis.call('HGETALL', K('limits'))
if #lraw == 0 then return {} end
-- A kind's running jobs are its set rk:KIND, as the claim counts them; a
-- queue's are read from every running job, and only when a queue has a
-- limit.
local run, anyq = {}, false
for i = 1, #lraw, 2 do
  local f = lraw[i]
  local e = string.find(f, US, 1, true)
  if string.sub(f, 1, e - 1) == 'kind' then
    run[f] = redis.call('SCARD', K('rk', string.sub(f, e + 1)))
  else
    anyq = true
  end
end
if anyq then
  for _, m in ipairs(redis.call('ZRANGE', K('run'), 0, -1)) do
    local q = redis.call('HGET', P .. 'job:' .. string.sub(m, 21), F.queue)
    if q then run['queue' .. US .. q] = (run['queue' .. US .. q] or 0) + 1 end
  end
end
local out = {}
local nowf = tonumber(NOW_S) + tonumber(NOW_NS) / 1e9
for i = 1, #lraw, 2 do
  local parts = split(lraw[i + 1])
  local st = 0
  if (tonumber(parts[5] or '0') or 0) > 0 then
    local w = tonumber(parts[6] or '0') or 0
    if w <= 0 then w = 1e9 end
    st = redis.call('ZCOUNT', K('lst', lraw[i]), '(' .. (nowf - w / 1e9), '+inf')
  end
  out[#out + 1] = lraw[i]; out[#out + 1] = lraw[i + 1]; out[#out + 1] = run[lraw[i]] or 0; out[#out + 1] = st
end
return out
`)

// LimitList returns every limit with the jobs it counts running now.
func (s *Store) LimitList(ctx context.Context) ([]sluicetype.Limit, error) {
	v, err := s.run(ctx, "list limits", luaLimitList)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	var out []sluicetype.Limit
	for i := 0; i+3 < len(r); i += 4 {
		f, _ := r[i].(string)
		val, _ := r[i+1].(string)
		n, _ := r[i+2].(int64)
		starts, _ := r[i+3].(int64)
		scope, name, _ := strings.Cut(f, us)
		parts := strings.SplitN(val, us, 6)
		l := sluicetype.Limit{Scope: sluicetype.LimitScope(scope), Name: name, Running: n, Starts: starts}
		l.Concurrency, _ = strconv.Atoi(parts[0])
		if len(parts) >= 3 {
			l.UpdatedAt, _ = ttime(parts[1])
			l.UpdatedBy = parts[2]
		}
		if len(parts) >= 4 {
			l.Key = parts[3]
		}
		if len(parts) == 6 {
			l.Rate, _ = strconv.Atoi(parts[4])
			w, _ := strconv.ParseInt(parts[5], 10, 64)
			l.RateWindow = time.Duration(w)
		}
		out = append(out, l)
	}
	backend.SortLimits(out)
	return out, nil
}

// luaLimitSet sets (n > 0) or removes (n 0) one limit.
var luaLimitSet = script(`
local A = args(4)
local f = A.scope .. US .. A.name
if A.n == '0' and A.rate == '0' then redis.call('HDEL', K('limits'), f)
else redis.call('HSET', K('limits'), f, A.n .. US .. NOW .. US .. A.actor .. US .. A.key .. US .. A.rate .. US .. A.win) end
idem_record('')
return 1
`)

// LimitSet sets a limit, or removes it when Concurrency is 0.
func (s *Store) LimitSet(ctx context.Context, p *backend.LimitSetParams) error {
	if !p.Valid() {
		return fmt.Errorf("redis: set limit %s %q to %d: %w", p.Scope, p.Name, p.Concurrency, sluicetype.ErrInvalid)
	}
	_, err := s.run(ctx, "set limit "+p.Name, luaLimitSet, "scope", string(p.Scope), "name", p.Name,
		"n", strconv.Itoa(p.Concurrency), "actor", p.Actor, "key", p.Key, "rate", strconv.Itoa(p.Rate),
		"win", strconv.FormatInt(int64(p.RateWindow), 10))
	return err
}
