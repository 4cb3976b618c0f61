package backendtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// testErrorGroupsOneSnapshot: the error groups are read while jobs die,
// one after another in a known order, into four groups. Every answer
// must be the groups as they stood at one moment: each group once, and
// the counts of the first T deaths exactly, T being their sum — not one
// group as it was before a death and another as it was after it, which
// draws a list the store never held. Checked on the counters' path (the
// state and queue alone) and on the path that reads the groups' jobs (an
// error text besides).
func testErrorGroupsOneSnapshot(t *testing.T, h Harness) {
	s := h.NewStore(t)
	e := newEngine(t, s, engine.Config{WorkerID: "egs", NoMaintenance: true})
	ctl := h.control(t, e)
	ctx := context.Background()
	const queue, n = "egs", 240
	patterns := []string{"upstream a timed out", "upstream b refused", "upstream c reset", "upstream d gone"}
	// pattern of the i-th death: uneven, so that groups overtake each
	// other and no two prefixes share a count vector by chance.
	pick := func(i int) int { return (i*i + i/3) % len(patterns) }
	ps := make([]*backend.JobInsertParams, n)
	for i := range n {
		ps[i] = jobParams(fmt.Sprintf("egs-%03d", i), queue)
	}
	insert(t, s, ps...)
	var jobs []*engine.Job
	for len(jobs) < n {
		got := claimP(t, s, backend.JobClaimParams{Queue: queue, WorkerID: "egs", Limit: n}).Jobs
		if len(got) == 0 {
			t.Fatalf("claimed %d of %d jobs", len(jobs), n)
		}
		jobs = append(jobs, got...)
	}
	// prefix[T] is the groups after the first T deaths.
	prefix := make([]map[string]int64, n+1)
	prefix[0] = map[string]int64{}
	for i := range n {
		prefix[i+1] = maps.Clone(prefix[i])
		prefix[i+1][patterns[pick(i)]]++
	}

	filters := map[string]engine.Filter{
		"counters": {States: []engine.State{engine.StateArchived}, Queues: []string{queue}},
		"jobs":     {States: []engine.State{engine.StateArchived}, Queues: []string{queue}, Error: "upstream"},
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(filters))
	reads := make(map[string]int, len(filters))
	var mu sync.Mutex
	for name, f := range filters {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-done:
					if k > 0 {
						return
					}
				default:
				}
				gs, err := ctl.ErrorGroups(ctx, f)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				got := map[string]int64{}
				var total int64
				for _, g := range gs {
					if _, twice := got[g.Pattern]; twice {
						errs <- fmt.Errorf("%s: group %q listed twice in one answer: %+v", name, g.Pattern, gs)
						return
					}
					got[g.Pattern] = g.Count
					total += g.Count
				}
				if total > n || !maps.Equal(got, prefix[total]) {
					want := map[string]int64{}
					if total <= n {
						want = prefix[total]
					}
					errs <- fmt.Errorf("%s: an answer the store never held: %v (%d jobs); after %d deaths the groups were %v", name, got, total, total, want)
					return
				}
				mu.Lock()
				reads[name]++
				mu.Unlock()
			}
		})
	}
	for i, j := range jobs {
		msg := patterns[pick(i)]
		p := Outcome{JobRef: refOf(j), To: engine.StateArchived, Reason: engine.ReasonAttemptsExhausted, Charge: backend.ChargeAttempt,
			Error: &engine.AttemptError{Message: msg}, ErrorPattern: msg, Event: engine.EventArchived, Actor: "egs"}.Plan(j)
		if _, err := s.JobFinish(ctx, p); err != nil {
			close(done)
			wg.Wait()
			t.Fatal(err)
		}
		if len(errs) > 0 {
			break
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatal(err)
	}
	t.Logf("answers read while %d jobs died: %v", n, reads)
}
