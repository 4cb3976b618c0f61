package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// group is one key of the error groups hash: state, queue, kind, pattern.
type group struct {
	raw                  string
	state                sluicetype.State
	queue, kind, pattern string
}

func (g *group) fits(f *sluicetype.Filter, states []sluicetype.State) bool {
	return slices.Contains(states, g.state) &&
		(len(f.Queues) == 0 || slices.Contains(f.Queues, g.queue)) &&
		(len(f.Kinds) == 0 || slices.Contains(f.Kinds, g.kind))
}

func (s *Store) groupKeys(ctx context.Context) ([]group, error) {
	m, err := s.c.HGetAll(ctx, s.key("egc")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: error groups: %w", err)
	}
	out := make([]group, 0, len(m))
	for raw, n := range m {
		c, err := atoi64(n)
		if err != nil {
			return nil, fmt.Errorf("redis: error group %q: count: %w", raw, err)
		}
		if g, ok := parseGroup(raw); ok && c > 0 {
			out = append(out, g)
		}
	}
	return out, nil
}

// parseGroup reads a key of the error groups hash.
func parseGroup(raw string) (group, bool) {
	f := strings.SplitN(raw, us, 4)
	if len(f) != 4 {
		return group{}, false
	}
	return group{raw: raw, state: sluicetype.State(f[0]), queue: f[1], kind: f[2], pattern: f[3]}, true
}

// luaErrorGroups reads the error groups that fit a filter, all in one
// script, so that the answer is the groups at one moment.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.states -> the states, joined by US
// A.queues -> the queues, joined by US ("" any)
// A.kinds -> the kinds, joined by US ("" any)
// A.pattern -> the error pattern ("" any)
//
// Returns, for each group fitting them that holds jobs, its key in the
// error groups hash, its size, its oldest and newest members, and the
// newest job's last error (the sample).
var luaErrorGroups = script(`
local A = args(4)
local states, queues, kinds, pat = set(split(A.states)), set(split(A.queues)), set(split(A.kinds)), A.pattern
local anyq, anyk = A.queues == '', A.kinds == ''
local h = redis.call('HGETALL', K('egc'))
local out = {}
for i = 1, #h, 2 do
  local raw = h[i]
  local f = split(raw)
  if #f >= 4 and tonumber(h[i + 1]) > 0 and states[f[1]] and (anyq or queues[f[2]]) and (anyk or kinds[f[3]]) then
    local p = table.concat(f, US, 4)
    if pat == '' or p == pat then
      local key = K('eg', raw)
      local n = redis.call('ZCARD', key)
      if n > 0 then
        local lo = redis.call('ZRANGEBYLEX', key, '-', '+', 'LIMIT', 0, 1)
        local hi = redis.call('ZREVRANGEBYLEX', key, '+', '-', 'LIMIT', 0, 1)
        local le = redis.call('HGET', K('job', string.sub(hi[1], 21)), F.last_error)
        out[#out + 1] = raw; out[#out + 1] = n; out[#out + 1] = lo[1]; out[#out + 1] = hi[1]; out[#out + 1] = le or ''

      end
    end
  end
end
return out
`)

