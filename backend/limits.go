package backend

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// LimitStore keeps concurrency limits that hold across every process
// sharing the store, and enforces them in JobClaim (limits.go of each
// store, ARCHITECTURE.md "Global limits").
//
// How a claim keeps within a limit without a hot row: it counts the
// running jobs the limit covers, inside the claim's own transaction (or
// script), and takes no more than the limit leaves. Nothing is written per
// limit on a claim or a finish, so no row is updated by every worker; a
// job leaving running (finished, failed, its lease reaped) frees its slot
// by no longer being counted. Two claims cannot both see N-1: SQLite's
// claims are serialised by its write lock; PostgreSQL's claims under a
// limit take a transaction-scoped advisory lock per limit first and count
// after it (READ COMMITTED: the count's snapshot follows the lock); a
// Redis claim is one script.
type LimitStore interface {
	// LimitList returns every limit, sorted by scope and name, each with
	// the jobs it counts running now.
	LimitList(ctx context.Context) ([]sluicetype.Limit, error)
	// LimitSet sets a limit; Concurrency 0 removes it. It takes effect at
	// the next claim of every process (within LimitRefresh).
	LimitSet(ctx context.Context, p *LimitSetParams) error
}

// LimitStoreOf returns s's limits, or an error matching ErrUnsupported
// when s keeps none.
func LimitStoreOf(s Store) (LimitStore, error) {
	l, ok := s.(LimitStore)
	if !ok || !Declares(s, CapabilityLimits) {
		return nil, fmt.Errorf("%w: this store (%s) keeps no limits", sluicetype.ErrUnsupported, s.Backend())
	}
	return l, nil
}

type LimitSetParams struct {
	Scope       sluicetype.LimitScope
	Name        string
	Concurrency int
	// Key partitions the limit by a top-level payload field (kind limits
	// only; sluicetype.ValidLimitKey).
	Key string
	// Rate starts in any RateWindow (a second when 0); 0 is none.
	Rate       int
	RateWindow time.Duration
	Actor      string
}

// Removes reports whether the write removes the limit: neither a
// concurrency nor a rate.
func (p *LimitSetParams) Removes() bool { return p.Concurrency == 0 && p.Rate == 0 }

// Valid refuses a limit no store can hold.
func (p *LimitSetParams) Valid() bool {
	return p.Scope.Valid() && p.Name != "" && p.Concurrency >= 0 && p.Rate >= 0 && p.RateWindow >= 0 &&
		(p.Key == "" || (p.Scope == sluicetype.LimitKind && sluicetype.ValidLimitKey(p.Key) && p.Rate == 0))
}

// ClaimPartition narrows a claim to jobs whose payload's Key has fewer
// than Max running jobs of the same kind (a partitioned limit). Set only
// by ClaimUnderLimits, on a part of one kind that takes one job.
type ClaimPartition struct {
	Key string
	Max int
}

// LimitRefresh is how long a store may claim under limits it read before:
// a limit set in one process holds in every other within it.
const LimitRefresh = time.Second

// LimitCache holds a store's limits for up to LimitRefresh, so that a
// claim with no limits set costs no read.
type LimitCache struct {
	mu     sync.Mutex
	at     time.Time
	limits []sluicetype.Limit
}

// Get returns the cached limits, reading them with load when older than
// LimitRefresh.
func (c *LimitCache) Get(ctx context.Context, load func(context.Context) ([]sluicetype.Limit, error)) ([]sluicetype.Limit, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < LimitRefresh {
		return c.limits, nil
	}
	ls, err := load(ctx)
	if err != nil {
		return nil, err
	}
	c.limits, c.at = ls, time.Now()
	return ls, nil
}

// Forget makes the next Get read the limits again (after this process set
// one).
func (c *LimitCache) Forget() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

// LimitsFor picks the limits a claim of p can break: its queue's, and
// those of its kinds (of every kind when p names none), sorted by scope
// and name — the order PostgreSQL takes their locks in.
func LimitsFor(p *JobClaimParams, all []sluicetype.Limit) []sluicetype.Limit {
	var out []sluicetype.Limit
	for _, l := range all {
		if l.Concurrency <= 0 && l.Rate <= 0 {
			continue
		}
		switch l.Scope {
		case sluicetype.LimitQueue:
			if l.Name == p.Queue {
				out = append(out, l)
			}
		case sluicetype.LimitKind:
			if _, ok := p.Kinds[l.Name]; ok || len(p.Kinds) == 0 {
				out = append(out, l)
			}
		}
	}
	SortLimits(out)
	return out
}

// SortLimits sorts limits by scope, then name.
func SortLimits(ls []sluicetype.Limit) {
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].Scope != ls[j].Scope {
			return ls[i].Scope < ls[j].Scope
		}
		return ls[i].Name < ls[j].Name
	})
}

