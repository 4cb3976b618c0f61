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
// at US updated by.

// luaClaimLimits is the part of luaClaim that keeps a claim within the
// limits: it reads the limits hash, and when one covers the claim (its
// queue's, or a kind's) counts the running jobs each covers from the lease
// set run. The script is atomic, so no claim counts between this count and
// this claim's writes, and nothing is written per limit: a job leaving
// running frees its slot by no longer being in run. The queue's limit caps
// the claim; room(kind) then admits a job of a limited kind while its
// limit leaves room, and the scan passes the others by.
const luaClaimLimits = `
local KROOM = nil
do
  local lraw = redis.call('HGETALL', K('limits'))
  local qmax, kmax, anyk = nil, {}, false
  for i = 1, #lraw, 2 do
    local f, v = lraw[i], lraw[i + 1]
    local e = string.find(f, US, 1, true)
    local sc, nm = string.sub(f, 1, e - 1), string.sub(f, e + 1)
    local n = tonumber(string.sub(v, 1, (string.find(v, US, 1, true) or (#v + 1)) - 1))
    if sc == 'queue' and nm == q then qmax = n
    elseif sc == 'kind' and (kinds == nil or kinds[nm] ~= nil) then kmax[nm] = n; anyk = true end
  end
  if qmax ~= nil or anyk then
    local qrun, krun = 0, {}
    for _, m in ipairs(redis.call('ZRANGE', K('run'), 0, -1)) do
      local r = redis.call('HMGET', P .. 'job:' .. string.sub(m, 21), F.kind, F.queue)
      if r[2] == q then qrun = qrun + 1 end
      if r[1] and kmax[r[1]] ~= nil then krun[r[1]] = (krun[r[1]] or 0) + 1 end
    end
    if qmax ~= nil then limit = math.min(limit, math.max(0, qmax - qrun)) end
    if anyk then
      KROOM = {}
      for k, n in pairs(kmax) do KROOM[k] = n - (krun[k] or 0) end
    end
  end
end
local function room(k)
  local r = KROOM[k]
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
		parts := strings.SplitN(val, us, 3)
		l := sluicetype.Limit{Scope: sluicetype.LimitScope(scope), Name: name, Running: n}
		l.Concurrency, _ = strconv.Atoi(parts[0])
		if len(parts) == 3 {
			l.UpdatedAt, _ = ttime(parts[1])
			l.UpdatedBy = parts[2]
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
else redis.call('HSET', K('limits'), f, A.n .. US .. NOW .. US .. A.actor) end
idem_record('')
return 1
`)

// LimitSet sets a limit, or removes it when Concurrency is 0.
func (s *Store) LimitSet(ctx context.Context, p *backend.LimitSetParams) error {
	if !p.Scope.Valid() || p.Name == "" || p.Concurrency < 0 {
		return fmt.Errorf("redis: set limit %s %q to %d: %w", p.Scope, p.Name, p.Concurrency, sluicetype.ErrInvalid)
	}
	_, err := s.run(ctx, "set limit "+p.Name, luaLimitSet, "scope", string(p.Scope), "name", p.Name,
		"n", strconv.Itoa(p.Concurrency), "actor", p.Actor)
	return err
}
