package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// The operator surface: every Control method, run against the embedded
// engine and, through Harness.Control, against any other Control (the
// HTTP client) wrapped around it.

func controlChecks() []check {
	return []check{
		{name: "ListFiltersAndPaging", fn: testControlList},
		{name: "ListBadInput", fn: testControlListBadInput},
		{name: "NestingLimitAtEveryEntry", fn: testControlNestingLimit},
		{name: "DeepRowBreaksNoListing", fn: testControlDeepRowListed},
		{name: "FilterBoundsRefused", fn: testControlFilterBounds},
		{name: "GetJob", fn: testControlGetJob},
		{name: "ListRowsCarryLatestError", fn: testControlListLatestError},
		{name: "Counts", fn: testControlCounts},
		{name: "ErrorGroups", fn: testControlErrorGroups},
		{name: "ErrorGroupsRealWorld", fn: testControlErrorGroupsRealWorld},
		{name: "ErrorGroupsNearSingletons", fn: testControlErrorGroupsNearSingletons},
		{name: "ErrorGroupsOneSnapshotUnderDeaths", fn: testErrorGroupsOneSnapshot},
		{name: "RetryPauseResume", fn: testControlRetry},
		{name: "CancelAndDelete", fn: testControlCancelDelete},
		{name: "UpdatePayload", fn: testControlUpdatePayload},
		{name: "RetryWithInput", fn: testControlRetryWithInput},
		{name: "ReplayFromStep", fn: testControlReplay},
		{name: "QuarantineCountsCrashesPerStep", fn: testControlQuarantineStepCrashes},
		{name: "Apply", fn: testControlApply},
		{name: "BulkDryRunAndRun", fn: testControlBulk},
		{name: "BulkLeavesLaterDeathsAlone", fn: testControlBulkLaterDeaths},
		{name: "BulkResumesAfterRestart", fn: testControlBulkResume},
		{name: "BulkKeepsUnderItsRate", fn: testControlBulkKeepsUnderRate},
		{name: "BulkCancel", fn: testControlBulkCancel},
		{name: "QuarantineRelease", fn: testControlQuarantine},
		{name: "Subscribe", fn: testControlSubscribe},
	}
}

// ctlFixture is an engine with workers, a Control over it, and the store.
type ctlFixture struct {
	s   backend.Store
	e   *engine.Engine
	c   engine.Control
	ctx context.Context
}

// failPayload is what the "fail" kind's jobs carry: the error to return.
type failPayload struct {
	I   int    `json:"i"`
	Msg string `json:"msg"`
}

// controlKinds: "fail" returns its payload's message, "ok" succeeds,
// "block" waits for its context, "boom" panics.
func controlKinds() []engine.Kind {
	return []engine.Kind{
		{Name: "fail", Handler: engine.TypedHandler(func(_ context.Context, _ *engine.Job, p failPayload) error {
			return errors.New(p.Msg)
		})},
		{Name: "ok", Handler: func(context.Context, *engine.Job) error { return nil }},
		{Name: "block", Handler: func(ctx context.Context, _ *engine.Job) error {
			<-ctx.Done()
			return ctx.Err()
		}},
		{Name: "boom", Handler: func(context.Context, *engine.Job) error { panic("boom") }},
	}
}

func newCtl(t *testing.T, h Harness, tune func(*engine.Config)) *ctlFixture {
	t.Helper()
	s := h.NewStore(t)
	cfg := fast("ctl-worker", "billing", "email", "later", "misc")
	cfg.OperationBatch = 10
	cfg.CrashLimit = 2
	if tune != nil {
		tune(&cfg)
	}
	e := startEngine(t, s, cfg, controlKinds()...)
	return &ctlFixture{s: s, e: e, c: h.control(t, e), ctx: engine.WithActor(context.Background(), "maya")}
}

// control wraps e in the Control under test.
func (h Harness) control(t testing.TB, e *engine.Engine) engine.Control {
	if h.Control == nil {
		return e
	}
	return h.Control(t, e)
}

// dead enqueues n jobs of kind fail with one attempt each and waits until
// all are archived. msg may use %d for the job's number.
func (f *ctlFixture) dead(t *testing.T, queue, prefix string, n int, msg string) []string {
	t.Helper()
	ps := make([]engine.EnqueueParams, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		m := msg
		if strings.Contains(m, "%d") {
			m = fmt.Sprintf(msg, i)
		}
		ps[i] = engine.EnqueueParams{
			ID: ids[i], Queue: queue, Kind: "fail", MaxAttempts: 1,
			Args:     failPayload{I: i, Msg: m},
			Metadata: json.RawMessage(fmt.Sprintf(`{"customer":"c%d"}`, i%3)),
			Tags:     []string{"t" + prefix},
		}
	}
	res, err := f.e.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue: %v", r.Err)
		}
	}
	for _, id := range ids {
		waitState(t, f.s, id, engine.StateArchived)
	}
	return ids
}