// ClaimUnderLimits runs a claim as parts that each keep within the
// limits, given how many jobs each limit counted running and started in
// its rate window (limits[i] has running[i] and starts[i]), inside the
// caller's transaction: claim takes one part. The store records the
// starts of the jobs it returns (RateLimited names the limits to).
//
// The queue's limit caps the whole claim. Each limited kind is claimed on
// its own, up to what its limit leaves (a full kind's part takes nothing
// but still archives its jobs past their deadline); then the kinds
// without a limit share what is left. Claim order holds within a part,
// not across parts. A claim of any kind (Kinds empty) takes no job while
// any kind limit is set: it cannot tell a limited kind's jobs apart
// (the engine always names its kinds).
func ClaimUnderLimits(p *JobClaimParams, limits []sluicetype.Limit, running, starts []int64,
	claim func(part *JobClaimParams) (*JobClaimResult, error)) (*JobClaimResult, error) {
	left := p.Limit
	room := map[string]int{}
	for i, l := range limits {
		free := p.Limit
		if l.Concurrency > 0 {
			free = max(0, l.Concurrency-int(running[i]))
		}
		if l.Rate > 0 {
			free = min(free, max(0, l.Rate-int(starts[i])))
		}
		switch {
		case l.Scope == sluicetype.LimitQueue:
			left = min(left, free)
		case l.Key != "":
			// Partitioned: no room for the kind as a whole.
		default:
			room[l.Name] = free
		}
	}
	parts := ClaimParts(p, limits)
	out := &JobClaimResult{Limited: len(limits) > 0}
	// The queue's limit binds when the claim takes all it leaves, less
	// than asked; a kind's, when its part takes all the room it leaves,
	// less than the claim could still take. A limit that leaves no room
	// does not say here whether it kept a job back: telling would cost a
	// query per claim (Bound's contract lets a store leave it unsaid).
	queueRoom := left
	suspects := p.Suspects
	for _, kinds := range parts {
		n := left
		kindRoom := -1
		if len(kinds) == 1 {
			for k := range kinds {
				if r, ok := room[k]; ok && r < n {
					n, kindRoom = r, r
				}
			}
		}
		took := 0
		part := *p
		part.Kinds, part.Limit = kinds, n
		pt := PartitionOf(kinds, limits)
		// A partitioned kind is claimed one job at a time, each claim
		// counting its partition's running jobs with the ones before it
		// in the same transaction: a batch could take two of one
		// customer's jobs past its room.
		for first := true; first || (pt != nil && n > 0); first = false {
			if pt != nil {
				part.Partition, part.Limit = pt, min(n, 1)
			}
			part.Suspects = min(suspects, part.Limit)
			part.Lone = p.Lone && len(out.Jobs) == 0
			res, err := claim(&part)
			if err != nil {
				return nil, err
			}
			out.Now = res.Now
			out.Dead = append(out.Dead, res.Dead...)
			for _, j := range res.Jobs {
				if j.CrashAttempt == 1 {
					suspects--
				}
			}
			out.Jobs = append(out.Jobs, res.Jobs...)
			left -= len(res.Jobs)
			n -= len(res.Jobs)
			took += len(res.Jobs)
			if len(res.Jobs) == 0 {
				break
			}
			part.PastDeadline = ClaimDeadlineWrite{} // archived by the first
		}
		if kindRoom > 0 && took == kindRoom {
			out.Bound = true
		}
	}
	if queueRoom > 0 && queueRoom < p.Limit && len(out.Jobs) == queueRoom {
		out.Bound = true
	}
	return out, nil
}

// ClaimParts are the kind sets ClaimUnderLimits claims, in order: each
// limited kind of p alone, then the others together (nil: any kind) — so
// that a store can prepare their statements before its transaction.
func ClaimParts(p *JobClaimParams, limits []sluicetype.Limit) []map[string]int {
	limited := map[string]bool{}
	for _, l := range limits {
		if l.Scope == sluicetype.LimitKind {
			limited[l.Name] = true
		}
	}
	var parts []map[string]int
	rest := map[string]int{}
	for k, v := range p.Kinds {
		if limited[k] {
			parts = append(parts, map[string]int{k: v})
		} else {
			rest[k] = v
		}
	}
	slices.SortFunc(parts, compareOnlyKey)
	switch {
	case len(rest) > 0:
		parts = append(parts, rest)
	case len(p.Kinds) == 0 && len(limited) == 0:
		parts = append(parts, nil)
	}
	return parts
}

// PartitionOf is the partition a claim part of kinds takes under limits:
// that of its one kind's partitioned limit, or nil.
func PartitionOf(kinds map[string]int, limits []sluicetype.Limit) *ClaimPartition {
	if len(kinds) != 1 {
		return nil
	}
	for _, l := range limits {
		if _, ok := kinds[l.Name]; ok && l.Scope == sluicetype.LimitKind && l.Key != "" {
			return &ClaimPartition{Key: l.Key, Max: l.Concurrency}
		}
	}
	return nil
}

// LimitStarts are a claim's starts under one rate limit.
type LimitStarts struct {
	Limit sluicetype.Limit
	N     int
}

// RateStarts counts, for each rate limit, the started jobs its window
// counts: a store records one row (or member) per limit and claim holding
// N, so a window's reads grow with the claims in it, not the jobs.
func RateStarts(limits []sluicetype.Limit, jobs []*sluicetype.Job) (out []LimitStarts) {
	for _, l := range limits {
		if l.Rate <= 0 {
			continue
		}
		n := 0
		for _, j := range jobs {
			if (l.Scope == sluicetype.LimitKind && l.Name == j.Kind) || (l.Scope == sluicetype.LimitQueue && l.Name == j.Queue) {
				n++
			}
		}
		if n > 0 {
			out = append(out, LimitStarts{Limit: l, N: n})
		}
	}
	return out
}

// compareOnlyKey orders one-kind maps by their kind.
func compareOnlyKey(a, b map[string]int) int {
	var x, y string
	for k := range a {
		x = k
	}
	for k := range b {
		y = k
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
