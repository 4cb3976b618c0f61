package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// claimRecording is a SQLite store that records each claim's ask and
// what the store said of it.
type claimRecording struct {
	*sqlite.Store
	mu     sync.Mutex
	claims []recordedClaim
}

type recordedClaim struct {
	asked, took int
	bound       bool
}

func (s *claimRecording) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	res, err := s.Store.JobClaim(ctx, p)
	if err == nil {
		s.mu.Lock()
		s.claims = append(s.claims, recordedClaim{asked: p.Limit, took: len(res.Jobs), bound: res.Bound})
		s.mu.Unlock()
	}
	return res, err
}

// TestBoundLimitShrinksSurplus: while a limit across processes binds a
// queue's claims, the process holds fewer jobs ahead of its slots (they
// count under the limit without running): after a claim the limit bound,
// the next asks for at most the slots plus half the surplus the bound
// claim was sized with; claims the limit did not bind raise it back, a
// quarter of the concurrency a claim, until it lifts. A reference model
// of that rule follows the recorded claims; with the limit removed, the
// claims ask for the whole prefetch again.
func TestBoundLimitShrinksSurplus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const concurrency, prefetch, limit, jobs = 4, 40, 12, 400
	s := &claimRecording{Store: sqlitetest.New(t)}
	e, err := engine.New(s, engine.Config{NoMaintenance: true, PollInterval: 20 * time.Millisecond,
		Queues: map[string]engine.QueueConfig{"q": {Concurrency: concurrency, Prefetch: prefetch}},
		Limits: []engine.Limit{{Scope: engine.LimitKind, Name: "k", Concurrency: limit}}})
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	if err := e.Register(engine.Kind{Name: "k", Handler: func(context.Context, *engine.Job) error {
		time.Sleep(time.Millisecond)
		done.Add(1)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	enqueue := func(n int) {
		t.Helper()
		ps := make([]engine.EnqueueParams, n)
		for i := range ps {
			ps[i] = engine.EnqueueParams{Queue: "q", Kind: "k", Args: map[string]int{"i": i}}
		}
		if _, err := e.EnqueueMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for done.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d jobs done after a minute", done.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	enqueue(jobs)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(context.WithoutCancel(ctx)) })
	wait(jobs)

	s.mu.Lock()
	claims := append([]recordedClaim(nil), s.claims...)
	s.claims = nil
	s.mu.Unlock()
	// The model: capped -1 is no cap; a claim asks at most the slots
	// plus the surplus within the cap.
	capped, bounds := -1, 0
	for i, c := range claims {
		surplus := prefetch
		if capped >= 0 {
			surplus = min(surplus, capped)
		}
		if c.asked > concurrency+surplus {
			t.Fatalf("claim %d asked %d, over %d slots + a surplus of %d (claims so far: %v)", i, c.asked, concurrency, surplus, claims[:i+1])
		}
		if c.took > limit {
			t.Fatalf("claim %d took %d under a limit of %d", i, c.took, limit)
		}
		switch {
		case c.bound:
			bounds++
			capped = surplus / 2
		case capped >= 0:
			capped += max(1, concurrency/4)
			if capped >= prefetch {
				capped = -1
			}
		}
	}
	if bounds == 0 {
		t.Fatalf("no claim of %d was bound by the limit of %d with %d slots and a prefetch of %d: the test shows nothing", len(claims), limit, concurrency, prefetch)
	}
	t.Logf("%d claims, %d bound by the limit", len(claims), bounds)

	// The limit gone, the cap lifts: a claim asks for the slots and the
	// whole prefetch again.
	if err := e.SetLimit(ctx, engine.Limit{Scope: engine.LimitKind, Name: "k"}); err != nil {
		t.Fatal(err)
	}
	most := 0
	for round := 1; most < concurrency+prefetch; round++ {
		if round > 20 {
			t.Fatalf("after %d rounds of %d jobs with no limit, the largest claim asked %d, want %d", round-1, jobs, most, concurrency+prefetch)
		}
		enqueue(jobs)
		wait(int64(jobs * (round + 1)))
		s.mu.Lock()
		for _, c := range s.claims {
			most = max(most, c.asked)
		}
		s.mu.Unlock()
	}
}