// JobErrorGroups groups the jobs matching the filter by queue, kind and
// error pattern. Every answer is the groups as they stood at one moment:
// read group by group while jobs die, one group would be counted before a
// death and another after it (a list the store never held, a group just
// created missing). A filter of states, queues, kinds and a pattern
// reads the groups' counters in one script (luaErrorGroups: the cost is
// the number of groups); any other condition walks the groups' jobs,
// which no script may hold the server for, and counts those that entered
// their group before the store's time when the walk began: the groups as
// of then, less the jobs that left since.
func (s *Store) JobErrorGroups(ctx context.Context, p *backend.JobErrorGroupsParams) ([]sluicetype.ErrorGroup, error) {
	if err := checkFilter(&p.Filter); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 200
	}
	f := &p.Filter
	states := f.States
	if len(states) == 0 {
		states = sluicetype.AllStates
	}
	type agg struct {
		g           sluicetype.ErrorGroup
		first, last string
		// sampled: the script read the sample with the counts.
		sampled bool
	}
	byKey := map[string]*agg{}
	aggOf := func(g group) *agg {
		k := g.queue + us + g.kind + us + g.pattern
		a := byKey[k]
		if a == nil {
			a = &agg{g: sluicetype.ErrorGroup{Queue: g.queue, Kind: g.kind, Pattern: g.pattern}}
			byKey[k] = a
		}
		return a
	}
	rest := *f
	rest.States, rest.Queues, rest.Kinds, rest.ErrorPattern = nil, nil, nil, ""
	if isZero(&rest) {
		strs := make([]string, len(states))
		for i, st := range states {
			strs[i] = string(st)
		}
		v, err := s.run(ctx, "error groups", luaErrorGroups, "states", strings.Join(strs, us),
			"queues", strings.Join(f.Queues, us), "kinds", strings.Join(f.Kinds, us), "pattern", f.ErrorPattern)
		if err != nil {
			return nil, err
		}
		rs, _ := v.([]any)
		for i := 0; i+4 < len(rs); i += 5 {
			raw, _ := rs[i].(string)
			n, _ := rs[i+1].(int64)
			lo, _ := rs[i+2].(string)
			hi, _ := rs[i+3].(string)
			sample, _ := rs[i+4].(string)
			g, ok := parseGroup(raw)
			if !ok || n <= 0 || len(lo) < 21 || len(hi) < 21 {
				continue
			}
			a := aggOf(g)
			a.g.Count += n
			if a.first == "" || lo < a.first {
				a.first = lo
			}
			if hi > a.last {
				a.last, a.g.Sample, a.sampled = hi, sample, true
			}
		}
	} else {
		// The cutoff is read before the groups, so every group holding a
		// job that entered it before the cutoff is among them.
		now, err := s.Now(ctx)
		if err != nil {
			return nil, err
		}
		cutoff := member(now, "")
		gs, err := s.groupKeys(ctx)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			if !g.fits(f, states) || (f.ErrorPattern != "" && g.pattern != f.ErrorPattern) {
				continue
			}
			a := aggOf(g)
			w := s.newWalker([]string{s.key("eg", g.raw)}, cutoff, false, 500)
			// A job seen twice (it left the group and came back while the
			// walk went on) is counted once.
			seen := map[string]bool{}
			for {
				ms, err := w.next(ctx, 500)
				if err != nil {
					return nil, err
				}
				if len(ms) == 0 {
					break
				}
				rs, err := s.rows(ctx, memberIDs(ms), needsPayload(f), true)
				if err != nil {
					return nil, err
				}
				for _, r := range rs {
					m := member(r.j.StateChangedAt, r.j.ID)
					if seen[r.j.ID] || m >= cutoff || !match(r, f, false, nil) {
						continue
					}
					seen[r.j.ID] = true
					a.g.Count++
					if a.first == "" || m < a.first {
						a.first = m
					}
					if m > a.last {
						a.last = m
					}
				}
			}
		}
	}
	out := make([]sluicetype.ErrorGroup, 0, len(byKey))
	// Samples the script did not read: the newest job's last error.
	var unsampled []int
	var samples []string
	for _, a := range byKey {
		if a.g.Count == 0 {
			continue
		}
		var err error
		if a.g.FirstSeen, err = ttime(a.first[:19]); err != nil {
			return nil, fmt.Errorf("redis: error group %s: first seen: %w", a.g.Pattern, err)
		}
		if a.g.LastSeen, err = ttime(a.last[:19]); err != nil {
			return nil, fmt.Errorf("redis: error group %s: last seen: %w", a.g.Pattern, err)
		}
		if !a.sampled {
			unsampled = append(unsampled, len(out))
			samples = append(samples, a.last[20:])
		}
		out = append(out, a.g)
	}
	if len(samples) > 0 {
		pipe := s.c.Pipeline()
		cs := make([]*goredis.StringCmd, len(samples))
		for i, id := range samples {
			cs[i] = pipe.HGet(ctx, s.key("job", id), fLastError)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, fmt.Errorf("redis: error groups: %w", err)
		}
		for i, k := range unsampled {
			out[k].Sample = cs[i].Val()
		}
	}
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.Count != y.Count {
			return x.Count > y.Count
		}
		if x.Queue != y.Queue {
			return x.Queue < y.Queue
		}
		if x.Kind != y.Kind {
			return x.Kind < y.Kind
		}
		return x.Pattern < y.Pattern
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// luaTriageSet writes an operator's verdict on one error group, or
// removes it, in the verdicts hash (egt: "queue US kind US pattern" ->
// "status US at US actor US note"). No death touches the hash: whether a
// resolved group came back is read from its jobs by the engine.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.queue, A.kind, A.pattern -> the group
// A.status -> resolved or ignored; open removes the verdict
// A.actor -> who decided
// A.note -> the operator's note
//
// Returns the store's time the verdict was written at.
var luaTriageSet = script(`
local A = args(4)
local f = A.queue .. US .. A.kind .. US .. A.pattern
if A.status == 'open' then redis.call('HDEL', K('egt'), f)
else redis.call('HSET', K('egt'), f, A.status .. US .. NOW .. US .. A.actor .. US .. A.note) end
idem_record('')
return NOW
`)

