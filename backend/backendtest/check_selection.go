package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// What a selector means, the same on every store and every surface: the
// list, the counts, a dry run and the run its plan starts agree.

func selectionChecks() []check {
	return []check{
		{name: "OutOfRangeDates", fn: testSelectionOutOfRangeDates},
		{name: "DestructiveRunsOnlyFromAPlan", fn: testSelectionDestructiveNeedsPlan},
		{name: "ReplaySupersedesOriginal", fn: testSelectionReplaySupersedes},
		{name: "PayloadShapes", fn: testSelectionPayloadShapes},
		{name: "DifferentialAgainstReference", fn: testSelectionDifferential},
		{name: "DifferentialFixedSeed", fn: testSelectionDifferentialFixed},
	}
}

// testSelectionOutOfRangeDates: the grammar takes the years 0000–9999 and
// the stores compare nanoseconds since 1970 in an int64. A bound outside
// that range must neither invert nor widen a filter: created>1000-01-01
// holds for every job, created<1000-01-01 for none, and a run from a plan
// touches exactly what its dry run counted.
func testSelectionOutOfRangeDates(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	ids := f.dead(t, "billing", "b", 6, "x")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	years := []string{"0000-01-01", "0001-01-01", "1000-01-01", "1677-09-21", "1969-12-31",
		"2262-04-12", "2262-12-31", "3000-01-01", "9999-12-31T23:59:59Z"}
	for _, y := range years {
		at, err := engine.ParseQuery("created>" + y)
		if err != nil {
			t.Fatal(err)
		}
		past := at.CreatedAfter.Before(now)
		for _, field := range []string{"created>", "created<", "finalized>", "finalized<"} {
			q := "state:archived " + field + y
			want := 0
			if past == (field[len(field)-1] == '>') {
				want = len(ids)
			}
			sel := mustQuery(t, q)
			if got := len(f.listAll(t, sel, 50)); got != want {
				t.Errorf("ListJobs(%s): %d rows, want %d", q, got, want)
			}
			counts, err := f.c.CountJobs(f.ctx, engine.CountJobsParams{Filter: sel})
			if err != nil {
				t.Fatalf("CountJobs(%s): %v", q, err)
			}
			if got := counts.States[engine.StateArchived]; got != int64(want) {
				t.Errorf("CountJobs(%s): %d, want %d", q, got, want)
			}
			dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionDelete, Selector: sel, DryRun: true})
			if err != nil {
				t.Fatalf("dry run %s: %v", q, err)
			}
			if dry.Matched != int64(want) {
				t.Errorf("dry run of delete %s: matched %d, want %d", q, dry.Matched, want)
			}
			if want != 0 {
				continue
			}
			// A plan that matched nothing deletes nothing.
			r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionDelete, Plan: dry.Plan})
			if err != nil {
				t.Fatalf("run %s: %v", q, err)
			}
			if op := f.waitOperation(t, r.Operation.ID); op.Processed != 0 || op.Succeeded != 0 {
				t.Errorf("delete %s from a plan that matched nothing: %+v", q, op)
			}
			if n := len(f.listAll(t, mustQuery(t, "state:archived"), 50)); n != len(ids) {
				t.Fatalf("delete %s from a plan that matched nothing: %d of %d jobs left", q, n, len(ids))
			}
		}
	}
	// The catch-all of the far past: its plan takes every job, and only
	// the jobs it counted.
	sel := mustQuery(t, "state:archived created>1000-01-01")
	dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: sel, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Plan: dry.Plan})
	if err != nil {
		t.Fatal(err)
	}
	op := f.waitOperation(t, r.Operation.ID)
	if dry.Matched != int64(len(ids)) || op.Succeeded != dry.Matched {
		t.Fatalf("retry %s: dry run matched %d, the run retried %d, want %d", sel, dry.Matched, op.Succeeded, len(ids))
	}
	for _, id := range ids {
		if j := getJob(t, f.s, id); j.State != engine.StateAvailable {
			t.Errorf("%s after the retry: %s", id, describe(j))
		}
	}
}

// testSelectionDestructiveNeedsPlan: a catch-all selector passes the
// empty-selector check, so a bulk cancel or delete runs only from a plan
// a dry run returned (the count was shown first); a retry without one
// runs as before.
func testSelectionDestructiveNeedsPlan(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	ids := f.dead(t, "billing", "b", 4, "x")
	if err := f.c.PauseQueue(f.ctx, "email"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		enqueue(t, f.e, engine.EnqueueParams{ID: fmt.Sprintf("w-%d", i), Queue: "email", Kind: "ok"})
	}
	catchAll := engine.Filter{CreatedAfter: new(time.Unix(0, 0).UTC())}
	for _, a := range []engine.Action{engine.ActionDelete, engine.ActionCancel} {
		_, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: a, Selector: catchAll})
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "dry") {
			t.Fatalf("bulk %s of a catch-all without a plan: %v, want a refusal that says to dry-run first", a, err)
		}
	}
	if n := len(f.listAll(t, engine.Filter{}, 50)); n != 7 {
		t.Fatalf("refused bulk runs changed the store: %d jobs, want 7", n)
	}
	if n := len(f.listAll(t, mustQuery(t, "state:available"), 50)); n != 3 {
		t.Fatalf("refused bulk cancel cancelled jobs: %d available, want 3", n)
	}
	// From the dry run's plan the catch-all deletes what it counted.
	dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionDelete, Selector: catchAll, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionDelete, Plan: dry.Plan})
	if err != nil {
		t.Fatal(err)
	}
	if op := f.waitOperation(t, r.Operation.ID); dry.Matched != 7 || op.Succeeded != dry.Matched {
		t.Fatalf("delete of the catch-all from its plan: dry run %d, deleted %d, want 7", dry.Matched, op.Succeeded)
	}
	for _, id := range append(ids, "w-0", "w-1", "w-2") {
		if !gone(f.s, id) {
			t.Errorf("%s left after the planned delete", id)
		}
	}
	// A retry needs no plan.
	f.dead(t, "billing", "c", 2, "x")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	r, err = f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived")})
	if err != nil {
		t.Fatalf("bulk retry without a plan: %v", err)
	}
	if op := f.waitOperation(t, r.Operation.ID); op.Succeeded != 2 {
		t.Fatalf("bulk retry without a plan: %+v", op)
	}
}

