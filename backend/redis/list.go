package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Listing, counting and grouping. A filter is served by walking the best
// index for it (ids, unique key, fingerprint, error groups, per-queue or
// per-kind state sets, state sets) in keyset order and testing every
// condition in Go on the jobs read (match); conditions no index serves (tags, error
// text, payload and meta paths, times) cost the reading of the jobs of
// the index walked, never a silent omission: when the caller asks for a
// ScanReport the reading stops at the store's scan budget and says so.

// row is a job as the filters read it: the job, and the fields of its
// hash the sluicetype.Job does not carry.
type row struct {
	j      *sluicetype.Job
	le, ep string
	us     string // the unique-states mask, "" for a job without a key
}

// rows reads jobs by id as filter rows (missing ones left out, order
// kept); lastError keeps only the latest error entry.
func (s *Store) rows(ctx context.Context, ids []string, payload, lastError bool) ([]*row, error) {
	jobs, hashes, err := s.readJobs(ctx, ids, payload, lastError)
	if err != nil {
		return nil, err
	}
	out := make([]*row, 0, len(ids))
	for i, j := range jobs {
		if j != nil {
			out = append(out, &row{j: j, le: hashes[i][fLastError], ep: hashes[i][fPattern], us: hashes[i][fUniqueStates]})
		}
	}
	return out, nil
}

// member is a job's entry in the time-ordered indexes.
func member(at time.Time, id string) string { return tstr(at) + ":" + id }

// walker walks time-ordered indexes merged, newest first (or oldest first
// when asc), strictly past a starting member.
type walker struct {
	s     *Store
	asc   bool
	srcs  []*source
	chunk int64
}

type source struct {
	key  string
	buf  []string
	last string // the member past which the next chunk starts ("" for the end)
	done bool
	size int64 // members the next chunk asks for
}

func (s *Store) newWalker(keys []string, after string, asc bool, chunk int) *walker {
	w := &walker{s: s, asc: asc, chunk: int64(max(chunk, 16))}
	// Many indexes (a state's sets of every queue and kind) share a page:
	// each first reads its share of it, twice over, and doubles from there.
	first := w.chunk
	if len(keys) > 1 {
		first = min(w.chunk, max(8, 2*w.chunk/int64(len(keys))))
	}
	for _, k := range keys {
		w.srcs = append(w.srcs, &source{key: k, last: after, size: first})
	}
	return w
}