// ErrorGroupTriageSet writes an operator's verdict on one error group, or
// removes it for Status open, in one script.
func (s *Store) ErrorGroupTriageSet(ctx context.Context, p *backend.ErrorGroupTriageSetParams) (*backend.ErrorGroupTriage, error) {
	if !p.Valid() || strings.Contains(p.Actor, us) {
		return nil, fmt.Errorf("redis: error group %s %s %q: status %q: %w", p.Queue, p.Kind, p.Pattern, p.Status, sluicetype.ErrInvalid)
	}
	v, err := s.run(ctx, "error group "+p.Queue+" "+p.Kind, luaTriageSet, "queue", p.Queue, "kind", p.Kind,
		"pattern", p.Pattern, "status", string(p.Status), "actor", p.Actor, "note", p.Note)
	if err != nil {
		return nil, err
	}
	if p.Status == sluicetype.GroupOpen {
		return nil, nil
	}
	now, _ := v.(string)
	at, err := ttime(now)
	if err != nil {
		return nil, fmt.Errorf("redis: error group %s %s: time: %w", p.Queue, p.Kind, err)
	}
	return &backend.ErrorGroupTriage{Queue: p.Queue, Kind: p.Kind, Pattern: p.Pattern, Status: p.Status,
		Note: p.Note, Actor: p.Actor, At: at}, nil
}

// ErrorGroupTriageList returns every verdict, read in one command.
func (s *Store) ErrorGroupTriageList(ctx context.Context) ([]backend.ErrorGroupTriage, error) {
	m, err := s.c.HGetAll(ctx, s.key("egt")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: error group verdicts: %w", err)
	}
	out := make([]backend.ErrorGroupTriage, 0, len(m))
	for f, val := range m {
		g := strings.SplitN(f, us, 3)
		v := strings.SplitN(val, us, 4)
		if len(g) != 3 || len(v) != 4 {
			return nil, fmt.Errorf("redis: error group verdict %q: malformed", f)
		}
		at, err := ttime(v[1])
		if err != nil {
			return nil, fmt.Errorf("redis: error group verdict %q: time: %w", f, err)
		}
		out = append(out, backend.ErrorGroupTriage{Queue: g[0], Kind: g[1], Pattern: g[2],
			Status: sluicetype.GroupStatus(v[0]), At: at, Actor: v[2], Note: v[3]})
	}
	backend.SortTriage(out)
	return out, nil
}
