package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sluicehq/sluice/engine"
)

// Receipt is the payload of the receipt.send kind in the worker example.
type Receipt struct {
	Invoice string `json:"invoice"`
	To      string `json:"to"`
}

// A worker with a typed handler: TypedHandler decodes each job's payload
// into the handler's argument. A returned error is a failed attempt
// (retried with backoff until MaxAttempts), engine.Skip archives the job
// at once, and nil completes it.
func ExampleTypedHandler() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx) // a SQLite file in a temporary directory
	defer closeStore()

	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{"email": {Concurrency: 4}},
	})
	if err != nil {
		log.Fatal(err)
	}
	sent := make(chan string, 1)
	err = e.Register(engine.Kind{
		Name:        "receipt.send",
		MaxAttempts: 3,
		Handler: engine.TypedHandler(func(ctx context.Context, job *engine.Job, r Receipt) error {
			if r.To == "" {
				return engine.Skip("no recipient")
			}
			sent <- fmt.Sprintf("receipt for %s to %s (attempt %d)", r.Invoice, r.To, job.Attempt+1)
			return nil
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	job, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: "email", Kind: "receipt.send",
		Args: Receipt{Invoice: "INV-1", To: "ann@example.com"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-sent)
	// Stop waits for running handlers and commits their outcomes.
	if err := e.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	d, err := e.GetJob(ctx, job.ID, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Job.State)
	// Output:
	// receipt for INV-1 to ann@example.com (attempt 1)
	// completed
}
