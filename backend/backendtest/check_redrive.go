package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// redriveChecks: bulk runs scheduled for later (BulkParams.StartAt). A
// scheduled run waits, pending, for the store's clock to reach its start
// time, whoever runs maintenance meanwhile; it then takes only what its
// preview counted, however late it starts and whichever process starts
// it; and it can be cancelled while it waits.
func redriveChecks() []check {
	return append([]check{
		{name: "ScheduledRunNotStartedBeforeItsTime", fn: testRedriveNotBeforeStart},
		{name: "ScheduledRunAcrossReopenTakesOnlyThePreview", fn: testRedriveAcrossReopen},
		{name: "ScheduledRunCancelledBeforeItStarts", fn: testRedriveCancelled},
		{name: "StartTimeOutsideItsWindowRefused", fn: testRedriveStartRefused},
	}, canaryChecks()...)
}

// schedule previews a retry of sel and starts it from the preview's plan
// at start.
func (f *ctlFixture) schedule(t *testing.T, sel string, start time.Time) *engine.Operation {
	t.Helper()
	dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, sel), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Plan: dry.Plan, StartAt: &start})
	if err != nil {
		t.Fatalf("scheduled run: %v", err)
	}
	op := r.Operation
	if op.Status != engine.OperationPending || op.StartAt == nil || !op.StartAt.Equal(start) || op.StartedAt != nil {
		t.Fatalf("a scheduled run as created: %+v (start %v)", op, op.StartAt)
	}
	return op
}

func testRedriveNotBeforeStart(t *testing.T, h Harness) {
	// The worker engine runs maintenance: its operation loop meets both
	// operations at every tick.
	f := newCtl(t, h, nil)
	ids := f.dead(t, "billing", "a", 6, "x")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	far := f.schedule(t, "state:archived queue:billing", storeNow(t, f.s).Add(time.Hour))
	near := f.schedule(t, "state:archived queue:billing", storeNow(t, f.s).Add(1500*time.Millisecond))
	var op *engine.Operation
	eventually(t, waitLong, func() bool {
		var err error
		op, err = f.c.Operation(f.ctx, near.ID)
		return err == nil && op.Status == engine.OperationCompleted
	}, "the run scheduled shortly completes")
	if op.StartedAt == nil || op.StartedAt.Before(*near.StartAt) || op.Succeeded != 6 {
		t.Fatalf("the run started before its time (%v): %+v", near.StartAt, op)
	}
	retriedOnce(t, f.s, ids)
	// Maintenance met the far run at every tick meanwhile, and a runner
	// of its own finds nothing to take.
	runner := newEngine(t, f.s, fast("runner"))
	if did, err := runner.RunOperation(context.Background()); err != nil || did {
		t.Fatalf("a run scheduled an hour ahead was taken: %v %v", did, err)
	}
	if op, err := f.c.Operation(f.ctx, far.ID); err != nil || op.Status != engine.OperationPending || op.StartedAt != nil || op.Processed != 0 ||
		op.StartAt == nil || !op.StartAt.Equal(*far.StartAt) {
		t.Fatalf("the run scheduled an hour ahead: %+v %v", op, err)
	}
	page, err := f.c.Operations(f.ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range page.Operations {
		if o.ID == far.ID && (!o.Waiting(storeNow(t, f.s)) || o.StartAt == nil) {
			t.Fatalf("the list does not show the run waiting: %+v", o)
		}
	}
}

func testRedriveAcrossReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen a store")
	}
	// No maintenance here: the run starts in another process, over the
	// store opened again.
	f := newCtl(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	early := f.dead(t, "billing", "a", 8, "x")
	op := f.schedule(t, "state:archived", storeNow(t, f.s).Add(1500*time.Millisecond))
	// Dying after the preview: the run starts later than they die, yet
	// leaves them alone.
	late := f.dead(t, "later", "z", 4, "late")
	for _, q := range []string{"billing", "later"} {
		if err := f.c.PauseQueue(f.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	runner := newEngine(t, h.Reopen(t, f.s), fast("reopened"))
	eventually(t, waitLong, func() bool {
		if _, err := runner.RunOperation(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, err := f.c.Operation(f.ctx, op.ID)
		return err == nil && got.Status == engine.OperationCompleted
	}, "the scheduled run completes in the reopened store")
	got, err := f.c.Operation(f.ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Succeeded != 8 || got.Failed != 0 || got.StartedAt.Before(*op.StartAt) || got.Cutoff == nil || !got.Cutoff.Before(*op.StartAt) {
		t.Fatalf("operation: %+v (cutoff %v)", got, got.Cutoff)
	}
	retriedOnce(t, f.s, early)
	for _, id := range late {
		if j := getJob(t, f.s, id); j.State != engine.StateArchived || hasEvent(events(t, f.s, id), engine.EventRetried) {
			t.Fatalf("a job that died after the preview was swept in: %s", describe(j))
		}
	}
}

func testRedriveCancelled(t *testing.T, h Harness) {
	f := newCtl(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	ids := f.dead(t, "billing", "a", 5, "x")
	op := f.schedule(t, "state:archived", storeNow(t, f.s).Add(time.Second))
	got, err := f.c.CancelOperation(f.ctx, op.ID)
	if err != nil || got.Status != engine.OperationCancelled || got.FinishedAt == nil {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	eventually(t, waitLong, func() bool { return storeNow(t, f.s).After(*op.StartAt) }, "the store's clock passes the start")
	runner := newEngine(t, f.s, fast("runner"))
	if did, err := runner.RunOperation(context.Background()); err != nil || did {
		t.Fatalf("a cancelled scheduled run ran: %v %v", did, err)
	}
	if got, err := f.c.Operation(f.ctx, op.ID); err != nil || got.Status != engine.OperationCancelled || got.StartedAt != nil || got.Processed != 0 {
		t.Fatalf("the cancelled run: %+v %v", got, err)
	}
	for _, id := range ids {
		if j := getJob(t, f.s, id); j.State != engine.StateArchived || hasEvent(events(t, f.s, id), engine.EventRetried) {
			t.Fatalf("a cancelled scheduled run took a job: %s", describe(j))
		}
	}
}

func testRedriveStartRefused(t *testing.T, h Harness) {
	f := newCtl(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	f.dead(t, "billing", "a", 2, "x")
	dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived"), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	now := storeNow(t, f.s)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		name string
		p    engine.BulkParams
	}{
		{"in the past", engine.BulkParams{Plan: dry.Plan, StartAt: at(-engine.BulkStartSkew - time.Hour)}},
		{"too far ahead", engine.BulkParams{Plan: dry.Plan, StartAt: at(engine.MaxBulkStartAhead + time.Hour)}},
		{"without a plan", engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived"), StartAt: at(time.Hour)}},
	} {
		if _, err := f.c.Bulk(f.ctx, tc.p); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("start %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if page, err := f.c.Operations(f.ctx, 10, ""); err != nil || len(page.Operations) != 0 {
		t.Fatalf("a refused start stored an operation: %+v %v", page, err)
	}
	// Within the skew it starts at once.
	if _, err := f.c.Bulk(f.ctx, engine.BulkParams{Plan: dry.Plan, StartAt: at(-engine.BulkStartSkew / 2)}); err != nil {
		t.Fatalf("a start within the skew: %v", err)
	}
}
