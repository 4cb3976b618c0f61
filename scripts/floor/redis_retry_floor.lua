-- The floor of a bulk retry on Redis with Sluice's key layout (schema
-- version 4): the work any retry of an archived job must do, and nothing
-- else. Each job's fields that name its index members are read (HMGET),
-- its state written (HSET) and its finished fields dropped (HDEL), its
-- timeline event pushed (RPUSH), and its members moved out of the five
-- archived sets (st, sq, sk, eg, egi) and into the four available ones
-- (sqk, eg, egi, av), the moves of a chunk grouped per key (one ZREM or
-- ZADD per key a chunk). No budget, no operation row, no counters, no
-- selector, no quarantine: a measurement, not a store.
--
-- It runs over every job of a namespace in one call, a chunk at a time:
--
--   redis-cli -p PORT --eval redis_retry_floor.lua x , '{NS}:' 1000 [nosets]
--
-- ARGV[1] the namespace's key prefix, ARGV[2] the chunk size, ARGV[3]
-- "nosets" to write each job's hash and event only, moving no index
-- entry (what no layout can spare).
-- Returns {jobs retried, chunks}.
local P, n, sets = ARGV[1], tonumber(ARGV[2]), ARGV[3] ~= 'nosets'
local T = redis.call('TIME')
local NOW = string.format('%010d%09d', tonumber(T[1]), tonumber(T[2]) * 1000)
local US = '\31'
local function g(t, k, a, b)
  local l = t[k]
  if not l then l = {}; t[k] = l end
  l[#l + 1] = a
  if b then l[#l + 1] = b end
end
local min, done, chunks = '-', 0, 0
while true do
  local ids = redis.call('ZRANGEBYLEX', P .. 'ids', min, '+', 'LIMIT', 0, n)
  if #ids == 0 then break end
  chunks = chunks + 1
  min = '(' .. ids[#ids]
  local rem, add = {}, {}
  for _, id in ipairs(ids) do
    local jk = P .. 'job:' .. id
    local h = redis.call('HMGET', jk, 'q', 'k', 'sca', 'ep', 'pr', 's', 'v')
    if h[6] == 'archived' then
      local q, k, ep = h[1], h[2], h[4] or ''
      local m, nm = h[3] .. ':' .. id, NOW .. ':' .. id
      redis.call('HSET', jk, 's', 'available', 'sca', NOW, 'sch', NOW, 'v', tostring(tonumber(h[7]) + 1))
      redis.call('HDEL', jk, 'fin', 'rs')
      redis.call('RPUSH', P .. 'ev:' .. id, NOW .. US .. 'retried' .. US .. 'floor' .. US .. 'archived' .. US .. 'available')
      g(rem, P .. 'st:archived', m); g(rem, P .. 'sq:archived:' .. q, m); g(rem, P .. 'sk:archived:' .. k, m)
      g(add, P .. 'sqk:available:' .. q .. US .. k, '0', nm)
      if ep ~= '' then
        local ga, gv = 'archived' .. US .. q .. US .. k .. US .. ep, 'available' .. US .. q .. US .. k .. US .. ep
        g(rem, P .. 'eg:' .. ga, m); g(rem, P .. 'egi:' .. ga, id)
        g(add, P .. 'eg:' .. gv, '0', nm); g(add, P .. 'egi:' .. gv, '0', id)
      end
      g(add, P .. 'av:' .. q .. ':0', h[5] or '0', nm)
      done = done + 1
    end
  end
  if not sets then rem, add = {}, {} end
  for key, l in pairs(rem) do
    for i = 1, #l, 500 do redis.call('ZREM', key, unpack(l, i, math.min(i + 499, #l))) end
  end
  for key, l in pairs(add) do
    for i = 1, #l, 1000 do redis.call('ZADD', key, unpack(l, i, math.min(i + 999, #l))) end
  end
end
return {done, chunks}
