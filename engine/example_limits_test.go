package engine_test

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Limits hold across every process on the store: here at most 2
// charges run at once however many workers claim them, set in code and
// then changed at runtime through engine.Control, as the console, the
// CLI and the API change them.
func ExampleEngine_SetLimit() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx) // a SQLite file in a temporary directory
	defer closeStore()

	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{"billing": {Concurrency: 8}},
		Limits: []engine.Limit{{Scope: engine.LimitKind, Name: "billing.charge", Concurrency: 2}},
	})
	if err != nil {
		log.Fatal(err)
	}
	var now, most, done atomic.Int64
	err = e.Register(engine.Kind{Name: "billing.charge", Handler: func(context.Context, *engine.Job) error {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(10 * time.Millisecond)
		now.Add(-1)
		done.Add(1)
		return nil
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for i := range 10 {
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: "billing", Kind: "billing.charge",
			Args: map[string]int{"customer": i % 3}}); err != nil {
			log.Fatal(err)
		}
	}
	for done.Load() < 10 {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("at most 2 at once:", most.Load() <= 2)

	// At runtime: 1 per customer instead, in every process within a second.
	var ctl engine.Control = e
	if err := ctl.SetLimit(ctx, engine.Limit{Scope: engine.LimitKind, Name: "billing.charge", Concurrency: 1,
		Key: "customer"}); err != nil {
		log.Fatal(err)
	}
	ls, err := ctl.ListLimits(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range ls {
		fmt.Printf("%s: %d\n", l, l.Concurrency)
	}
	if err := e.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// at most 2 at once: true
	// kind billing.charge per customer: 1
}