// fill reads the next chunk of every source that has run out, in one
// round trip: a page merged from a few hundred sets costs one, not one a
// set.
func (w *walker) fill(ctx context.Context) error {
	var need []*source
	for _, src := range w.srcs {
		if len(src.buf) == 0 && !src.done {
			need = append(need, src)
		}
	}
	if len(need) == 0 {
		return nil
	}
	pipe := w.s.c.Pipeline()
	cs := make([]*goredis.StringSliceCmd, len(need))
	for i, src := range need {
		if w.asc {
			min := "-"
			if src.last != "" {
				min = "(" + src.last
			}
			cs[i] = pipe.ZRangeByLex(ctx, src.key, &goredis.ZRangeBy{Min: min, Max: "+", Count: src.size})
		} else {
			max := "+"
			if src.last != "" {
				max = "(" + src.last
			}
			cs[i] = pipe.ZRevRangeByLex(ctx, src.key, &goredis.ZRangeBy{Min: "-", Max: max, Count: src.size})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		for i, c := range cs {
			if c.Err() != nil {
				return fmt.Errorf("redis: walk %s: %w", need[i].key, c.Err())
			}
		}
		return fmt.Errorf("redis: walk: %w", err)
	}
	for i, src := range need {
		ms := cs[i].Val()
		if int64(len(ms)) < src.size {
			src.done = true
		}
		if len(ms) > 0 {
			src.buf = ms
			src.last = ms[len(ms)-1]
		}
		src.size = min(2*src.size, w.chunk)
	}
	return nil
}

// next returns up to n members in merged order; fewer at the end.
func (w *walker) next(ctx context.Context, n int) ([]string, error) {
	var out []string
	for len(out) < n {
		if err := w.fill(ctx); err != nil {
			return nil, err
		}
		var best *source
		for _, src := range w.srcs {
			if len(src.buf) == 0 {
				continue
			}
			if best == nil || (w.asc && src.buf[0] < best.buf[0]) || (!w.asc && src.buf[0] > best.buf[0]) {
				best = src
			}
		}
		if best == nil {
			break
		}
		out = append(out, best.buf[0])
		best.buf = best.buf[1:]
	}
	return out, nil
}

// plan is how a filter is served: either a set of ids read directly, or
// time-ordered indexes walked.
type plan struct {
	ids  []string // read directly (ids, unique key, fingerprint)
	keys []string // walked
	// hot are the members ("TIME:ID") of the running jobs that match the
	// filter's queues and kinds: the claim path keeps running jobs out of
	// the state indexes, so they are gathered from the lease set (they
	// are few: the workers' concurrency) and sorted here.
	hot []string
}

// hotState reports whether the state indexes leave s out (every claim and
// every completion would otherwise rewrite three entries there).
func hotState(s sluicetype.State) bool { return s == sluicetype.StateRunning }

// unindexedStates have no st, sq or sk index (schema versions 3 and 4;
// NOST in the scripts): every job enters and leaves them, so a job in one
// is in one set of its queue and kind (sqk:STATE:QUEUE US KIND), and
// listings merge the sets of the pairs that qk names and the filter's
// queues and kinds take.
var unindexedStates = []sluicetype.State{sluicetype.StateAvailable, sluicetype.StateCompleted}

// noStateIndex reports whether s is one of unindexedStates.
func noStateIndex(s sluicetype.State) bool { return slices.Contains(unindexedStates, s) }

func (s *Store) planFor(ctx context.Context, f *sluicetype.Filter) (*plan, error) {
	// A value named twice (state:archived,archived) names one set: each
	// key and id is walked once, or its jobs would count and list twice.
	states := uniq(f.States)
	if len(states) == 0 {
		states = sluicetype.AllStates
	}
	switch {
	case len(f.IDs) > 0:
		return &plan{ids: uniq(f.IDs)}, nil
	case f.UniqueKey != "":
		// A key's jobs are few (one holder, the rest finished): read them
		// from the key's set rather than walking a state's index.
		ids, err := s.c.SMembers(ctx, s.key("ukj", f.UniqueKey)).Result()
		if err != nil {
			return nil, fmt.Errorf("redis: unique key %s: %w", f.UniqueKey, err)
		}
		return &plan{ids: ids}, nil
	case f.Fingerprint != "":
		ids, err := s.c.SMembers(ctx, s.key("fpj", f.Fingerprint)).Result()
		if err != nil {
			return nil, fmt.Errorf("redis: fingerprint %s: %w", f.Fingerprint, err)
		}
		return &plan{ids: ids}, nil
	case f.ErrorPattern != "":
		gs, err := s.groupKeys(ctx)
		if err != nil {
			return nil, err
		}
		p := &plan{}
		for _, g := range gs {
			if g.pattern == f.ErrorPattern && g.fits(f, states) {
				p.keys = append(p.keys, s.key("eg", g.raw))
			}
		}
		return p, nil
	}
	p := &plan{}
	var hot []sluicetype.State
	var pairs []queueKind // read once, for the states without st
	for _, st := range states {
		if hotState(st) {
			hot = append(hot, st)
			continue
		}
		switch {
		case noStateIndex(st):
			if pairs == nil {
				var err error
				if pairs, err = s.queueKinds(ctx); err != nil {
					return nil, err
				}
			}
			for _, qk := range pairs {
				if (len(f.Queues) == 0 || slices.Contains(f.Queues, qk.queue)) &&
					(len(f.Kinds) == 0 || slices.Contains(f.Kinds, qk.kind)) {
					p.keys = append(p.keys, s.key("sqk", string(st), qk.raw))
				}
			}
		case len(f.Queues) > 0:
			for _, q := range f.Queues {
				p.keys = append(p.keys, s.key("sq", string(st), q))
			}
		case len(f.Kinds) > 0:
			for _, k := range f.Kinds {
				p.keys = append(p.keys, s.key("sk", string(st), k))
			}
		default:
			p.keys = append(p.keys, s.key("st", string(st)))
		}
	}
	if len(hot) > 0 {
		var err error
		if p.hot, err = s.hotMembers(ctx, hot, f); err != nil {
			return nil, err
		}
	}
	p.keys = uniq(p.keys)
	return p, nil
}

// uniq returns vs without repeats, in the order of their first place.
func uniq[T comparable](vs []T) []T {
	out := make([]T, 0, len(vs))
	seen := make(map[T]bool, len(vs))
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// queueKind is a pair of a queue and a kind that has had a job (a member
// of qk: the queue, US, the kind).
type queueKind struct{ raw, queue, kind string }

// queueKinds reads qk, sorted, with an empty slice (not nil) when it is
// empty.
func (s *Store) queueKinds(ctx context.Context) ([]queueKind, error) {
	ms, err := s.c.SMembers(ctx, s.key("qk")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: queues and kinds: %w", err)
	}
	sort.Strings(ms)
	out := make([]queueKind, 0, len(ms))
	for _, m := range ms {
		q, k, ok := strings.Cut(m, us)
		if !ok {
			return nil, fmt.Errorf("redis: queues and kinds: malformed member %q", m)
		}
		out = append(out, queueKind{raw: m, queue: q, kind: k})
	}
	return out, nil
}

// hotMembers gathers the members of the running jobs that match f's
// queues and kinds, from the lease set.
func (s *Store) hotMembers(ctx context.Context, states []sluicetype.State, f *sluicetype.Filter) ([]string, error) {
	ms, err := s.c.ZRange(ctx, s.key("run"), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: running jobs: %w", err)
	}
	ids := memberIDs(ms)
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(ids))
	for i := 0; i < len(ids); i += 1000 {
		chunk := ids[i:min(i+1000, len(ids))]
		pipe := s.c.Pipeline()
		cs := make([]*goredis.SliceCmd, len(chunk))
		for k, id := range chunk {
			cs[k] = pipe.HMGet(ctx, s.key("job", id), fStateChangedAt, fState, fQueue, fKind)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("redis: hot jobs: %w", err)
		}
		for k, c := range cs {
			v := c.Val()
			sca, _ := v[0].(string)
			st, _ := v[1].(string)
			q, _ := v[2].(string)
			kind, _ := v[3].(string)
			if sca == "" || !slices.Contains(states, sluicetype.State(st)) ||
				(len(f.Queues) > 0 && !slices.Contains(f.Queues, q)) || (len(f.Kinds) > 0 && !slices.Contains(f.Kinds, kind)) {
				continue
			}
			out = append(out, sca+":"+chunk[k])
		}
	}
	return out, nil
}

// walkerFor is a walker over a plan's indexes and hot members.
func (s *Store) walkerFor(pl *plan, after string, asc bool, chunk int) *walker {
	w := s.newWalker(pl.keys, after, asc, chunk)
	if len(pl.hot) > 0 {
		var buf []string
		for _, m := range pl.hot {
			if after == "" || (asc && m > after) || (!asc && m < after) {
				buf = append(buf, m)
			}
		}
		sort.Strings(buf)
		if !asc {
			slices.Reverse(buf)
		}
		w.srcs = append(w.srcs, &source{buf: buf, done: true})
	}
	return w
}

// JobListPage pages job summaries newest first by (state_changed_at, id).
func (s *Store) JobListPage(ctx context.Context, p *backend.JobListPageParams) ([]*sluicetype.Job, error) {
	if err := checkFilter(&p.Filter); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.DefaultListLimit
	}
	f := &p.Filter
	pl, err := s.planFor(ctx, f)
	if err != nil {
		return nil, err
	}
	after := ""
	if p.After != nil {
		after = member(p.After.At, p.After.ID)
	}
	var out []*sluicetype.Job
	keep := func(rs []*row) bool {
		for _, r := range rs {
			if !match(r, f, p.ExcludeSuperseded, nil) {
				continue
			}
			r.j.Payload = nil
			// A row carries what the SQL stores' rows do: the wait's
			// summary, decoded from the checkpoint the hash read
			// brought (only a scheduled job's), and no checkpoint.
			r.j.Wait = sluicetype.WaitSummaryOf(r.j)
			r.j.Checkpoint = nil
			out = append(out, r.j)
			if len(out) == limit {
				return true
			}
		}
		return false
	}
	if pl.ids != nil {
		rs, err := s.rows(ctx, pl.ids, needsPayload(f), true)
		if err != nil {
			return nil, err
		}
		sort.Slice(rs, func(a, b int) bool {
			ma, mb := member(rs[a].j.StateChangedAt, rs[a].j.ID), member(rs[b].j.StateChangedAt, rs[b].j.ID)
			if p.Reverse {
				return ma < mb
			}
			return ma > mb
		})
		var past []*row
		for _, r := range rs {
			m := member(r.j.StateChangedAt, r.j.ID)
			if after == "" || (p.Reverse && m > after) || (!p.Reverse && m < after) {
				past = append(past, r)
			}
		}
		keep(past)
		return out, nil
	}
	w := s.walkerFor(pl, after, p.Reverse, limit+1)
	var scanned int64
	for {
		n := max(limit-len(out), 16)
		if p.Scan != nil {
			n = int(min(int64(n), int64(s.scanBudget)-scanned))
		}
		ms, err := w.next(ctx, n)
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			return out, nil
		}
		rs, err := s.rows(ctx, memberIDs(ms), needsPayload(f), true)
		if err != nil {
			return nil, err
		}
		scanned += int64(len(ms))
		if keep(rs) {
			return out, nil
		}
		if p.Scan != nil && scanned >= int64(s.scanBudget) {
			// The budget is spent before the page is full: say so, and
			// where the scan stopped, rather than read on.
			return out, s.reportScan(ctx, p.Scan, pl, scanned, ms[len(ms)-1])
		}
	}
}

