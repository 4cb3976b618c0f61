package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// killJobs runs workers whose handler always fails (one attempt) until the
// named jobs have died: those in enqueue are new, those in wait are
// already available again (an operator's retry) and die once more.
func killJobs(t *testing.T, store backend.Store, enqueue []string, wait ...string) {
	t.Helper()
	ctx := context.Background()
	e, err := engine.New(store, engine.Config{
		Queues:          map[string]engine.QueueConfig{"billing": {Concurrency: 4}},
		PollInterval:    10 * time.Millisecond,
		NoMaintenance:   true,
		ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "charge", MaxAttempts: 1,
		Handler: func(context.Context, *engine.Job) error { return errors.New("card service down") }}); err != nil {
		t.Fatal(err)
	}
	died := make(chan string, 100)
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) { died <- ev.Job.ID })
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range enqueue {
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "billing", Kind: "charge"}); err != nil {
			t.Fatal(err)
		}
	}
	want := append(slices.Clone(enqueue), wait...)
	timeout := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case id := <-died:
			want = slices.DeleteFunc(want, func(w string) bool { return w == id })
		case <-timeout:
			t.Fatalf("jobs %v did not die", want)
		}
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBulkPlanThroughClient: the plan pin through api.Client. The dry
// run's answer carries the plan; jobs die between it and the run; the run
// given the plan retries exactly the previewed jobs still dead, none of
// those that died later, and its operation names the plan's cutoff.
func TestBulkPlanThroughClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, e, ctl := deadJobsBehindClient(t, "d1", "d2", "d3", "d4", "d5")

	dead := engine.Filter{Queues: []string{"billing"}, States: []engine.State{engine.StateArchived}}
	preview, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if preview.Matched != 5 || preview.Plan == nil || preview.Plan.Cutoff.IsZero() {
		t.Fatalf("preview matched %d plan %+v; want 5 and a plan", preview.Matched, preview.Plan)
	}
	if err := ctl.Delete(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Retry(ctx, "d2", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	killJobs(t, store, []string{"l1", "l2"}, "d2")

	run, err := ctl.Bulk(ctx, engine.BulkParams{Plan: preview.Plan})
	if err != nil {
		t.Fatal(err)
	}
	if c := run.Operation.Cutoff; c == nil || !c.Equal(preview.Plan.Cutoff) || run.Operation.Matched != 3 {
		t.Fatalf("operation cutoff %v matched %d; want the plan's %v and 3", c, run.Operation.Matched, preview.Plan.Cutoff)
	}
	if did, err := e.RunOperation(ctx); err != nil || !did {
		t.Fatalf("RunOperation = %v, %v", did, err)
	}
	op, err := ctl.Operation(ctx, run.Operation.ID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != engine.OperationCompleted || op.Succeeded != 3 || op.Selector.String() != "state:archived queue:billing" {
		t.Fatalf("operation %+v: want completed with 3 retried over the plan's selector", op)
	}
	page, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: dead, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var still []string
	for _, j := range page.Jobs {
		still = append(still, j.ID)
	}
	slices.Sort(still)
	if want := []string{"d2", "l1", "l2"}; !slices.Equal(still, want) {
		t.Fatalf("still archived %v, want %v (died after the preview)", still, want)
	}

	// The plan with its own selection again: a dry run counts what a run
	// of it would still take, none now.
	again, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead, Plan: preview.Plan, DryRun: true})
	if err != nil || again.Matched != 0 || again.Plan == nil || !again.Plan.Cutoff.Equal(preview.Plan.Cutoff) {
		t.Fatalf("dry run of the plan again: %+v, %v; want 0 matched at the same cutoff", again, err)
	}
	// A plan handed back with another selection is refused by the server.
	_, err = ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry,
		Selector: engine.Filter{Queues: []string{"email"}}, Plan: preview.Plan})
	if !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("plan with another selector: %v, want ErrInvalid", err)
	}
}

// TestBulkScheduledThroughClient: a run's start time crosses the wire
// both ways. The operation comes back pending with the instant sent, no
// runner takes it before then, and it can be cancelled while it waits.
func TestBulkScheduledThroughClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, e, ctl := deadJobsBehindClient(t, "d1", "d2")

	dead := engine.Filter{Queues: []string{"billing"}, States: []engine.State{engine.StateArchived}}
	preview, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(3 * time.Hour).Truncate(time.Second).UTC()
	run, err := ctl.Bulk(ctx, engine.BulkParams{Plan: preview.Plan, StartAt: &start})
	if err != nil {
		t.Fatal(err)
	}
	if op := run.Operation; op.Status != engine.OperationPending || op.StartAt == nil || !op.StartAt.Equal(start) {
		t.Fatalf("scheduled operation %+v: want pending, starting at %v", op, start)
	}
	if did, err := e.RunOperation(ctx); err != nil || did {
		t.Fatalf("RunOperation before the start = %v, %v", did, err)
	}
	page, err := ctl.Operations(ctx, 10, "")
	if err != nil || len(page.Operations) != 1 || !page.Operations[0].Waiting(time.Now()) {
		t.Fatalf("operations %+v, %v: want the one, waiting", page, err)
	}
	if op, err := ctl.CancelOperation(ctx, run.Operation.ID); err != nil || op.Status != engine.OperationCancelled {
		t.Fatalf("cancel while waiting: %+v, %v", op, err)
	}
	past := time.Now().Add(-time.Hour)
	if _, err := ctl.Bulk(ctx, engine.BulkParams{Plan: preview.Plan, StartAt: &past}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a start an hour past: %v, want ErrInvalid", err)
	}
}

// deadJobsBehindClient is a SQLite store with the billing jobs ids dead,
// its engine, and an api.Client over a server on that engine.
func deadJobsBehindClient(t *testing.T, ids ...string) (*sqlite.Store, *engine.Engine, engine.Control) {
	t.Helper()
	store := sqlitetest.New(t)
	killJobs(t, store, ids)
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{}))
	t.Cleanup(hs.Close)
	return store, e, api.NewClient(hs.URL, "", api.ClientOptions{Timeout: 20 * time.Second})
}
