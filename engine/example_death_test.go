package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/sluicehq/sluice/engine"
)

// A death handler: OnDead runs once for each job that dies (archived when
// its attempts are exhausted, it skipped or its deadline passed;
// quarantined after its crashes), after the store has recorded the death,
// on a copy of the job. Use it for alerts and metrics; it cannot break the
// worker.
func ExampleEngine_OnDead() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx) // a SQLite file in a temporary directory
	defer closeStore()

	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{"billing": {Concurrency: 1}},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = e.Register(engine.Kind{
		Name:        "invoice.generate",
		MaxAttempts: 1, // the first failure is the last
		Handler: func(context.Context, *engine.Job) error {
			return errors.New("dial tcp 10.0.0.12:5432: connection refused")
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	died := make(chan engine.DeathEvent, 1)
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) {
		died <- ev
	})
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: "billing", Kind: "invoice.generate",
		Payload: []byte(`{"invoice":"INV-7"}`)}); err != nil {
		log.Fatal(err)
	}
	ev := <-died
	fmt.Println(ev.Job.Kind, ev.Job.State, ev.Reason)
	fmt.Println(ev.Error)
	// Output:
	// invoice.generate archived attempts_exhausted
	// dial tcp 10.0.0.12:5432: connection refused
}
