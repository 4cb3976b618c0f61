package redis

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// luaScheduleDue moves scheduled and retryable jobs whose time has come to
// available (JobScheduleDue).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.to -> the target state
// A.limit -> the most jobs to move
// A.from -> the from-states in order, joined by US
//
// Returns the queues that got work (with repeats).
//
// The index writes are gathered (ZB): each index key is written once for
// the batch. Each due set is read once, before any of them is written.
var luaScheduleDue = script(`
local A = args(4)
ZB = {}
local to, limit = A.to, tonumber(A.limit)
local moved, queues = 0, {}
for _, from in ipairs(split(A.from)) do
  if moved >= limit then break end
  local ms = redis.call('ZRANGEBYLEX', K('due', from), '-', '(' .. NOW1, 'LIMIT', 0, limit - moved)
  for _, m in ipairs(ms) do
    local J = load(string.sub(m, 21))
    if J and J[F.state] == from then
      local O = copy(J)
      J[F.state] = to; J[F.state_changed_at] = NOW
      bump(J)
      commit(O, J, true)
      moved = moved + 1
      queues[#queues + 1] = J[F.queue]
    end
  end
end
return queues
`)

// JobScheduleDue moves due scheduled and retryable jobs to available.
func (s *Store) JobScheduleDue(ctx context.Context, p *backend.JobScheduleDueParams) ([]string, error) {
	if p.To == "" {
		return nil, fmt.Errorf("schedule due: %w: no target state", sluicetype.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	v, err := s.run(ctx, "schedule due", luaScheduleDue, "to", string(p.To), "limit", strconv.Itoa(limit),
		"from", joinStates(p.From))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, q := range strs(v) {
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	sort.Strings(out)
	if len(out) > 0 {
		s.publishWake(ctx, out...)
	}
	return out, nil
}
