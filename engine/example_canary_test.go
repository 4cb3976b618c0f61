package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// A canary retry bets on a fix only after a sample of the dead jobs
// succeeded: here the outage still lasts, so the sample dies again and
// the run halts itself, leaving the rest alone. Once the downstream is
// back, the operator resumes it and it redrives the rest.
func ExampleBulkParams_canary() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx) // a SQLite file in a temporary directory
	defer closeStore()

	var down atomic.Bool
	down.Store(true)
	e, err := engine.New(store, engine.Config{
		Queues:              map[string]engine.QueueConfig{"billing": {Concurrency: 4}},
		MaintenanceInterval: 50 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	err = e.Register(engine.Kind{Name: "invoice.generate", MaxAttempts: 1, Handler: func(context.Context, *engine.Job) error {
		if down.Load() {
			return errors.New("dial tcp 10.0.0.7:5432: connect: connection refused")
		}
		return nil
	}})
	if err != nil {
		log.Fatal(err)
	}
	died := make(chan string, 10)
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) { died <- ev.Job.ID })
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	for i := range 10 {
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: "billing", Kind: "invoice.generate", Args: map[string]int{"invoice": i}}); err != nil {
			log.Fatal(err)
		}
	}
	for range 10 {
		<-died
	}

	dead := engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"}}
	started, err := e.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead,
		Canary: &engine.CanaryParams{Size: 3, MinSuccess: 0.9, HaltFailureRate: 0.2}})
	if err != nil {
		log.Fatal(err)
	}
	id := started.Operation.ID
	op := waitEnd(ctx, e, id)
	fmt.Println(op.Status, "-", op.Error)
	fmt.Println("redriven past the sample:", op.Processed)

	down.Store(false)
	if _, err := e.ResumeOperation(ctx, id); err != nil {
		log.Fatal(err)
	}
	op = waitEnd(ctx, e, id)
	fmt.Println(op.Status, "- redriven past the sample:", op.Processed)
	// Output:
	// halted - halted: canary sample 3: 0 ok, 3 failed, 0 running (90% needed) — dial tcp 10.0.0.7:5432: connect: connection refused
	// redriven past the sample: 0
	// completed - redriven past the sample: 7
}

// waitEnd polls operation id until it ends or halts.
func waitEnd(ctx context.Context, c engine.Control, id string) *engine.Operation {
	for {
		op, err := c.Operation(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		if op.Status != engine.OperationPending && op.Status != engine.OperationRunning {
			return op
		}
		time.Sleep(20 * time.Millisecond)
	}
}
