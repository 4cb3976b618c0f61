package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/sluicehq/sluice/engine"
)

// The operator's side, through engine.Control, which the embedded engine
// and api.Client both implement: retry one dead job, then preview a bulk
// retry of the rest and run it. A real bulk run is a persisted operation;
// a started engine's maintenance drives it, and a process with no engine
// running drives it itself with RunOperation, as here.
func ExampleControl() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx) // a SQLite file in a temporary directory
	defer closeStore()

	// Three jobs die: their one attempt fails.
	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{"billing": {Concurrency: 3}},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = e.Register(engine.Kind{Name: "invoice.generate", MaxAttempts: 1,
		Handler: func(context.Context, *engine.Job) error { return errors.New("currency service down") }})
	if err != nil {
		log.Fatal(err)
	}
	died := make(chan string, 3)
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) { died <- ev.Job.ID })
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		_, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: "billing", Kind: "invoice.generate",
			Args: map[string]int{"invoice": i}})
		if err != nil {
			log.Fatal(err)
		}
	}
	first := <-died
	<-died
	<-died
	// The cause is fixed in a new release; stop the workers of the old one.
	if err := e.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	var ctl engine.Control = e
	job, err := ctl.Retry(ctx, first, engine.RetryOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried one:", job.State)

	dead := engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"}}
	preview, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead, DryRun: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a bulk retry would take:", preview.Matched)

	started, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := e.RunOperation(ctx); err != nil {
		log.Fatal(err)
	}
	op, err := ctl.Operation(ctx, started.Operation.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("operation:", op.Status, op.Succeeded, "retried")

	page, err := ctl.ListJobs(ctx, engine.ListJobsParams{
		Filter: engine.Filter{States: []engine.State{engine.StateAvailable}}, Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("available again:", len(page.Jobs))
	// Output:
	// retried one: available
	// a bulk retry would take: 2
	// operation: completed 2 retried
	// available again: 3
}

// Counting what a filter matches, state by state: what the console's
// state tabs show under a filter the maintained counters cannot answer
// (an error text here). Each state is counted exactly up to a bound.
func ExampleEngine_CountJobs() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx)
	defer closeStore()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 4 {
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: "billing", Kind: "invoice.generate",
			Args: map[string]any{"invoice": i, "currency": []string{"EUR", "EURO"}[i%2]}}); err != nil {
			log.Fatal(err)
		}
	}
	f, err := engine.ParseQuery(`payload.currency:EURO`)
	if err != nil {
		log.Fatal(err)
	}
	c, err := e.CountJobs(ctx, engine.CountJobsParams{Filter: f})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("available:", c.States[engine.StateAvailable], "archived:", c.States[engine.StateArchived], "capped:", c.Capped)
	c, err = e.CountJobs(ctx, engine.CountJobsParams{Filter: f, Max: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("to 1:", c.States[engine.StateAvailable], c.IsCapped(engine.StateAvailable))
	// Output:
	// available: 2 archived: 0 capped: []
	// to 1: 1 true
}
