package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestErrorGroupSelectorKeepsTheScope: a group listed under a filter
// (here a cutoff on the time of death) selects what its row counts. Its
// selector kept only the state, queue, kind and pattern, so a bulk retry
// of a group counted 2 under finalized<T retried all 3.
func TestErrorGroupSelectorKeepsTheScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := engine.New(sqlitetest.New(t), engine.Config{
		Queues:       map[string]engine.QueueConfig{"partner": {Concurrency: 1}},
		MaxAttempts:  1,
		PollInterval: 10 * time.Millisecond,
		WorkerID:     "w",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "sync", Handler: func(context.Context, *engine.Job) error {
		return errors.New("partner returned 503")
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Stop(sctx)
	})
	var died []time.Time
	for i := range 3 {
		id := fmt.Sprintf("sync-%d", i)
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "partner", Kind: "sync"}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			d, err := e.GetJob(ctx, id, false)
			if err != nil {
				t.Fatal(err)
			}
			if d.Job.State == engine.StateArchived {
				died = append(died, *d.Job.FinalizedAt)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never died", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cut := died[1].Add(died[2].Sub(died[1]) / 2)
	gs, err := e.ErrorGroups(ctx, engine.Filter{FinalizedBefore: &cut})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].Count != 2 {
		t.Fatalf("groups before the cutoff: %+v, want one of 2 jobs", gs)
	}
	sel := gs[0].Selector
	if sel.FinalizedBefore == nil || !sel.FinalizedBefore.Equal(cut) {
		t.Fatalf("the group's selector lost the cutoff: %+v", sel)
	}
	res, err := e.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: sel, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != gs[0].Count {
		t.Fatalf("a bulk retry of the group would take %d jobs; its row counts %d", res.Matched, gs[0].Count)
	}
}
