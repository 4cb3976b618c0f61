package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// Enqueue a unique job: one pending reminder per customer. A second
// enqueue for the same customer while the first is not finished returns
// the job already enqueued (Existing), whatever the rest of its payload;
// another customer gets a job of its own. Once the first job is finished
// (here cancelled) its key is free, and a retry of it that would make a
// second holder is refused naming the live job. Period: time.Hour would
// make it one per customer per hour (of the job's due time).
func ExampleUniqueOpts() {
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
	e, err := engine.New(store, engine.Config{})
	if err != nil {
		log.Fatal(err)
	}

	perCustomer := &engine.UniqueOpts{Fields: []string{"customer"}}
	remind := func(id, customer, note string) engine.EnqueueResult {
		res, err := e.EnqueueMany(ctx, []engine.EnqueueParams{{
			ID: id, Queue: "email", Kind: "reminder.send", Unique: perCustomer,
			Args: map[string]string{"customer": customer, "note": note},
		}})
		if err != nil {
			log.Fatal(err)
		}
		if res[0].Err != nil {
			log.Fatal(res[0].Err)
		}
		return res[0]
	}
	a := remind("r-1", "c-42", "first")
	b := remind("r-2", "c-42", "second")
	c := remind("r-3", "c-7", "first")
	fmt.Println(a.Job.ID, a.Existing)
	fmt.Println(b.Job.ID, b.Existing, b.Job.UniqueKey == a.Job.UniqueKey)
	fmt.Println(c.Job.ID, c.Existing)

	// Finished, the job gives its key up; the next enqueue takes it.
	if _, err := e.Cancel(ctx, "r-1"); err != nil {
		log.Fatal(err)
	}
	d := remind("r-4", "c-42", "third")
	fmt.Println(d.Job.ID, d.Existing)

	// Retrying the cancelled job would make two holders: refused.
	_, err = e.Retry(ctx, "r-1", engine.RetryOptions{})
	var held *engine.UniqueHeldError
	fmt.Println(errors.As(err, &held), held.HolderID)

	// A field the payload lacks is refused at enqueue.
	_, err = e.Enqueue(ctx, engine.EnqueueParams{Queue: "email", Kind: "reminder.send",
		Unique: &engine.UniqueOpts{Fields: []string{"region"}}, Args: map[string]string{"customer": "c-1"}})
	fmt.Println(errors.Is(err, engine.ErrInvalid))
	// Output:
	// r-1 false
	// r-1 true true
	// r-3 false
	// r-4 false
	// true r-4
	// true
}