// listAll pages through every row of a filter, newest first.
func (f *ctlFixture) listAll(t *testing.T, filter engine.Filter, limit int) []*engine.Job {
	t.Helper()
	var out []*engine.Job
	cursor := ""
	for range 1000 {
		page, err := f.c.ListJobs(f.ctx, engine.ListJobsParams{Filter: filter, Cursor: cursor, Limit: limit})
		if err != nil {
			t.Fatalf("ListJobs(%s): %v", filter, err)
		}
		out = append(out, page.Jobs...)
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
	t.Fatal("ListJobs: paging does not end")
	return nil
}

func jobIDs(js []*engine.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func sorted(ss []string) []string {
	c := slices.Clone(ss)
	slices.Sort(c)
	return c
}

func mustQuery(t *testing.T, q string) engine.Filter {
	t.Helper()
	f, err := engine.ParseQuery(q)
	if err != nil {
		t.Fatalf("ParseQuery(%q): %v", q, err)
	}
	return f
}

func testControlList(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	billing := f.dead(t, "billing", "b", 25, "dial tcp 10.0.0.%d:5432: connection refused")
	email := f.dead(t, "email", "e", 5, "template not found")
	for i := range 3 {
		enqueue(t, f.e, engine.EnqueueParams{ID: fmt.Sprintf("ok-%d", i), Queue: "misc", Kind: "ok"})
		waitState(t, f.s, fmt.Sprintf("ok-%d", i), engine.StateCompleted)
	}

	// Paging forward covers every archived job once, newest first.
	all := f.listAll(t, mustQuery(t, "state:archived"), 7)
	if got, want := sorted(jobIDs(all)), sorted(append(slices.Clone(billing), email...)); !slices.Equal(got, want) {
		t.Fatalf("paged archived ids:\n got %v\nwant %v", got, want)
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.StateChangedAt.Before(b.StateChangedAt) || (a.StateChangedAt.Equal(b.StateChangedAt) && a.ID < b.ID) {
			t.Fatalf("rows out of order at %d: %s (%s) before %s (%s)", i, a.ID, a.StateChangedAt, b.ID, b.StateChangedAt)
		}
		if a.Payload != nil || b.Payload != nil {
			t.Fatal("list rows carry payloads")
		}
	}

	// Paging back from the second page returns the first.
	p1, err := f.c.ListJobs(f.ctx, engine.ListJobsParams{Filter: mustQuery(t, "state:archived"), Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	if p1.Prev != "" || p1.Next == "" {
		t.Fatalf("first page cursors: prev %q next %q", p1.Prev, p1.Next)
	}
	p2, err := f.c.ListJobs(f.ctx, engine.ListJobsParams{Filter: mustQuery(t, "state:archived"), Cursor: p1.Next, Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	if p2.Prev == "" {
		t.Fatal("second page has no prev cursor")
	}
	back, err := f.c.ListJobs(f.ctx, engine.ListJobsParams{Filter: mustQuery(t, "state:archived"), Cursor: p2.Prev, Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(jobIDs(back.Jobs), jobIDs(p1.Jobs)) {
		t.Fatalf("back from page 2: %v, want page 1 %v", jobIDs(back.Jobs), jobIDs(p1.Jobs))
	}

	count := func(q string) int { return len(f.listAll(t, mustQuery(t, q), 50)) }
	for _, tc := range []struct {
		q    string
		want int
	}{
		{"state:archived queue:billing", 25},
		{"queue:email", 5},
		{"state:completed", 3},
		{"kind:ok", 3},
		{"state:archived,completed", 33},
		{"id:b-001,b-002,e-004", 3},
		{"tag:tb", 25},
		{`error:"connection refused"`, 25},
		{`error:"10.0.0.7:"`, 1},
		{"payload.i:3", 2},
		{"payload.i:3 queue:email", 1},
		{"meta.customer:c1", 10},
		{"errgroup:\"dial tcp <addr>: connection refused\"", 25},
		{"state:scheduled", 0},
	} {
		if got := count(tc.q); got != tc.want {
			t.Errorf("ListJobs(%s): %d rows, want %d", tc.q, got, tc.want)
		}
	}
	b0 := getJob(t, f.s, "b-000")
	if got := count("fingerprint:" + b0.Fingerprint); got != 1 {
		t.Errorf("fingerprint filter: %d rows, want 1", got)
	}
	future := time.Now().Add(time.Hour)
	if got := len(f.listAll(t, engine.Filter{CreatedAfter: &future}, 50)); got != 0 {
		t.Errorf("created after an hour from now: %d rows", got)
	}
	past := time.Now().Add(-time.Hour)
	if got := len(f.listAll(t, engine.Filter{States: []engine.State{engine.StateArchived}, FinalizedAfter: &past}, 50)); got != 30 {
		t.Errorf("finalized in the last hour: %d rows, want 30", got)
	}
}

func testControlListBadInput(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "b", 3, "x")
	for name, p := range map[string]engine.ListJobsParams{
		"limit 201":       {Limit: 201},
		"limit -1":        {Limit: -1},
		"bad cursor":      {Cursor: "not-a-cursor"},
		"unknown state":   {Filter: engine.Filter{States: []engine.State{"dead"}}},
		"bad fingerprint": {Filter: engine.Filter{Fingerprint: "xyz"}},
		"bad queue":       {Filter: engine.Filter{Queues: []string{"no spaces"}}},
	} {
		if _, err := f.c.ListJobs(f.ctx, p); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	if _, err := engine.ParseQuery("colour:red"); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("unknown query field: %v", err)
	}
}

func testControlGetJob(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "b", 1, `invalid currency "EURO"`)
	d, err := f.c.GetJob(f.ctx, "b-000", false)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.Payload != nil {
		t.Fatal("payload returned without being asked")
	}
	if len(d.Job.Errors) != 1 || d.Job.Errors[0].Message != `invalid currency "EURO"` {
		t.Fatalf("errors %+v", d.Job.Errors)
	}
	kinds := map[engine.EventKind]bool{}
	for _, ev := range d.Timeline {
		kinds[ev.Kind] = true
	}
	for _, k := range []engine.EventKind{engine.EventEnqueued, engine.EventClaimed, engine.EventArchived} {
		if !kinds[k] {
			t.Errorf("timeline lacks %s: %+v", k, d.Timeline)
		}
	}
	d, err = f.c.GetJob(f.ctx, "b-000", true)
	if err != nil {
		t.Fatal(err)
	}
	var p failPayload
	if err := json.Unmarshal(d.Job.Payload, &p); err != nil || p.Msg != `invalid currency "EURO"` {
		t.Fatalf("payload %s (%v)", d.Job.Payload, err)
	}
	if _, err := f.c.GetJob(f.ctx, "missing", false); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
}

// A listed row is a summary: its latest error only (a dead job carries up
// to engine.MaxKeptErrors, and a page of them would be mostly old errors);
// GetJob has them all.
func testControlListLatestError(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	const attempts = 3
	_, err := f.e.Enqueue(context.Background(), engine.EnqueueParams{
		ID: "m-000", Queue: "misc", Kind: "fail", MaxAttempts: attempts,
		Args: failPayload{Msg: "still failing"},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, f.s, "m-000", engine.StateArchived)
	f.dead(t, "misc", "one", 1, "once")

	page, err := f.c.ListJobs(f.ctx, engine.ListJobsParams{Filter: engine.Filter{Queues: []string{"misc"}}})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]*engine.Job{}
	for _, j := range page.Jobs {
		rows[j.ID] = j
	}
	if j := rows["m-000"]; j == nil || len(j.Errors) != 1 || j.Errors[0].Attempt != attempts ||
		j.Errors[0].Message != "still failing" || j.Errors[0].At.IsZero() || j.Attempt != attempts {
		t.Fatalf("listed m-000: %+v", j)
	}
	if j := rows["one-000"]; j == nil || len(j.Errors) != 1 || j.Errors[0].Attempt != 1 || j.Errors[0].Message != "once" {
		t.Fatalf("listed one-000: %+v", j)
	}

	d, err := f.c.GetJob(f.ctx, "m-000", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Job.Errors) != attempts {
		t.Fatalf("GetJob: %d errors, want %d: %+v", len(d.Job.Errors), attempts, d.Job.Errors)
	}
	for i, e := range d.Job.Errors {
		if e.Attempt != i+1 {
			t.Fatalf("GetJob: error %d is of attempt %d", i, e.Attempt)
		}
	}
	if got, want := rows["m-000"].Errors[0], d.Job.Errors[attempts-1]; got.Attempt != want.Attempt ||
		got.Message != want.Message || got.Worker != want.Worker || got.Crash != want.Crash || !got.At.Equal(want.At) {
		t.Fatalf("listed error %+v is not GetJob's latest %+v", got, want)
	}
}

func testControlCounts(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "b", 6, "x")
	f.dead(t, "email", "e", 2, "y")
	enqueue(t, f.e, engine.EnqueueParams{ID: "ok-1", Queue: "misc", Kind: "ok"})
	waitState(t, f.s, "ok-1", engine.StateCompleted)
	enqueue(t, f.e, engine.EnqueueParams{ID: "later-1", Queue: "misc", Kind: "ok", Delay: time.Hour})
	if err := f.c.Delete(f.ctx, "b-005"); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, func() bool {
		c, err := f.c.Counts(f.ctx, "")
		if err != nil {
			t.Fatalf("Counts: %v", err)
		}
		return c.Total[engine.StateArchived] == 7 && c.Queues["billing"][engine.StateArchived] == 5 &&
			c.Queues["email"][engine.StateArchived] == 2 && c.Total[engine.StateCompleted] == 1 &&
			c.Total[engine.StateScheduled] == 1 && c.Total[engine.StateRunning] == 0
	}, "counts match the jobs")
	c, err := f.c.Counts(f.ctx, "email")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Queues) != 1 || c.Queues["email"][engine.StateArchived] != 2 {
		t.Fatalf("counts of queue email: %+v", c)
	}
}

func testControlErrorGroups(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "b", 8, "dial tcp 10.0.0.%d:5432: connection refused")
	f.dead(t, "billing", "c", 3, `invalid currency "EUR%d"`)
	f.dead(t, "email", "e", 2, "template not found")
	groups, err := f.c.ErrorGroups(f.ctx, engine.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"billing|dial tcp <addr>: connection refused": 8,
		`billing|invalid currency "<str>"`:            3,
		"email|template not found":                    2,
	}
	got := map[string]int64{}
	for _, g := range groups {
		got[g.Queue+"|"+g.Pattern] = g.Count
		if g.Kind != "fail" || g.Sample == "" || g.FirstSeen.IsZero() || g.LastSeen.Before(g.FirstSeen) {
			t.Errorf("group %+v", g)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("groups:\n got %v\nwant %v", got, want)
	}
	for _, g := range groups {
		r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: g.Selector, DryRun: true})
		if err != nil {
			t.Fatalf("dry run of group %q: %v", g.Pattern, err)
		}
		if r.Matched != g.Count {
			t.Errorf("group %q: dry run matched %d, group counts %d", g.Pattern, r.Matched, g.Count)
		}
	}
}

func testControlRetry(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "b", 2, "down")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	before := getJob(t, f.s, "b-000")
	j, err := f.c.Retry(f.ctx, "b-000", engine.RetryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != engine.StateAvailable || j.Attempt != before.Attempt || j.MaxAttempts != before.Attempt+1 ||
		len(j.Errors) != len(before.Errors) || j.FinalizedAt != nil || j.TerminalReason != "" {
		t.Fatalf("after retry: %s (before %s)", describe(j), describe(before))
	}
	ev := events(t, f.s, "b-000")
	if !hasEvent(ev, engine.EventRetried) || ev[len(ev)-1].Actor != "maya" {
		t.Fatalf("timeline after retry: %+v", ev)
	}
	if _, err := f.c.Retry(f.ctx, "b-000", engine.RetryOptions{}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("retry of an available job: %v", err)
	}
	if _, err := f.c.Retry(f.ctx, "nope", engine.RetryOptions{}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("retry of a missing job: %v", err)
	}
	qs, err := f.c.Queues(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	paused := false
	for _, q := range qs {
		if q.Name == "billing" {
			paused = q.Paused
		}
	}
	if !paused {
		t.Fatalf("queues: billing not paused: %+v", qs)
	}
	// A paused queue is not worked: several claim rounds pass and the job
	// waits.
	time.Sleep(10 * f.e.Config().PollInterval)
	if j := getJob(t, f.s, "b-000"); j.State != engine.StateAvailable {
		t.Fatalf("a job of a paused queue ran: %s", describe(j))
	}
	if err := f.c.ResumeQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	j = waitState(t, f.s, "b-000", engine.StateArchived)
	if j.Attempt != 2 || len(j.Errors) != 2 {
		t.Fatalf("retried job failed again: %s", describe(j))
	}
}

func testControlCancelDelete(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	enqueue(t, f.e, engine.EnqueueParams{ID: "sched", Queue: "misc", Kind: "ok", Delay: time.Hour})
	j, err := f.c.Cancel(f.ctx, "sched")
	if err != nil || j.State != engine.StateCancelled {
		t.Fatalf("cancel scheduled: %v %v", j, err)
	}
	if _, err := f.c.Cancel(f.ctx, "sched"); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("cancel twice: %v", err)
	}
	enqueue(t, f.e, engine.EnqueueParams{ID: "run", Queue: "misc", Kind: "block"})
	waitState(t, f.s, "run", engine.StateRunning)
	if err := f.c.Delete(f.ctx, "run"); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("delete running: %v", err)
	}
	j, err = f.c.Cancel(f.ctx, "run")
	if err != nil || j.State != engine.StateCancelled || j.Lease != nil {
		t.Fatalf("cancel running: %v %v", j, err)
	}
	// The handler is told and its late outcome changes nothing.
	time.Sleep(3 * f.e.Config().LeaseDuration / 2)
	if j := getJob(t, f.s, "run"); j.State != engine.StateCancelled || j.Attempt != 0 {
		t.Fatalf("after the handler's late write: %s", describe(j))
	}
	if err := f.c.Delete(f.ctx, "run"); err != nil {
		t.Fatal(err)
	}
	if !gone(f.s, "run") {
		t.Fatal("deleted job still there")
	}
	if err := f.c.Delete(f.ctx, "run"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func testControlUpdatePayload(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "b", 1, `invalid currency "EURO"`)
	before := getJob(t, f.s, "b-000")
	fixed := json.RawMessage(`{"i":0,"msg":"fixed"}`)
	j, err := f.c.UpdatePayload(f.ctx, "b-000", fixed, before.Version)
	if err != nil {
		t.Fatal(err)
	}
	after := getJob(t, f.s, "b-000")
	if !jsonEqual(after.Payload, fixed) || after.Fingerprint == before.Fingerprint || after.Version <= before.Version || j.Version != after.Version {
		t.Fatalf("after edit: payload %s fp %s→%s version %d→%d", after.Payload, before.Fingerprint, after.Fingerprint, before.Version, after.Version)
	}
	want, _ := engine.FingerprintOf("fail", fixed)
	if after.Fingerprint != want {
		t.Fatalf("fingerprint %s, want %s", after.Fingerprint, want)
	}
	if !hasEvent(events(t, f.s, "b-000"), engine.EventPayloadEdited) {
		t.Fatal("no payload_edited event")
	}
	if _, err := f.c.UpdatePayload(f.ctx, "b-000", json.RawMessage(`{"i":1}`), before.Version); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("stale version: %v", err)
	}
	for _, bad := range []string{`{"i":`, `[1,2]`, `"str"`, ``} {
		if _, err := f.c.UpdatePayload(f.ctx, "b-000", json.RawMessage(bad), after.Version); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("payload %q: %v", bad, err)
		}
	}
	if j := getJob(t, f.s, "b-000"); !jsonEqual(j.Payload, fixed) || j.Version != after.Version {
		t.Fatal("a refused edit changed the job")
	}
	enqueue(t, f.e, engine.EnqueueParams{ID: "run", Queue: "misc", Kind: "block"})
	r := waitState(t, f.s, "run", engine.StateRunning)
	// The worker's heartbeat moves a running job's version, so an edit
	// made on the version just read may meet ErrConflict first; read it
	// again and the answer is ErrWrongState, never an edit.
	for try := 0; ; try++ {
		_, err := f.c.UpdatePayload(f.ctx, "run", json.RawMessage(`{"a":1}`), r.Version)
		if errors.Is(err, engine.ErrWrongState) {
			break
		}
		if !errors.Is(err, engine.ErrConflict) || try == 20 {
			t.Fatalf("edit of a running job (try %d): %v", try, err)
		}
		r = getJob(t, f.s, "run")
	}
}