// reportScan fills r for a scan of pl's indexes stopped at the budget,
// after scanned jobs, the last being member last.
func (s *Store) reportScan(ctx context.Context, r *sluicetype.ScanReport, pl *plan, scanned int64, last string) error {
	total := int64(len(pl.hot))
	if len(pl.keys) > 0 {
		pipe := s.c.Pipeline()
		cs := make([]*goredis.IntCmd, len(pl.keys))
		for i, k := range pl.keys {
			cs[i] = pipe.ZCard(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("redis: scan size: %w", err)
		}
		for _, c := range cs {
			total += c.Val()
		}
	}
	stop, err := memberCursor(last)
	if err != nil {
		return err
	}
	*r = sluicetype.ScanReport{Bounded: true, Scanned: scanned, Total: total, Stop: &stop}
	return nil
}

// memberCursor is the keyset position of an index member "TIME:ID".
func memberCursor(m string) (sluicetype.Cursor, error) {
	if len(m) < 21 || m[19] != ':' {
		return sluicetype.Cursor{}, fmt.Errorf("redis: index member %q is not TIME:ID", m)
	}
	ns, err := strconv.ParseInt(m[:19], 10, 64)
	if err != nil {
		return sluicetype.Cursor{}, fmt.Errorf("redis: index member %q: %w", m, err)
	}
	return sluicetype.Cursor{At: time.Unix(0, ns).UTC(), ID: m[20:]}, nil
}

// indexedFilter reports whether f holds only states and queues or kinds
// (not both): the sizes of the per-queue or per-kind state indexes count
// it, up to any time.
func indexedFilter(f *sluicetype.Filter) bool {
	g := *f
	g.States, g.Queues, g.Kinds = nil, nil, nil
	return isZero(&g) && (len(f.Queues) == 0 || len(f.Kinds) == 0)
}

// simpleFilter reports whether f holds only states and queues, which the
// maintained counters count.
func simpleFilter(f *sluicetype.Filter) bool {
	g := *f
	g.States, g.Queues = nil, nil
	return isZero(&g)
}

func isZero(f *sluicetype.Filter) bool {
	return len(f.States) == 0 && len(f.Queues) == 0 && len(f.Kinds) == 0 && len(f.IDs) == 0 &&
		f.Fingerprint == "" && f.UniqueKey == "" && len(f.Tags) == 0 && f.Error == "" && f.ErrorPattern == "" &&
		len(f.Payload) == 0 && len(f.Meta) == 0 && f.CreatedAfter == nil && f.CreatedBefore == nil &&
		f.FinalizedAfter == nil && f.FinalizedBefore == nil && f.ExpiresWithin == nil
}

// JobCountMatching counts jobs matching the filter, stopping at Max: from the
// counters for states and queues, from the index sizes for kinds and an
// as-of bound, and otherwise by walking an index.
func (s *Store) JobCountMatching(ctx context.Context, p *backend.JobCountMatchingParams) (int64, bool, error) {
	if err := checkFilter(&p.Filter); err != nil {
		return 0, false, err
	}
	f := &p.Filter
	capAt := func(n int64) (int64, bool, error) {
		if p.Max > 0 && n > p.Max {
			return p.Max, true, nil
		}
		return n, false, nil
	}
	exclude := p.ExcludeSuperseded && !f.IncludeSuperseded
	var n int64
	switch {
	case simpleFilter(f) && p.AsOf == nil:
		counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
		if err != nil {
			return 0, false, err
		}
		for q, m := range counts {
			if len(f.Queues) > 0 && !slices.Contains(f.Queues, q) {
				continue
			}
			for st, c := range m {
				if len(f.States) == 0 || slices.Contains(f.States, st) {
					n += c
				}
			}
		}
	case indexedFilter(f):
		// States with queues or kinds (not both), up to AsOf: the sizes of
		// the indexes' ranges.
		pl, err := s.planFor(ctx, f)
		if err != nil {
			return 0, false, err
		}
		max := "+"
		if p.AsOf != nil {
			max = "(" + tstr(p.AsOf.Add(time.Nanosecond))
		}
		pipe := s.c.Pipeline()
		cs := make([]*goredis.IntCmd, len(pl.keys))
		for i, k := range pl.keys {
			cs[i] = pipe.ZLexCount(ctx, k, "-", max)
		}
		if len(cs) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, false, fmt.Errorf("redis: count jobs: %w", err)
			}
		}
		for _, c := range cs {
			n += c.Val()
		}
		for _, m := range pl.hot {
			if p.AsOf == nil || m[:19] <= tstr(*p.AsOf) {
				n++
			}
		}
	default:
		return s.countByWalk(ctx, p)
	}
	if exclude {
		ids, err := s.c.SMembers(ctx, s.key("sup")).Result()
		if err != nil {
			return 0, false, fmt.Errorf("redis: count jobs: %w", err)
		}
		rs, err := s.rows(ctx, ids, false, true)
		if err != nil {
			return 0, false, err
		}
		for _, r := range rs {
			if match(r, f, false, p.AsOf) {
				n--
			}
		}
	}
	return capAt(n)
}

