package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// killJobs runs workers whose handler always fails (one attempt) until
// every named job has died: the new ones are enqueued, and any of them
// already available (an operator retry) is claimed again and dies again.
func killJobs(t *testing.T, store backend.Store, queue string, enqueue []string, wait ...string) {
	t.Helper()
	ctx := context.Background()
	e, err := engine.New(store, engine.Config{
		Queues:          map[string]engine.QueueConfig{queue: {Concurrency: 4}},
		PollInterval:    10 * time.Millisecond,
		NoMaintenance:   true, // no operation runs behind the test's back
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
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: queue, Kind: "charge", Args: map[string]string{"id": id}}); err != nil {
			t.Fatal(err)
		}
	}
	want := append(slices.Clone(enqueue), wait...)
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case id := <-died:
			want = slices.DeleteFunc(want, func(w string) bool { return w == id })
		case <-deadline:
			t.Fatalf("jobs %v did not die", want)
		}
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// operatorEngine is an engine with no workers and no maintenance of its
// own, the operator's side: its operations run when the test says.
func operatorEngine(t *testing.T, store backend.Store) *engine.Engine {
	t.Helper()
	e, err := engine.New(store, engine.Config{MaintenanceInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// archivedIDs lists the ids of the archived jobs.
func archivedIDs(t *testing.T, ctl engine.Control) []string {
	t.Helper()
	page, err := ctl.ListJobs(context.Background(), engine.ListJobsParams{
		Filter: engine.Filter{States: []engine.State{engine.StateArchived}}, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range page.Jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestBulkPlanPinsTheRun: jobs die between the dry run and the run; the
// run given the dry run's plan retries exactly the previewed jobs that are
// still dead and none that died later (nor a previewed one that was
// retried and died again), even when another engine runs the operation.
// A run without a plan keeps the cutoff at its creation.
func TestBulkPlanPinsTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	killJobs(t, store, "billing", []string{"d1", "d2", "d3", "d4", "d5", "d6"})
	ctl := operatorEngine(t, store)
	dead := engine.Filter{Queues: []string{"billing"}, States: []engine.State{engine.StateArchived}}

	preview, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if preview.Matched != 6 || preview.Plan == nil || len(preview.Sample) != 6 {
		t.Fatalf("preview: matched %d, plan %v, %d sampled; want 6, a plan, 6", preview.Matched, preview.Plan, len(preview.Sample))
	}
	plan := *preview.Plan
	if plan.Action != engine.ActionRetry || plan.Selector.String() != "state:archived queue:billing" || plan.Cutoff.IsZero() {
		t.Fatalf("plan = %+v (selector %q)", plan, plan.Selector.String())
	}

	// Between the preview and the run: d1 is deleted, d2 is retried and
	// dies again, and three new jobs die.
	if err := ctl.Delete(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Retry(ctx, "d2", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	killJobs(t, store, "billing", []string{"l1", "l2", "l3"}, "d2")

	run, err := ctl.Bulk(ctx, engine.BulkParams{Plan: &plan})
	if err != nil {
		t.Fatal(err)
	}
	op := run.Operation
	if op.Matched != 3+0+1 || op.Cutoff == nil || !op.Cutoff.Equal(plan.Cutoff) || op.Selector.PlanCutoff != nil {
		t.Fatalf("operation: matched %d cutoff %v (plan %v), selector %+v; want 4 at the plan's cutoff", op.Matched, op.Cutoff, plan.Cutoff, op.Selector)
	}
	// Another engine on the store runs it: the cutoff rides with the
	// persisted operation.
	if did, err := operatorEngine(t, store).RunOperation(ctx); err != nil || !did {
		t.Fatalf("RunOperation = %v, %v", did, err)
	}
	done, err := ctl.Operation(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != engine.OperationCompleted || done.Succeeded != 4 || done.Processed > preview.Matched {
		t.Fatalf("operation %+v: want completed, 4 retried, no more than the preview's %d", done, preview.Matched)
	}
	if got, want := archivedIDs(t, ctl), []string{"d2", "l1", "l2", "l3"}; !slices.Equal(got, want) {
		t.Fatalf("still archived %v, want %v", got, want)
	}
	for _, id := range []string{"d3", "d4", "d5", "d6"} {
		d, err := ctl.GetJob(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.State != engine.StateAvailable {
			t.Errorf("%s is %s, want available (retried by the plan)", id, d.Job.State)
		}
	}

	// Without a plan: the cutoff is the run's creation; a job that dies
	// after it (in a queue of its own, so that the retried jobs are left
	// alone) is not taken, those before it all are.
	unpinned, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil {
		t.Fatal(err)
	}
	if c := unpinned.Operation.Cutoff; c == nil || !c.Equal(unpinned.Operation.CreatedAt) {
		t.Fatalf("unpinned cutoff %v, want its creation %v", c, unpinned.Operation.CreatedAt)
	}
	killJobs(t, store, "late", []string{"late"})
	if _, err := ctl.RunOperation(ctx); err != nil {
		t.Fatal(err)
	}
	if done, err := ctl.Operation(ctx, unpinned.Operation.ID); err != nil || done.Status != engine.OperationCompleted || done.Succeeded != 4 {
		t.Fatalf("unpinned operation %+v, %v: want completed, 4 retried", done, err)
	}
	if got, want := archivedIDs(t, ctl), []string{"late"}; !slices.Equal(got, want) {
		t.Fatalf("after the unpinned run still archived %v, want %v", got, want)
	}
}

// TestBulkPlanRefusals: a plan runs only what it was previewed for.
func TestBulkPlanRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	killJobs(t, store, "billing", []string{"a"})
	ctl := operatorEngine(t, store)
	dead := engine.Filter{Queues: []string{"billing"}, States: []engine.State{engine.StateArchived}}
	preview, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	plan := *preview.Plan
	wide := plan
	wide.Selector = engine.Filter{Queues: []string{"billing"}}
	future := plan
	future.Cutoff = time.Time{}
	smuggled := dead
	smuggled.PlanCutoff = &plan.Cutoff
	tests := []struct {
		name string
		p    engine.BulkParams
	}{
		{"another action", engine.BulkParams{Action: engine.ActionDelete, Plan: &plan}},
		{"another selection", engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{Queues: []string{"email"}}, Plan: &plan}},
		{"a selector not narrowed", engine.BulkParams{Plan: &wide}},
		{"no cutoff", engine.BulkParams{Plan: &future}},
		{"a cutoff smuggled in the selector", engine.BulkParams{Action: engine.ActionRetry, Selector: smuggled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ctl.Bulk(ctx, tt.p); !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("Bulk = %v, want ErrInvalid", err)
			}
		})
	}
	// The plan with its own selector given again is fine.
	if _, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: dead, Plan: &plan}); err != nil {
		t.Fatalf("run with the plan and its selector: %v", err)
	}
}