func testControlRetryWithInput(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "b", 2, "bad")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	j, err := f.c.RetryWithInput(f.ctx, "b-000", engine.RetryWithInputParams{Payload: json.RawMessage(`{"i":0,"msg":"better"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^b-000~retry~[0-9a-f]{8}$`).MatchString(j.ID) || j.RetryOf != "b-000" || j.Queue != "billing" || j.Kind != "fail" {
		t.Fatalf("new job %s retry_of %q", j.ID, j.RetryOf)
	}
	orig := getJob(t, f.s, "b-000")
	if orig.SupersededBy != j.ID || orig.State != engine.StateArchived {
		t.Fatalf("original: superseded_by %q state %s", orig.SupersededBy, orig.State)
	}
	if _, err := f.c.Retry(f.ctx, "b-000", engine.RetryOptions{}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("retry of a superseded job: %v", err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived"), DryRun: true})
	if err != nil || r.Matched != 1 {
		t.Fatalf("bulk leaves superseded jobs out: matched %v, %v", r, err)
	}
	r, err = f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived superseded:include"), DryRun: true})
	if err != nil || r.Matched != 2 {
		t.Fatalf("bulk with superseded:include: %v, %v", r, err)
	}
	if _, err := f.c.Retry(f.ctx, "b-000", engine.RetryOptions{Force: true}); err != nil {
		t.Fatalf("forced retry of a superseded job: %v", err)
	}
	given, err := f.c.RetryWithInput(f.ctx, "b-001", engine.RetryWithInputParams{ID: "b-001-fixed", Payload: json.RawMessage(`{"i":1,"msg":"x"}`)})
	if err != nil || given.ID != "b-001-fixed" {
		t.Fatalf("retry with input and a given id: %v %v", given, err)
	}
	if _, err := f.c.RetryWithInput(f.ctx, "b-001", engine.RetryWithInputParams{Payload: json.RawMessage(`nope`)}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("retry with invalid input: %v", err)
	}
}

func testControlApply(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	ids := f.dead(t, "billing", "b", 3, "x")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	enqueue(t, f.e, engine.EnqueueParams{ID: "waiting", Queue: "misc", Kind: "ok", Delay: time.Hour})
	res, err := f.c.Apply(f.ctx, engine.ActionRetry, append(slices.Clone(ids), "nope", "waiting"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 {
		t.Fatalf("%d results for 5 ids", len(res))
	}
	for i := range 3 {
		if !res[i].OK || res[i].ID != ids[i] {
			t.Errorf("result %d: %+v", i, res[i])
		}
		if j := getJob(t, f.s, ids[i]); j.State != engine.StateAvailable {
			t.Errorf("%s not retried: %s", ids[i], describe(j))
		}
	}
	if res[3].OK || res[3].Reason != "not_found" || res[4].OK || res[4].Reason != "wrong_state" {
		t.Fatalf("refusals: %+v %+v", res[3], res[4])
	}
	many := make([]string, engine.MaxApplyIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("id-%d", i)
	}
	if _, err := f.c.Apply(f.ctx, engine.ActionRetry, many); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("1001 ids: %v", err)
	}
	if _, err := f.c.Apply(f.ctx, engine.ActionRetry, nil); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("no ids: %v", err)
	}
	if _, err := f.c.Apply(f.ctx, "explode", ids); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("unknown action: %v", err)
	}
	if j := getJob(t, f.s, "waiting"); j.State != engine.StateScheduled {
		t.Fatalf("refused id changed: %s", describe(j))
	}
}

// waitOperation polls an operation until it is no longer pending or
// running.
func (f *ctlFixture) waitOperation(t *testing.T, id string) *engine.Operation {
	t.Helper()
	var op *engine.Operation
	eventually(t, waitLong, func() bool {
		var err error
		op, err = f.c.Operation(f.ctx, id)
		if err != nil {
			t.Fatalf("Operation(%s): %v", id, err)
		}
		return op.Status != engine.OperationPending && op.Status != engine.OperationRunning
	}, "operation %s ends", id)
	return op
}

// retriedOnce checks that each job was retried exactly once.
func retriedOnce(t *testing.T, s backend.Store, ids []string) {
	t.Helper()
	for _, id := range ids {
		n := 0
		for _, ev := range events(t, s, id) {
			if ev.Kind == engine.EventRetried {
				n++
			}
		}
		if n != 1 {
			t.Errorf("job %s retried %d times, want 1", id, n)
		}
	}
}

func testControlBulk(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	ids := f.dead(t, "billing", "b", 25, "x")
	f.dead(t, "email", "e", 4, "y")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, DryRun: true}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("empty selector: %v", err)
	}
	if _, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{States: []engine.State{"gone"}}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("unknown state in selector: %v", err)
	}
	sel := mustQuery(t, "state:archived queue:billing")
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: sel, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Matched != 25 || r.Estimated || len(r.Sample) != engine.BulkSampleSize || r.Operation != nil {
		t.Fatalf("dry run: matched %d estimated %v sample %d op %v", r.Matched, r.Estimated, len(r.Sample), r.Operation)
	}
	for _, j := range r.Sample {
		if j.Queue != "billing" || j.State != engine.StateArchived {
			t.Fatalf("sample row %s", describe(j))
		}
	}
	if j := getJob(t, f.s, ids[0]); j.State != engine.StateArchived {
		t.Fatal("a dry run changed a job")
	}
	r, err = f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if r.Operation == nil || r.Operation.ID == "" || r.Operation.CreatedBy != "maya" {
		t.Fatalf("real run: %+v", r.Operation)
	}
	op := f.waitOperation(t, r.Operation.ID)
	if op.Status != engine.OperationCompleted || op.Matched != 25 || op.Processed != 25 || op.Succeeded != 25 || op.Failed != 0 || op.FinishedAt == nil {
		t.Fatalf("operation: %+v", op)
	}
	for _, id := range ids {
		if j := getJob(t, f.s, id); j.State != engine.StateAvailable {
			t.Fatalf("%s after bulk retry: %s", id, describe(j))
		}
	}
	retriedOnce(t, f.s, ids)
	if n := len(f.listAll(t, mustQuery(t, "state:archived queue:email"), 50)); n != 4 {
		t.Fatalf("bulk on billing touched email: %d archived left", n)
	}
	page, err := f.c.Operations(f.ctx, 10, "")
	if err != nil || len(page.Operations) != 1 || page.Operations[0].ID != op.ID {
		t.Fatalf("operations: %+v %v", page, err)
	}
}