// countByWalk counts by reading the jobs of the best index.
func (s *Store) countByWalk(ctx context.Context, p *backend.JobCountMatchingParams) (int64, bool, error) {
	f := &p.Filter
	pl, err := s.planFor(ctx, f)
	if err != nil {
		return 0, false, err
	}
	var n int64
	count := func(rs []*row) bool {
		for _, r := range rs {
			if match(r, f, p.ExcludeSuperseded, p.AsOf) {
				n++
				if p.Max > 0 && n > p.Max {
					return true
				}
			}
		}
		return false
	}
	if pl.ids != nil {
		rs, err := s.rows(ctx, pl.ids, needsPayload(f), true)
		if err != nil {
			return 0, false, err
		}
		count(rs)
	} else {
		w := s.walkerFor(pl, "", false, 500)
		var scanned int64
		for {
			chunk := 500
			if p.Scan != nil {
				chunk = int(min(int64(chunk), int64(s.scanBudget)-scanned))
			}
			ms, err := w.next(ctx, chunk)
			if err != nil {
				return 0, false, err
			}
			if len(ms) == 0 {
				break
			}
			rs, err := s.rows(ctx, memberIDs(ms), needsPayload(f), true)
			if err != nil {
				return 0, false, err
			}
			scanned += int64(len(ms))
			if count(rs) {
				break
			}
			if p.Scan != nil && scanned >= int64(s.scanBudget) {
				if err := s.reportScan(ctx, p.Scan, pl, scanned, ms[len(ms)-1]); err != nil {
					return 0, false, err
				}
				break
			}
		}
	}
	if p.Max > 0 && n > p.Max {
		return p.Max, true, nil
	}
	return n, false, nil
}

