package engine_test

// Engine benchmarks on a real SQLite store (a fresh file per benchmark).
// Figures and the commands behind them are in BENCHMARKS.md:
//
//	go test -run XXX -bench . ./engine/

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

const benchQueue = "bench"

func noopParams(n int) []engine.EnqueueParams {
	ps := make([]engine.EnqueueParams, n)
	for i := range ps {
		ps[i] = engine.EnqueueParams{Queue: benchQueue, Kind: "bench.noop", Payload: []byte(`{}`)}
	}
	return ps
}

func enqueueAll(b testing.TB, e *engine.Engine, n int) {
	b.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 1000 {
		res, err := e.EnqueueMany(ctx, noopParams(min(1000, n-start)))
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
}

// BenchmarkEnqueueBatch1000 measures EnqueueMany of 1000 no-op jobs per
// call, from one goroutine.
func BenchmarkEnqueueBatch1000(b *testing.B) {
	store := sqlitetest.New(b)
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		enqueueAll(b, e, 1000)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkNoopThroughput measures the work side: b.N no-op jobs are
// inserted first (not timed), then one engine with one queue at
// concurrency 50 runs them; the clock stops when Stop has returned, that
// is when every acknowledgement is committed.
func BenchmarkNoopThroughput(b *testing.B) {
	store := sqlitetest.New(b)
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
	err = e.Register(engine.Kind{Name: "bench.noop", Handler: func(context.Context, *engine.Job) error {
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
	case <-time.After(10 * time.Minute):
		b.Fatalf("timed out with %d of %d handled", handled.Load(), n)
	}
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
