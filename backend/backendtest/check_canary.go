package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// canaryChecks: a canary retry (BulkParams.Canary) redrives a sample
// spread across the selection, goes on only when the sample succeeded,
// and halts itself when the jobs it redrives fail again, leaving the
// rest untouched until an operator resumes or cancels it.
func canaryChecks() []check {
	return []check{
		{name: "CanaryHaltsWhenTheRedrivenFailAgain", fn: testCanaryHalts},
		{name: "CanaryThatHoldsRedrivesEverything", fn: testCanaryHolds},
		{name: "CanaryWhoseSampleFailsStopsBeforeTheRest", fn: testCanarySampleFails},
		{name: "CanaryResumesInItsStageAfterReopen", fn: testCanaryAcrossReopen},
		{name: "CanaryRequestOutsideItsBoundsRefused", fn: testCanaryRefused},
	}
}

// outageError is what the flaky kind returns while its outage lasts.
const outageError = "dial tcp 10.0.0.7:5432: connect: connection refused"

// flaky is the "flaky" kind's switch: while down every run fails with
// outageError; once fixed, the first okRuns runs succeed and the later
// ones fail again (okRuns < 0: every run succeeds). The sample's jobs
// are the first a canary redrives and every one of them runs before the
// rest is touched, so okRuns = the sample's size passes the sample and
// fails all that follows, whichever jobs the sample holds.
type flaky struct {
	fixed  atomic.Bool
	okRuns atomic.Int64
	runs   atomic.Int64
}

func (fl *flaky) kind() engine.Kind {
	return engine.Kind{Name: "flaky", Handler: func(context.Context, *engine.Job) error {
		if !fl.fixed.Load() {
			return errors.New(outageError)
		}
		if n := fl.runs.Add(1); fl.okRuns.Load() >= 0 && n > fl.okRuns.Load() {
			return errors.New(outageError)
		}
		return nil
	}}
}

// fix ends the outage: the next ok runs succeed, then every run fails
// again (ok < 0: all succeed).
func (fl *flaky) fix(ok int64) {
	fl.runs.Store(0)
	fl.okRuns.Store(ok)
	fl.fixed.Store(true)
}

// newCanary is a control fixture whose engine also runs the flaky kind,
// with n of its jobs dead of the outage (ids "c-000"...).
func newCanary(t *testing.T, h Harness, n int, tune func(*engine.Config)) (*ctlFixture, *flaky, []string) {
	t.Helper()
	s := h.NewStore(t)
	cfg := fast("canary-worker", "billing")
	cfg.OperationBatch = 10
	if tune != nil {
		tune(&cfg)
	}
	fl := &flaky{}
	e := startEngine(t, s, cfg, append(controlKinds(), fl.kind())...)
	f := &ctlFixture{s: s, e: e, c: h.control(t, e), ctx: engine.WithActor(context.Background(), "maya")}
	ps := make([]engine.EnqueueParams, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("c-%03d", i)
		ps[i] = engine.EnqueueParams{ID: ids[i], Queue: "billing", Kind: "flaky", MaxAttempts: 1}
	}
	res, err := f.e.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, id := range ids {
		waitState(t, s, id, engine.StateArchived)
	}
	return f, fl, ids
}

// canaryRun previews a retry of the dead flaky jobs and runs it from the
// plan with canary c.
func (f *ctlFixture) canaryRun(t *testing.T, c engine.CanaryParams) *engine.Operation {
	t.Helper()
	dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived kind:flaky"), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Plan: dry.Plan, Canary: &c})
	if err != nil {
		t.Fatalf("canary run: %v", err)
	}
	if r.Operation.Canary == nil || r.Operation.Canary.Stage != engine.CanarySample || r.Operation.Canary.Size != c.Size {
		t.Fatalf("a canary run as created: %+v", r.Operation.Canary)
	}
	return r.Operation
}

// waitStatus waits for operation id to reach status st.
func (f *ctlFixture) waitStatus(t *testing.T, id string, st engine.OperationStatus) *engine.Operation {
	t.Helper()
	var op *engine.Operation
	eventually(t, waitLong, func() bool {
		var err error
		op, err = f.c.Operation(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if op.Status != st && op.Status != engine.OperationPending && op.Status != engine.OperationRunning {
			t.Fatalf("operation %s ended %s, want %s: %s (canary %+v)", id, op.Status, st, op.Error, op.Canary)
		}
		return op.Status == st
	}, "operation %s reaches %s", id, st)
	return op
}

// retried returns the ids among ids that were retried, and fails the
// test on one retried more than once.
func retried(t *testing.T, f *ctlFixture, ids []string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		n := len(eventsOf(t, f.s, id, engine.EventRetried))
		if n > 1 {
			t.Fatalf("job %s redriven %d times", id, n)
		}
		if n == 1 {
			out = append(out, id)
		}
	}
	return out
}