// JobCountUniqueHeld counts the matched jobs whose move to p.To would take
// a key another job holds. A filter served by ids (ids, unique key,
// fingerprint) reads its jobs; any other reads the jobs carrying a key
// (ukjobs), a chunk a round trip, and tests the filter on them, so a bulk
// retry's preview of a million dead jobs without keys reads nothing
// more. For the keyed jobs whose mask holds p.To, the holders named under
// {ns}:uq:KEY are read, and a name is trusted only while its job's state
// holds the key, as uholder trusts it in the scripts.
func (s *Store) JobCountUniqueHeld(ctx context.Context, p *backend.JobCountUniqueHeldParams) (*backend.UniqueHeldCount, error) {
	if err := checkFilter(&p.Filter); err != nil {
		return nil, err
	}
	out := &backend.UniqueHeldCount{}
	if sluicetype.UniqueStateBit(p.To) == 0 {
		return out, nil
	}
	f := &p.Filter
	check := func(ids []string) error {
		rs, err := s.rows(ctx, ids, needsPayload(f), true)
		if err != nil {
			return err
		}
		var keyed []*row
		for _, r := range rs {
			if r.j.UniqueKey == "" || !match(r, f, p.ExcludeSuperseded, p.AsOf) {
				continue
			}
			if mask, _ := strconv.ParseInt(r.us, 10, 64); sluicetype.UniqueMaskHolds(mask, p.To) {
				keyed = append(keyed, r)
			}
		}
		return s.countHeld(ctx, keyed, out)
	}
	if len(f.IDs) > 0 || f.UniqueKey != "" || f.Fingerprint != "" {
		pl, err := s.planFor(ctx, f)
		if err != nil {
			return nil, err
		}
		return out, check(pl.ids)
	}
	// SSCAN may return a member twice; each job is counted once.
	seen := map[string]bool{}
	var cursor uint64
	for {
		ids, next, err := s.c.SScan(ctx, s.key("ukjobs"), cursor, "", 500).Result()
		if err != nil {
			return nil, fmt.Errorf("redis: jobs with unique keys: %w", err)
		}
		fresh := ids[:0]
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				fresh = append(fresh, id)
			}
		}
		if err := check(fresh); err != nil {
			return nil, err
		}
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// countHeld adds to out the jobs of rs whose key another job holds.
func (s *Store) countHeld(ctx context.Context, rs []*row, out *backend.UniqueHeldCount) error {
	if len(rs) == 0 {
		return nil
	}
	pipe := s.c.Pipeline()
	names := make([]*goredis.StringCmd, len(rs))
	for i, r := range rs {
		names[i] = pipe.Get(ctx, s.key("uq", r.j.UniqueKey))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("redis: unique holders: %w", err)
	}
	var named []*row
	var ids []string
	for i, r := range rs {
		if id := names[i].Val(); id != "" && id != r.j.ID {
			named, ids = append(named, r), append(ids, id)
		}
	}
	if len(named) == 0 {
		return nil
	}
	pipe = s.c.Pipeline()
	hs := make([]*goredis.SliceCmd, len(ids))
	for i, id := range ids {
		hs[i] = pipe.HMGet(ctx, s.key("job", id), fState, fUniqueStates, fUniqueKey)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("redis: unique holders: %w", err)
	}
	for i, r := range named {
		v := hs[i].Val()
		if len(v) < 3 {
			continue
		}
		st, _ := v[0].(string)
		us, _ := v[1].(string)
		key, _ := v[2].(string)
		mask, _ := strconv.ParseInt(us, 10, 64)
		if key == r.j.UniqueKey && sluicetype.UniqueMaskHolds(mask, sluicetype.State(st)) {
			out.Held++
			if out.Holder == "" || ids[i] < out.Holder {
				out.Holder = ids[i]
			}
		}
	}
	return nil
}
