package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Limits: concurrency limits across processes (backend.LimitStore), kept
// in one hash, limits: field scope US name, value concurrency US updated
// at US updated by US partition key.

// luaClaimLimits is the part of luaClaim that keeps a claim within the
// limits: it reads the limits hash, and when one covers the claim (its
// queue's, or a kind's) counts the running jobs each covers from the lease
// set run. The script is atomic, so no claim counts between this count and
// this claim's writes, and nothing is written per limit: a job leaving
// running frees its slot by no longer being in run. The queue's limit caps
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
do
  local lraw = redis.call('HGETALL', K('limits'))
  local qmax, kmax, anyk = nil, {}, false
  for i = 1, #lraw, 2 do
    local f, v = lraw[i], lraw[i + 1]
    local e = string.find(f, US, 1, true)
    local sc, nm = string.sub(f, 1, e - 1), string.sub(f, e + 1)
    local parts = split(v)
    local n, key = tonumber(parts[1]), parts[4] or ''
    if sc == 'queue' and nm == q then qmax = n
    elseif sc == 'kind' and (kinds == nil or kinds[nm] ~= nil) then
      if key ~= '' then KPART = KPART or {}; KPART[nm] = {key = key, max = n}
      else kmax[nm] = n end
      anyk = true
    end
  end
  if qmax ~= nil or anyk then
    local qrun, krun = 0, {}
    KPRUN = {}
    for _, m in ipairs(redis.call('ZRANGE', K('run'), 0, -1)) do
      local jk = P .. 'job:' .. string.sub(m, 21)
      local r = redis.call('HMGET', jk, F.kind, F.queue)
      if r[2] == q then qrun = qrun + 1 end
      if r[1] and kmax[r[1]] ~= nil then krun[r[1]] = (krun[r[1]] or 0) + 1 end
      if r[1] and KPART and KPART[r[1]] then
        local pk = r[1] .. US .. partof(jk, KPART[r[1]].key)
        KPRUN[pk] = (KPRUN[pk] or 0) + 1
      end
    end
    if qmax ~= nil then limit = math.min(limit, math.max(0, qmax - qrun)) end
    if anyk then
      KROOM = {}
      for k, n in pairs(kmax) do KROOM[k] = n - (krun[k] or 0) end
    end
  end
end
-- room admits a job (its kind k, its hash's key jk) while the limits on
-- its kind leave room, and counts it.
local function room(k, jk)
  local pt = KPART and KPART[k]
  if pt then
    local pk = k .. US .. partof(jk, pt.key)
    if (KPRUN[pk] or 0) >= pt.max then return false end
    KPRUN[pk] = (KPRUN[pk] or 0) + 1
    return true
  end
  local r = KROOM and KROOM[k]
  if r == nil then return true end
  if r <= 0 then return false end
  KROOM[k] = r - 1
  return true
end
`

// luaLimitList returns each limit's field and value, and the jobs it
// counts running: {field, value, running, ...}.
var luaLimitList = script(`
local lraw = redis.call('HGETALL', K('limits'))
if #lraw == 0 then return {} end
local run = {}
for _, m in ipairs(redis.call('ZRANGE', K('run'), 0, -1)) do
  local r = redis.call('HMGET', P .. 'job:' .. string.sub(m, 21), F.kind, F.queue)
  if r[1] then run['kind' .. US .. r[1]] = (run['kind' .. US .. r[1]] or 0) + 1 end
  if r[2] then run['queue' .. US .. r[2]] = (run['queue' .. US .. r[2]] or 0) + 1 end
end
local out = {}
for i = 1, #lraw, 2 do
  out[#out + 1] = lraw[i]; out[#out + 1] = lraw[i + 1]; out[#out + 1] = run[lraw[i]] or 0
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
	for i := 0; i+2 < len(r); i += 3 {
		f, _ := r[i].(string)
		val, _ := r[i+1].(string)
		n, _ := r[i+2].(int64)
		scope, name, _ := strings.Cut(f, us)
		parts := strings.SplitN(val, us, 4)
		l := sluicetype.Limit{Scope: sluicetype.LimitScope(scope), Name: name, Running: n}
		l.Concurrency, _ = strconv.Atoi(parts[0])
		if len(parts) >= 3 {
			l.UpdatedAt, _ = ttime(parts[1])
			l.UpdatedBy = parts[2]
		}
		if len(parts) == 4 {
			l.Key = parts[3]
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
if A.n == '0' then redis.call('HDEL', K('limits'), f)
else redis.call('HSET', K('limits'), f, A.n .. US .. NOW .. US .. A.actor .. US .. A.key) end
idem_record('')
return 1
`)

// LimitSet sets a limit, or removes it when Concurrency is 0.
func (s *Store) LimitSet(ctx context.Context, p *backend.LimitSetParams) error {
	if !p.Valid() {
		return fmt.Errorf("redis: set limit %s %q to %d: %w", p.Scope, p.Name, p.Concurrency, sluicetype.ErrInvalid)
	}
	_, err := s.run(ctx, "set limit "+p.Name, luaLimitSet, "scope", string(p.Scope), "name", p.Name,
		"n", strconv.Itoa(p.Concurrency), "actor", p.Actor, "key", p.Key)
	return err
}
