package backendtest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// testConcurrency: eight engines over one store share 10,000 jobs; no job
// ever runs in two handlers at once, and every job succeeds exactly once,
// with one to three acknowledgement writers per engine.
func testConcurrency(t *testing.T, h Harness) {
	base := h.NewStore(t)
	s := &latencyStore{Store: base}
	total := 10_000
	if testing.Short() {
		total = 2_000
	}
	const engines, perEngine, batch = 8, 8, 1000

	var inflight, successes sync.Map // job id -> *atomic.Int32
	var violations, done atomic.Int64
	handler := func(_ context.Context, j *engine.Job) error {
		v, _ := inflight.LoadOrStore(j.ID, new(atomic.Int32))
		in := v.(*atomic.Int32)
		if in.Add(1) > 1 {
			violations.Add(1)
		}
		runtime.Gosched() // widen the window a double run would show in
		in.Add(-1)
		v, _ = successes.LoadOrStore(j.ID, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		done.Add(1)
		return nil
	}

	began := time.Now()
	es := make([]*engine.Engine, engines)
	for i := range es {
		cfg := fast(fmt.Sprintf("worker-%d", i), "bulk")
		cfg.Queues["bulk"] = engine.QueueConfig{Concurrency: perEngine}
		// Generous leases and heartbeats: this check is about exclusive
		// claims. Eight engines on one store queue their writes; under
		// -race on a loaded machine a heartbeat or renewal has been seen
		// to wait 8 s (see the log line), and a living worker whose
		// lease and heartbeat both run out is rightly taken for dead.
		cfg.LeaseDuration = 30 * time.Second
		cfg.HeartbeatInterval = time.Second
		// One, two and three acknowledgement writers: batches of one
		// engine in flight at once must keep exactly-once too.
		cfg.CompleteWriters = i%3 + 1
		es[i] = startEngine(t, s, cfg, engine.Kind{Name: "work", Handler: handler})
	}

	ctx := context.Background()
	for b := 0; b < total; b += batch {
		ps := make([]engine.EnqueueParams, 0, batch)
		for i := b; i < min(b+batch, total); i++ {
			ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("c-%05d", i), Queue: "bulk", Kind: "work", Args: map[string]int{"i": i}})
		}
		res, err := es[b/batch%engines].EnqueueMany(ctx, ps)
		if err != nil {
			t.Fatalf("EnqueueMany: %v", err)
		}
		for i, r := range res {
			if r.Err != nil || r.Job == nil || r.Existing {
				t.Fatalf("job %s: %+v", ps[i].ID, r)
			}
		}
	}
	enqueued := time.Since(began)

	eventually(t, 5*time.Minute, func() bool { return done.Load() >= int64(total) },
		"%d handler successes (have %d)", total, done.Load())
	ran := time.Since(began)
	for _, e := range es {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := e.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		cancel()
	}

	if n := violations.Load(); n != 0 {
		t.Fatalf("%d times a job ran in two handlers at once", n)
	}
	completed, doubles := 0, 0
	for i := range total {
		id := fmt.Sprintf("c-%05d", i)
		v, ok := successes.Load(id)
		if !ok {
			t.Fatalf("job %s never ran", id)
		}
		j := getJob(t, s, id)
		if n := v.(*atomic.Int32).Load(); n != 1 {
			// Say why: a lease lost to the reaper shows in the events.
			if doubles++; doubles <= 5 {
				t.Errorf("job %s succeeded %d times, want exactly 1: %s lease-by %q events %+v",
					id, n, describe(j), j.AttemptedBy, events(t, s, id))
			}
			continue
		}
		if j.State != engine.StateCompleted || j.Attempt != 0 || j.CrashAttempt != 0 {
			t.Fatalf("job %s: %s", id, describe(j))
		}
		checkLease(t, j)
		completed++
	}
	if doubles > 0 {
		t.Fatalf("%d jobs succeeded more than once", doubles)
	}
	if completed != total {
		t.Fatalf("%d completed, want %d", completed, total)
	}
	t.Logf("%d jobs over %d engines × %d: enqueued in %s, all run in %s, verified in %s; slowest heartbeat %s, lease renewal %s",
		total, engines, perEngine, enqueued.Round(time.Millisecond), ran.Round(time.Millisecond), time.Since(began).Round(time.Millisecond),
		time.Duration(s.beat.Load()).Round(time.Millisecond), time.Duration(s.renew.Load()).Round(time.Millisecond))
}

// latencyStore records the slowest heartbeat and lease renewal: when they
// stall past the heartbeat TTL or the lease, a living worker looks dead.
type latencyStore struct {
	backend.Store
	beat, renew atomic.Int64 // nanoseconds
}

func maxInto(a *atomic.Int64, d time.Duration) {
	for {
		m := a.Load()
		if int64(d) <= m || a.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

func (l *latencyStore) WorkerHeartbeat(ctx context.Context, p *backend.WorkerHeartbeatParams) error {
	t0 := time.Now()
	defer func() { maxInto(&l.beat, time.Since(t0)) }()
	return l.Store.WorkerHeartbeat(ctx, p)
}

func (l *latencyStore) JobLeaseRenew(ctx context.Context, p *backend.JobLeaseRenewParams) ([]error, error) {
	t0 := time.Now()
	defer func() { maxInto(&l.renew, time.Since(t0)) }()
	return l.Store.JobLeaseRenew(ctx, p)
}
