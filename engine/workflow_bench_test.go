package engine_test

// Workflow benchmarks: 5-step no-op workflows against plain no-op jobs on
// the same store, on each backend (a fresh store per benchmark; the
// PostgreSQL and Redis cases skip when their server does not answer).
// Figures and commands are in BENCHMARKS.md:
//
//	go test -run XXX -bench 'Workflow|Plain' -benchtime 20000x ./engine/

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

var benchStores = []struct {
	name string
	open func(b *testing.B) backend.Store
}{
	{"sqlite", func(b *testing.B) backend.Store { return sqlitetest.New(b) }},
	{"postgres", func(b *testing.B) backend.Store { return pgtest.New(b) }},
	{"redis", func(b *testing.B) backend.Store { return redistest.New(b) }},
}

// runNoops runs b.N jobs of one kind whose handler is h at concurrency 50
// and reports jobs/s (and steps/s for steps > 0); the clock runs from
// Start to the return of Stop.
func runNoops(b *testing.B, store backend.Store, steps int) {
	n := int64(b.N)
	var handled atomic.Int64
	done := make(chan struct{})
	e, err := engine.New(store, engine.Config{
		Queues:    map[string]engine.QueueConfig{benchQueue: {Concurrency: 50}},
		Retention: map[engine.State]time.Duration{},
	})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, steps)
	for i := range names {
		names[i] = fmt.Sprintf("step%d", i+1)
	}
	err = e.Register(engine.Kind{Name: "bench.noop", Handler: func(ctx context.Context, _ *engine.Job) error {
		for _, name := range names {
			if _, err := engine.Step(ctx, name, func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
		}
		if handled.Add(1) == n {
			close(done)
		}
		return nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	enqueueAll(b, e, b.N)
	ctx := context.Background()
	b.ResetTimer()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Minute):
		b.Fatalf("timed out with %d of %d handled", handled.Load(), n)
	}
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	if steps > 0 {
		b.ReportMetric(float64(b.N*steps)/b.Elapsed().Seconds(), "steps/s")
	}
}

// BenchmarkWorkflow5Steps: each job is a workflow of 5 no-op steps, each
// step one checkpoint write under the lease.
func BenchmarkWorkflow5Steps(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) { runNoops(b, bs.open(b), 5) })
	}
}

// BenchmarkPlainNoop: the same jobs without steps, on the same stores.
func BenchmarkPlainNoop(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) { runNoops(b, bs.open(b), 0) })
	}
}
