package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// Enqueue a job. Args is marshalled to the job's JSON payload; the job
// waits as available until a worker for its queue claims it.
func ExampleEngine_Enqueue() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "jobs.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// An engine with no queues only enqueues: this process runs no workers.
	e, err := engine.New(store, engine.Config{})
	if err != nil {
		log.Fatal(err)
	}
	type Invoice struct {
		Invoice     string `json:"invoice"`
		AmountCents int    `json:"amount_cents"`
	}
	job, err := e.Enqueue(ctx, engine.EnqueueParams{
		Queue: "billing",
		Kind:  "invoice.generate",
		Args:  Invoice{Invoice: "INV-1", AmountCents: 1200},
		Tags:  []string{"customer:42"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Queue, job.Kind, job.State, job.Tags)

	// The stored job, with its payload.
	d, err := e.GetJob(ctx, job.ID, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(d.Job.Payload))
	// Output:
	// billing invoice.generate available [customer:42]
	// {"invoice":"INV-1","amount_cents":1200}
}