// canaryParams are the checks' canary: a sample of size, the window 20
// (batches of 5, at most 10 ahead of the outcomes seen).
func canaryParams(size int) engine.CanaryParams {
	return engine.CanaryParams{Size: size, MinSuccess: 0.9, HaltFailureRate: 0.2, Window: 20, Timeout: time.Minute}
}

func testCanaryHalts(t *testing.T, h Harness) {
	f, fl, ids := newCanary(t, h, 120, nil)
	// The fix holds for the sample's 10 runs, then every job fails
	// again.
	fl.fix(10)
	op := f.canaryRun(t, canaryParams(10))
	op = f.waitStatus(t, op.ID, engine.OperationHalted)
	c := op.Canary
	if c.Stage != engine.CanaryHalted || c.SampleOutcomes.OK != 10 || !strings.Contains(c.Reason, "of the last") ||
		!strings.Contains(c.Reason, "failed again") || !strings.Contains(c.Reason, "connection refused") || op.Error != c.Reason {
		t.Fatalf("the halted run: %+v, error %q", c, op.Error)
	}
	// Never more than half a window past the outcomes it had seen: the
	// sample and at most 10 more.
	got := retried(t, f, ids)
	if len(got) <= 10 || len(got) > 10+c.Window/2 {
		t.Fatalf("the halted run redrove %d jobs, want 11–%d", len(got), 10+c.Window/2)
	}
	// Halted, it is taken by no runner, however often one looks.
	runner := newEngine(t, f.s, fast("runner"))
	for range 3 {
		if did, err := runner.RunOperation(context.Background()); err != nil || did {
			t.Fatalf("a runner took the halted operation: %v %v", did, err)
		}
	}
	if again := retried(t, f, ids); len(again) != len(got) {
		t.Fatalf("jobs redriven after the halt: %d, then %d", len(got), len(again))
	}
	// Fixed for good: the operator resumes it and it redrives the rest,
	// each job once.
	fl.fix(-1)
	res, err := f.c.ResumeOperation(f.ctx, op.ID)
	if err != nil || res.Status != engine.OperationPending || res.Canary.Stage != engine.CanaryWatching || res.Error != "" {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if _, err := f.c.ResumeOperation(f.ctx, op.ID); !errors.Is(err, engine.ErrWrongState) && !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("a second resume: %v, want it refused", err)
	}
	op = f.waitStatus(t, op.ID, engine.OperationCompleted)
	if op.Canary.Stage != engine.CanaryWatching || op.Canary.Reason != "" || op.Error != "" {
		t.Fatalf("the resumed run as it completed: %+v, error %q", op.Canary, op.Error)
	}
	if n := len(retried(t, f, ids)); n != len(ids) {
		t.Fatalf("after the resume %d of %d jobs redriven", n, len(ids))
	}
}

func testCanaryHolds(t *testing.T, h Harness) {
	f, fl, ids := newCanary(t, h, 60, nil)
	fl.fix(-1)
	op := f.canaryRun(t, canaryParams(6))
	op = f.waitStatus(t, op.ID, engine.OperationCompleted)
	if c := op.Canary; c.Stage != engine.CanaryWatching || c.Reason != "" || c.SampleSize != 6 || c.SampleOutcomes.OK != 6 {
		t.Fatalf("the run that held: %+v", c)
	}
	retriedOnce(t, f.s, ids)
	for _, id := range ids {
		waitState(t, f.s, id, engine.StateCompleted)
	}
}

func testCanarySampleFails(t *testing.T, h Harness) {
	f, _, ids := newCanary(t, h, 80, nil)
	order := deathOrder(t, f, ids)
	// The outage lasts: every sample job dies again.
	op := f.canaryRun(t, canaryParams(8))
	op = f.waitStatus(t, op.ID, engine.OperationHalted)
	c := op.Canary
	if c.Stage != engine.CanaryHalted || !strings.Contains(c.Reason, "sample 8: 0 ok, 8 failed") ||
		!strings.Contains(c.Reason, "connection refused") || op.Processed != 0 {
		t.Fatalf("the run whose sample failed: %+v, processed %d", c, op.Processed)
	}
	got := retried(t, f, ids)
	if len(got) != 8 {
		t.Fatalf("the sample's run redrove %d jobs, want its 8", len(got))
	}
	// Spread across the selection, not its first rows: one in each
	// eighth of the 80, in the order the jobs died.
	for i := range 8 {
		stretch := order[i*10 : i*10+10]
		if !slices.ContainsFunc(got, func(id string) bool { return slices.Contains(stretch, id) }) {
			t.Fatalf("no sample job among the %d-th tenth of the deaths %v; sample %v", i, stretch, got)
		}
	}
	res, err := f.c.CancelOperation(f.ctx, op.ID)
	if err != nil || res.Status != engine.OperationCancelled {
		t.Fatalf("cancelling the halted run: %+v %v", res, err)
	}
	runner := newEngine(t, f.s, fast("runner"))
	if did, err := runner.RunOperation(context.Background()); err != nil || did {
		t.Fatalf("a runner took the cancelled operation: %v %v", did, err)
	}
	if n := len(retried(t, f, ids)); n != 8 {
		t.Fatalf("after the cancel %d jobs redriven, want 8", n)
	}
}

