package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/sluicehq/sluice/engine"
)

// Closing error groups: a group whose cause is fixed is resolved with a
// note, and reopens by itself, saying since when, when one of its jobs
// dies after; a group that does not matter is ignored, its jobs still
// dying and counted but left out of ErrorGroups.
func ExampleControl_ResolveErrorGroup() {
	ctx := context.Background()
	store, closeStore := exampleStore(ctx) // a SQLite file in a temporary directory
	defer closeStore()

	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{"billing": {Concurrency: 2}, "email": {Concurrency: 2}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for kind, msg := range map[string]string{"invoice.generate": "currency service down", "receipt.send": "sandbox mailbox full"} {
		err := e.Register(engine.Kind{Name: kind, MaxAttempts: 1,
			Handler: func(context.Context, *engine.Job) error { return errors.New(msg) }})
		if err != nil {
			log.Fatal(err)
		}
	}
	died := make(chan string, 4)
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) { died <- ev.Job.ID })
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = e.Stop(ctx) }()
	enqueue := func(queue, kind string) {
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: queue, Kind: kind}); err != nil {
			log.Fatal(err)
		}
		<-died
	}
	enqueue("billing", "invoice.generate")
	enqueue("email", "receipt.send")

	var ctl engine.Control = e
	groups, err := ctl.ErrorGroups(ctx, engine.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range groups {
		if g.Queue == "billing" {
			_, err = ctl.ResolveErrorGroup(ctx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "fixed in 1.4.2"})
		} else {
			_, err = ctl.IgnoreErrorGroup(ctx, engine.ErrorGroupIgnoreParams{ID: g.ID, Note: "a test mailbox"})
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	// It was not fixed after all; the sandbox fails again too.
	enqueue("billing", "invoice.generate")
	enqueue("email", "receipt.send")

	groups, err = ctl.ErrorGroups(ctx, engine.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range groups {
		fmt.Println(g.Queue, g.Status, g.Count, "dead, reopened at a death:", g.ReopenedAt != nil, "note:", g.Note)
	}
	all, err := ctl.ListErrorGroups(ctx, engine.ListErrorGroupsParams{Ignored: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("with the ignored:", len(all), "groups")
	// Output:
	// billing reopened 2 dead, reopened at a death: true note: fixed in 1.4.2
	// with the ignored: 2 groups
}
