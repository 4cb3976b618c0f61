package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestPlanCutoffInTheFutureStoresWhatIsApplied: a plan whose cutoff is a
// day ahead runs with the operation's start, as every run does, and the
// operation stores and shows that start, not the day ahead; the caller's
// plan is left as given.
func TestPlanCutoffInTheFutureStoresWhatIsApplied(t *testing.T) {
	store := sqlitetest.New(t)
	killJobs(t, store, "billing", []string{"a", "b"})
	e := operatorEngine(t, store)
	ctx := context.Background()
	sel := engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"}}
	dry, err := e.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: sel, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Microsecond)
	plan := *dry.Plan
	plan.Cutoff = future
	before := time.Now()
	res, err := e.Bulk(ctx, engine.BulkParams{Plan: &plan})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if !plan.Cutoff.Equal(future) {
		t.Fatalf("the caller's plan changed: cutoff %s", plan.Cutoff)
	}
	check := func(where string, op *engine.Operation) {
		t.Helper()
		if op.Cutoff == nil || op.Cutoff.After(after) || op.Cutoff.Before(before.Add(-time.Second)) || op.Cutoff.After(op.CreatedAt) {
			t.Fatalf("%s: cutoff %v, created %s; want the operation's start (between %s and %s), not %s",
				where, op.Cutoff, op.CreatedAt, before, after, future)
		}
	}
	check("Bulk's answer", res.Operation)
	got, err := e.Operation(ctx, res.Operation.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("the stored operation", got)
	ops, err := e.Operations(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	check("the operations list", ops.Operations[0])
}