// testSelectionReplaySupersedes: orders whose charge step failed are
// replayed from that step and charged there, once each. A replay
// supersedes its original as a retry with new input does, so a later
// bulk retry of the dead orders leaves the originals out (no order is
// charged twice), and a retry of one original alone is refused, naming
// its replay, unless forced. The charges are counted as the handler
// makes them, beside the store.
func testSelectionReplaySupersedes(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var gatewayUp atomic.Bool
	var charges stepCounter // order → charges made
	handler := func(ctx context.Context, j *engine.Job) error {
		var order struct {
			N int `json:"n"`
		}
		if err := json.Unmarshal(j.Payload, &order); err != nil {
			return err
		}
		if _, err := engine.Step(ctx, "reserve", func(context.Context) (int, error) { return order.N, nil }); err != nil {
			return err
		}
		_, err := engine.Step(ctx, "charge", func(context.Context) (string, error) {
			if !gatewayUp.Load() {
				return "", errors.New("payment gateway unavailable")
			}
			charges.ran(fmt.Sprint(order.N))
			return "charged", nil
		})
		return err
	}
	e := startEngine(t, s, fast("ctl-worker", "orders"), engine.Kind{Name: "order.fulfil", MaxAttempts: 1, Handler: handler})
	ctl := h.control(t, e)
	ctx := engine.WithActor(context.Background(), "maya")
	const n = 4
	for i := range n {
		enqueue(t, e, engine.EnqueueParams{ID: fmt.Sprintf("order-%d", i), Queue: "orders", Kind: "order.fulfil", Args: map[string]int{"n": i}})
	}
	for i := range n {
		waitState(t, s, fmt.Sprintf("order-%d", i), engine.StateArchived)
	}
	gatewayUp.Store(true)
	for i := range n {
		id := fmt.Sprintf("order-%d", i)
		if _, err := ctl.ReplayFromStep(ctx, id, engine.ReplayParams{Step: 2, ID: id + "-replay"}); err != nil {
			t.Fatalf("replay %s: %v", id, err)
		}
		waitState(t, s, id+"-replay", engine.StateCompleted)
		if o := getJob(t, s, id); o.SupersededBy != id+"-replay" || o.State != engine.StateArchived {
			t.Errorf("%s after its replay: superseded by %q, %s", id, o.SupersededBy, o.State)
		}
	}
	if err := ctl.PauseQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	sel := mustQuery(t, "state:archived kind:order.fulfil")
	dry, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: sel, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Matched != 0 {
		t.Errorf("dry run of a bulk retry of the replayed originals: matched %d, want 0", dry.Matched)
	}
	r, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	f := &ctlFixture{s: s, e: e, c: ctl, ctx: ctx}
	if op := f.waitOperation(t, r.Operation.ID); op.Succeeded != 0 {
		t.Errorf("bulk retry of the replayed originals retried %d", op.Succeeded)
	}
	if err := ctl.ResumeQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if all, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived kind:order.fulfil superseded:include"), DryRun: true}); err != nil || all.Matched != n {
		t.Errorf("superseded:include: %+v %v, want the %d originals", all, err, n)
	}
	_, err = ctl.Retry(ctx, "order-0", engine.RetryOptions{})
	if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "order-0-replay") {
		t.Errorf("retry of a replayed original: %v, want a conflict naming its replay", err)
	}
	// Every order charged once; the queue drains before the count.
	for i := range n {
		for _, id := range []string{fmt.Sprintf("order-%d", i), fmt.Sprintf("order-%d-replay", i)} {
			eventually(t, waitLong, func() bool {
				j := tryJob(s, id)
				return j != nil && j.State.Terminal()
			}, "%s ends", id)
		}
		if got := charges.get(fmt.Sprint(i)); got != 1 {
			t.Errorf("order %d charged %d times, want once", i, got)
		}
	}
	// Forced, the retry runs the original's charge again: the override
	// is explicit.
	if _, err := ctl.Retry(ctx, "order-0", engine.RetryOptions{Force: true}); err != nil {
		t.Fatalf("forced retry of a replayed original: %v", err)
	}
	waitState(t, s, "order-0", engine.StateCompleted)
	if got := charges.get("0"); got != 2 {
		t.Errorf("order 0 after a forced retry: charged %d times, want 2", got)
	}
}
