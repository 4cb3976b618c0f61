package redis

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The arguments of luaDeleteExpired: a head, then one record per sweep
// (batchLayout).
const (
	dexLimit = iota // the most jobs to delete
	dexHeadLen
)

const (
	dexState     = iota // a terminal state
	dexRetention        // "s:ns"; "0:0" deletes everything
	dexQueue            // "" for every queue but the ones excluded
	dexExcluded         // queues excluded, joined by US
	dexRecLen
)

// deleteExpiredLayout names luaDeleteExpired's arguments for the script.
func deleteExpiredLayout() batchLayout {
	var h [dexHeadLen]string
	h[dexLimit] = "limit"
	var r [dexRecLen]string
	r[dexState], r[dexRetention], r[dexQueue], r[dexExcluded] = "state", "retention", "queue", "excluded"
	return batchLayout{head: h[:], rec: r[:]}
}

// luaDeleteExpired deletes terminal jobs past their retention
// (JobDeleteExpired).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4] -> A.limit: the most jobs to delete
// ARGV[R1...] -> one record of RN values per sweep, at the offsets R
// names (deleteExpiredLayout: state, retention, queue, excluded)
//
// Returns how many jobs were deleted.
var luaDeleteExpired = batchScript(deleteExpiredLayout(), `
local limit = tonumber(A.limit)
local total = 0
for i = R1, #ARGV, RN do
  if total >= limit then break end
  local st, ret, q = ARGV[i + R.state], ARGV[i + R.retention], ARGV[i + R.queue]
  local excl = set(split(ARGV[i + R.excluded]))
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
        if J and J[F.state] == st and not excl[J[F.queue]] and J[F.finalized_at] ~= '' and J[F.finalized_at] < cut then
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

// JobDeleteExpired deletes terminal jobs past their retention, at most
// Limit, in one script.
func (s *Store) JobDeleteExpired(ctx context.Context, p *backend.JobDeleteExpiredParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	overriding := map[sluicetype.State][]string{}
	queues := make([]string, 0, len(p.QueueRetention))
	for q, m := range p.QueueRetention {
		queues = append(queues, q)
		for state := range m {
			overriding[state] = append(overriding[state], q)
		}
	}
	sort.Strings(queues)
	var head [dexHeadLen]string
	head[dexLimit] = strconv.Itoa(limit)
	args := appendArgs(nil, head[:]...)
	add := func(st sluicetype.State, d time.Duration, q string, excl []string) {
		if !st.Terminal() || d < 0 {
			return
		}
		var r [dexRecLen]string
		r[dexState], r[dexRetention], r[dexQueue], r[dexExcluded] = string(st), dstr(d), q, strings.Join(excl, us)
		args = appendArgs(args, r[:]...)
	}
	for _, st := range sluicetype.AllStates {
		if d, ok := p.Retention[st]; ok {
			add(st, d, "", overriding[st])
		}
	}
	for _, q := range queues {
		m := p.QueueRetention[q]
		for _, st := range sluicetype.AllStates {
			if d, ok := m[st]; ok {
				add(st, d, q, nil)
			}
		}
	}
	if len(args) == dexHeadLen {
		return 0, nil
	}
	v, err := s.run(ctx, "delete expired jobs", luaDeleteExpired, args...)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return int(n), nil
}