func testControlBulkLaterDeaths(t *testing.T, h Harness) {
	// No maintenance in the worker engine: the operation runs only when the
	// test drives it, after later deaths have happened.
	f := newCtl(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	early := f.dead(t, "billing", "a", 12, "x")
	if err := f.c.PauseQueue(f.ctx, "later"); err != nil {
		t.Fatal(err)
	}
	// Created before the operation, dying after it.
	var late []string
	for i := range 6 {
		id := fmt.Sprintf("z-%d", i)
		late = append(late, id)
		enqueue(t, f.e, engine.EnqueueParams{ID: id, Queue: "later", Kind: "fail", MaxAttempts: 1, Args: failPayload{Msg: "late"}})
	}
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived")})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.ResumeQueue(f.ctx, "later"); err != nil {
		t.Fatal(err)
	}
	for _, id := range late {
		waitState(t, f.s, id, engine.StateArchived)
	}
	runner := newEngine(t, f.s, fast("ctl-runner"))
	for {
		did, err := runner.RunOperation(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !did {
			break
		}
	}
	op, err := f.c.Operation(f.ctx, r.Operation.ID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != engine.OperationCompleted || op.Succeeded != 12 {
		t.Fatalf("operation: %+v", op)
	}
	retriedOnce(t, f.s, early)
	for _, id := range late {
		if j := getJob(t, f.s, id); j.State != engine.StateArchived || hasEvent(events(t, f.s, id), engine.EventRetried) {
			t.Fatalf("a job that died after the operation began was swept in: %s", describe(j))
		}
	}
}

func testControlBulkResume(t *testing.T, h Harness) {
	f := newCtl(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	ids := f.dead(t, "billing", "b", 60, "x")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived"), RatePerSecond: 50})
	if err != nil {
		t.Fatal(err)
	}
	// The first runner is stopped part way.
	cfg := fast("runner-1")
	cfg.OperationBatch = 10
	first := newEngine(t, f.s, cfg)
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, func() bool {
		op, err := f.c.Operation(f.ctx, r.Operation.ID)
		return err == nil && op.Processed >= 10
	}, "the first runner makes progress")
	if err := first.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	mid, err := f.c.Operation(f.ctx, r.Operation.ID)
	if err != nil {
		t.Fatal(err)
	}
	if mid.Processed >= 60 {
		t.Skipf("the operation finished before the stop (processed %d); the machine is too fast for this rate", mid.Processed)
	}
	cfg.WorkerID = "runner-2"
	start(t, newEngine(t, f.s, cfg))
	op := f.waitOperation(t, r.Operation.ID)
	if op.Status != engine.OperationCompleted || op.Processed != 60 || op.Succeeded != 60 {
		t.Fatalf("resumed operation: %+v (stopped at %d)", op, mid.Processed)
	}
	retriedOnce(t, f.s, ids)
	for _, id := range ids {
		if j := getJob(t, f.s, id); j.State != engine.StateAvailable {
			t.Fatalf("%s: %s", id, describe(j))
		}
	}
}

// A bulk run with a rate never goes faster than it: each progress seen,
// read after it was written, is at most the rate times the time since the
// run started (the operation's StartedAt, which precedes the runner's own
// clock). A slow machine only lowers the rate, so this cannot fail for
// slowness.
func testControlBulkKeepsUnderRate(t *testing.T, h Harness) {
	f := newCtl(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	const n, rate = 40, 50
	f.dead(t, "billing", "b", n, "x")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived"), RatePerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	start(t, newEngine(t, f.s, fast("runner-rate")))
	seen := 0
	eventually(t, waitLong, func() bool {
		op, err := f.c.Operation(f.ctx, r.Operation.ID)
		now := time.Now()
		if err != nil || op.StartedAt == nil {
			return false
		}
		if limit := float64(rate) * now.Sub(*op.StartedAt).Seconds(); float64(op.Processed) > limit {
			t.Fatalf("%d processed %v after the run started: over the rate of %d/s (at most %.1f)",
				op.Processed, now.Sub(*op.StartedAt), rate, limit)
		}
		if op.Processed > 0 {
			seen++
		}
		return op.Status == engine.OperationCompleted
	}, "the rated operation completes")
	if op, err := f.c.Operation(f.ctx, r.Operation.ID); err != nil || op.Processed != n || op.Succeeded != n {
		t.Fatalf("operation: %+v, %v", op, err)
	}
	if seen == 0 {
		t.Fatal("no progress was observed before the end")
	}
}

func testControlBulkCancel(t *testing.T, h Harness) {
	f := newCtl(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	f.dead(t, "billing", "b", 5, "x")
	dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionDelete, Selector: mustQuery(t, "state:archived"), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionDelete, Plan: dry.Plan})
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.c.CancelOperation(f.ctx, r.Operation.ID)
	if err != nil || op.Status != engine.OperationCancelled {
		t.Fatalf("cancel: %+v %v", op, err)
	}
	runner := newEngine(t, f.s, fast("runner"))
	if did, err := runner.RunOperation(context.Background()); err != nil || did {
		t.Fatalf("a cancelled operation ran: %v %v", did, err)
	}
	if n := len(f.listAll(t, mustQuery(t, "state:archived"), 50)); n != 5 {
		t.Fatalf("cancelled delete removed jobs: %d left", n)
	}
	if _, err := f.c.Operation(f.ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing operation: %v", err)
	}
}

func testControlQuarantine(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	enqueue(t, f.e, engine.EnqueueParams{ID: "pill", Queue: "misc", Kind: "boom", Args: map[string]int{"n": 1}})
	waitState(t, f.s, "pill", engine.StateQuarantined)
	var fps []*engine.Fingerprint
	eventually(t, waitLong, func() bool {
		var err error
		fps, err = f.c.Quarantine(f.ctx)
		return err == nil && len(fps) == 1
	}, "one fingerprint quarantined")
	fp := fps[0]
	if fp.Kind != "boom" || fp.Crashes < 2 || fp.Held != 1 || !strings.Contains(fp.LastError, "boom") {
		t.Fatalf("quarantine record: %+v", fp)
	}
	if _, err := f.e.Enqueue(context.Background(), engine.EnqueueParams{Queue: "misc", Kind: "boom", Args: map[string]int{"n": 1}}); !errors.Is(err, engine.ErrQuarantined) {
		t.Fatalf("enqueue of a quarantined fingerprint: %v", err)
	}
	if err := f.c.PauseQueue(f.ctx, "misc"); err != nil {
		t.Fatal(err)
	}
	n, err := f.c.ReleaseFingerprint(f.ctx, fp.Fingerprint)
	if err != nil || n != 1 {
		t.Fatalf("release: %d %v", n, err)
	}
	j := getJob(t, f.s, "pill")
	if j.State != engine.StateAvailable || j.CrashAttempt != 0 {
		t.Fatalf("released job: %s", describe(j))
	}
	if _, err := f.c.ReleaseFingerprint(f.ctx, strings.Repeat("0", 64)); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("release of an unknown fingerprint: %v", err)
	}
}

func testControlSubscribe(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "b", 1, "x")
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	ch, err := f.c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Retry(f.ctx, "b-000", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(waitLong)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatal("subscription closed early")
			}
			if c.Kind == engine.ChangeJob || c.Kind == engine.ChangeResync {
				cancel()
				for range ch {
				}
				return
			}
		case <-timeout:
			t.Fatal("no change seen after a retry")
		}
	}
}
