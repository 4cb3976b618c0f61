package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sluicehq/sluice/engine"
)

// Every job of a queue, with its payload, one page of the store at a time:
// what `sluice jobs export` and GET /api/v1/jobs/export write.
func ExampleExportJobs() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx) // a SQLite file in a temporary directory
	defer closeStore()

	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		_, err := e.Enqueue(ctx, engine.EnqueueParams{ID: fmt.Sprintf("inv-%d", i), Queue: "billing",
			Kind: "invoice.generate", Args: map[string]int{"invoice": i}})
		if err != nil {
			log.Fatal(err)
		}
	}
	f, err := engine.ParseQuery("queue:billing")
	if err != nil {
		log.Fatal(err)
	}
	n := 0
	err = engine.ExportJobs(ctx, e, engine.ExportJobsParams{Filter: f, WithPayload: true}, func(j *engine.Job) error {
		n++
		if j.ID == "inv-1" {
			fmt.Println(j.ID, j.State, string(j.Payload))
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exported:", n)
	// Output:
	// inv-1 available {"invoice":1}
	// exported: 3
}
