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

// A handler made of steps: the charge is made once, even though the
// receipt step fails on the first run and the job runs again. The retry
// replays "charge" from its checkpoint (its stored result, the charge id)
// and runs only "receipt".
func ExampleStep() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx) // a SQLite file in a temporary directory
	defer closeStore()

	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{"billing": {Concurrency: 1}},
	})
	if err != nil {
		log.Fatal(err)
	}
	var charges, receipts atomic.Int32
	done := make(chan string, 1)
	err = e.Register(engine.Kind{Name: "order.pay", Backoff: func(int) time.Duration { return 0 },
		Handler: func(ctx context.Context, j *engine.Job) error {
			id, err := engine.Step(ctx, "charge", func(context.Context) (string, error) {
				return fmt.Sprintf("ch_%d", charges.Add(1)), nil
			})
			if err != nil {
				return err
			}
			_, err = engine.Step(ctx, "receipt", func(context.Context) (bool, error) {
				if receipts.Add(1) == 1 {
					return false, errors.New("mail server busy")
				}
				return true, nil
			})
			if err != nil {
				return err
			}
			done <- id
			return nil
		}})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: "billing", Kind: "order.pay"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("paid with", <-done)
	fmt.Println("charges:", charges.Load(), "receipt runs:", receipts.Load())
	// Output:
	// paid with ch_1
	// charges: 1 receipt runs: 2
}