// deathOrder is ids in the order a listing of the selection shows them
// (newest death first), as the sample is picked from it.
func deathOrder(t *testing.T, f *ctlFixture, ids []string) []string {
	t.Helper()
	out := slices.Clone(ids)
	at := map[string]time.Time{}
	for _, id := range ids {
		at[id] = getJob(t, f.s, id).StateChangedAt
	}
	slices.SortStableFunc(out, func(a, b string) int {
		if c := at[b].Compare(at[a]); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})
	return out
}

func testCanaryAcrossReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen a store")
	}
	// No maintenance in the fixture's engine: the runs below are the
	// only runners, and the first is stopped while the sample waits.
	f, fl, ids := newCanary(t, h, 40, func(c *engine.Config) { c.NoMaintenance = true })
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	op := f.canaryRun(t, canaryParams(5))
	first := newEngine(t, f.s, fast("first"))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := first.RunOperation(ctx); done <- err }()
	f.waitCanaryStage(t, op.ID, engine.CanaryWaiting)
	stop()
	<-done
	sample := retried(t, f, ids)
	if len(sample) != 5 {
		t.Fatalf("sample redriven before the stop: %d jobs, want 5", len(sample))
	}
	// The fix is deployed and the workers run again; another process
	// takes the operation over once the first's lease ran out, in the
	// stage it was left in: the sample is not picked nor redriven again.
	fl.fix(-1)
	if err := f.c.ResumeQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	runner := newEngine(t, h.Reopen(t, f.s), fast("reopened"))
	eventually(t, waitLong, func() bool {
		if _, err := runner.RunOperation(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, err := f.c.Operation(f.ctx, op.ID)
		return err == nil && got.Status == engine.OperationCompleted
	}, "the canary run completes in the reopened store")
	retriedOnce(t, f.s, ids)
	for _, id := range sample {
		if n := len(eventsOf(t, f.s, id, engine.EventRetried)); n != 1 {
			t.Fatalf("sample job %s redriven %d times", id, n)
		}
	}
}

// waitCanaryStage waits for operation id's canary to reach stage st.
func (f *ctlFixture) waitCanaryStage(t *testing.T, id string, st engine.CanaryStage) {
	t.Helper()
	eventually(t, waitLong, func() bool {
		op, err := f.c.Operation(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return op.Canary != nil && op.Canary.Stage == st
	}, "operation %s's canary reaches %s", id, st)
}

func testCanaryRefused(t *testing.T, h Harness) {
	f := newCtl(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	f.dead(t, "billing", "a", 2, "x")
	sel := mustQuery(t, "state:archived")
	for _, tc := range []struct {
		name string
		p    engine.BulkParams
	}{
		{"size 0", engine.BulkParams{Action: engine.ActionRetry, Selector: sel, Canary: &engine.CanaryParams{}}},
		{"size past the bound", engine.BulkParams{Action: engine.ActionRetry, Selector: sel, Canary: &engine.CanaryParams{Size: engine.MaxCanarySize + 1}}},
		{"a success above 1", engine.BulkParams{Action: engine.ActionRetry, Selector: sel, Canary: &engine.CanaryParams{Size: 5, MinSuccess: 1.5}}},
		{"a halt rate of 1", engine.BulkParams{Action: engine.ActionRetry, Selector: sel, Canary: &engine.CanaryParams{Size: 5, HaltFailureRate: 1}}},
		{"a window of 2", engine.BulkParams{Action: engine.ActionRetry, Selector: sel, Canary: &engine.CanaryParams{Size: 5, Window: 2}}},
		{"a release", engine.BulkParams{Action: engine.ActionRelease, Selector: sel, Canary: &engine.CanaryParams{Size: 5}}},
	} {
		if _, err := f.c.Bulk(f.ctx, tc.p); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("canary with %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if page, err := f.c.Operations(f.ctx, 10, ""); err != nil || len(page.Operations) != 0 {
		t.Fatalf("a refused canary stored an operation: %+v %v", page, err)
	}
}
