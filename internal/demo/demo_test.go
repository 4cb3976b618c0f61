package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/demo"
)

func TestSeedJobsDeterministic(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := demo.NewStory(now, time.Minute, 25)
	a, b := demo.SeedJobs(now, st), demo.SeedJobs(now, st)
	if n := len(a) - st.Backlog; n < 200 || n > 500 {
		t.Fatalf("seed has %d jobs besides the backlog, want a few hundred", n)
	}
	// The backlog: invoices that meet the outage, with three attempts.
	for _, p := range a[len(a)-st.Backlog:] {
		inv, ok := p.Args.(demo.Invoice)
		if !strings.HasPrefix(p.ID, "demo-outage-") || !ok || inv.Fail != "outage" || !inv.OutageUntil.Equal(st.OutageEnds) || p.MaxAttempts != demo.BacklogAttempts {
			t.Fatalf("backlog job %s = %+v", p.ID, p)
		}
	}
	// Bad data and outage in the seed proper: the 31 invoices with the
	// currency typo, and outage invoices ending with the story's.
	typos, outages := 0, 0
	for _, p := range a[:len(a)-st.Backlog] {
		if inv, ok := p.Args.(demo.Invoice); ok {
			if inv.Currency == "EURO" {
				typos++
			}
			if inv.Fail == "outage" && inv.OutageUntil.Equal(st.OutageEnds) {
				outages++
			}
			if inv.Fail == "always" {
				t.Errorf("seed job %s fails for ever: retried after the outage it must succeed", p.ID)
			}
		}
	}
	if typos != 31 || outages+demo.DefaultBacklog != 4180 {
		t.Errorf("seed has %d currency typos and %d outage invoices; want 31 and %d", typos, outages, 4180-demo.DefaultBacklog)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two seeds differ")
	}
	if a[0].ID != demo.SeedMarker {
		t.Errorf("first seed id = %q, want the marker %q", a[0].ID, demo.SeedMarker)
	}
	ids := map[string]bool{}
	queues := map[string]int{}
	for _, p := range a {
		if ids[p.ID] {
			t.Errorf("duplicate seed id %s", p.ID)
		}
		ids[p.ID] = true
		queues[p.Queue]++
		if err := engine.ValidateJobID(p.ID); err != nil {
			t.Errorf("seed id: %v", err)
		}
	}
	for _, q := range demo.Queues {
		if queues[q] == 0 {
			t.Errorf("no seed job on queue %s", q)
		}
	}

	r1, r2 := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	if !reflect.DeepEqual(demo.TrickleJobs(r1, 50, st), demo.TrickleJobs(r2, 50, st)) {
		t.Error("the trickle is not deterministic for one seed")
	}
}

// TestInvoiceAttempts runs invoices whose payload decides their fate.
func TestInvoiceAttempts(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	e := newEngine(t, store, nil)
	ctx := context.Background()
	// Budgets are small so the demo's backoffs (seconds) stay short.
	later, earlier := time.Now().Add(time.Hour), time.Now().Add(-time.Minute)
	cases := []struct {
		name     string
		inv      demo.Invoice
		attempts int // the budget
		want     engine.State
		errPart  string
	}{
		{"ok", demo.Invoice{Invoice: "INV-1", Currency: "EUR"}, 1, engine.StateCompleted, ""},
		{"typo", demo.Invoice{Invoice: "INV-2", Currency: "EURO"}, 1, engine.StateArchived, `invalid currency "EURO"`},
		{"down", demo.Invoice{Invoice: "INV-3", Currency: "USD", Fail: "always"}, 1, engine.StateArchived, "dial tcp 10.0.0.12:5432: connection refused"},
		{"flaky-once", demo.Invoice{Invoice: "INV-4", Currency: "USD", Fail: "transient"}, 1, engine.StateArchived, "connection refused"},
		{"flaky", demo.Invoice{Invoice: "INV-5", Currency: "USD", Fail: "transient"}, 3, engine.StateCompleted, "connection refused"},
		{"in the outage", demo.Invoice{Invoice: "INV-6", Currency: "USD", Fail: "outage", OutageUntil: &later}, 2, engine.StateArchived, "dial tcp 10.0.0.12:5432: connection refused"},
		{"after the outage", demo.Invoice{Invoice: "INV-7", Currency: "USD", Fail: "outage", OutageUntil: &earlier}, 1, engine.StateCompleted, ""},
	}
	var ids []string
	for _, c := range cases {
		j, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindInvoiceGenerate,
			Args: c.inv, MaxAttempts: c.attempts})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	run(t, e)
	got := waitTerminal(t, store, ids)
	for i, c := range cases {
		j := got[ids[i]]
		if j.State != c.want {
			t.Errorf("%s: state %s, want %s (errors %+v)", c.name, j.State, c.want, j.Errors)
			continue
		}
		if c.errPart != "" && (len(j.Errors) == 0 || !strings.Contains(j.Errors[len(j.Errors)-1].Message, c.errPart)) {
			t.Errorf("%s: errors %+v, want one containing %q", c.name, j.Errors, c.errPart)
		}
	}
}

// TestStoryRedrives: the story's two redrives succeed. Invoices that died
// in the outage succeed when retried after it ends; one with the currency
// typo succeeds once its payload is fixed — and only then.
func TestStoryRedrives(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	e := newEngine(t, store, nil)
	ctx := context.Background()
	// Long enough that a loaded machine under -race starts the jobs
	// inside it (3 s once was not).
	st := demo.NewStory(time.Now(), 15*time.Second, 0)
	var inv demo.Invoice
	var ids []string
	for i := range 3 {
		inv = demo.Invoice{Invoice: fmt.Sprintf("INV-%d", i), Currency: "EUR"}
		inv.Fail, inv.OutageUntil = "outage", &st.OutageEnds
		if i == 2 {
			inv = demo.Invoice{Invoice: "INV-2", Currency: "EURO"}
		}
		j, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindInvoiceGenerate, Args: inv, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	run(t, e)
	for id, j := range waitTerminal(t, store, ids) {
		if j.State != engine.StateArchived {
			t.Fatalf("%s: %s during the outage, want archived", id, j.State)
		}
	}
	// Wait for the outage to end (a wait, not an assertion on time).
	for time.Now().Before(st.OutageEnds) {
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range ids {
		if _, err := e.Retry(ctx, id, engine.RetryOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got := waitTerminal(t, store, ids)
	for _, id := range ids[:2] {
		if j := got[id]; j.State != engine.StateCompleted {
			t.Errorf("%s retried after the outage: %s, want completed (errors %+v)", id, j.State, j.Errors)
		}
	}
	typo := got[ids[2]]
	if typo.State != engine.StateArchived {
		t.Fatalf("the typo retried unchanged: %s, want archived again", typo.State)
	}
	d, err := e.GetJob(ctx, ids[2], true)
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.Replace(string(d.Job.Payload), `"EURO"`, `"EUR"`, 1)
	if _, err := e.UpdatePayload(ctx, ids[2], json.RawMessage(fixed), d.Job.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Retry(ctx, ids[2], engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if j := waitTerminal(t, store, ids[2:])[ids[2]]; j.State != engine.StateCompleted {
		t.Errorf("the typo retried with its payload fixed: %s, want completed (errors %+v)", j.State, j.Errors)
	}
}

func TestDemoOutcomes(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	tally := demo.NewTally()
	e := newEngine(t, store, tally)
	ctx := context.Background()
	past := time.Now().Add(300 * time.Millisecond)

	type want struct {
		state  engine.State
		reason engine.TerminalReason
	}
	jobs := []struct {
		name string
		p    engine.EnqueueParams
		want want
	}{
		{"receipt", engine.EnqueueParams{Queue: demo.QueueEmail, Kind: demo.KindReceiptSend,
			Args: demo.Receipt{Invoice: "INV-1", To: "a@example.com", Template: "receipt-v2"}},
			want{engine.StateCompleted, ""}},
		{"unsubscribed", engine.EnqueueParams{Queue: demo.QueueEmail, Kind: demo.KindReceiptSend,
			Args: demo.Receipt{Invoice: "INV-2", To: "b@example.com", Template: "receipt-v2", Unsubscribed: true}},
			want{engine.StateArchived, engine.ReasonSkipped}},
		{"no template", engine.EnqueueParams{Queue: demo.QueueEmail, Kind: demo.KindReceiptSend, MaxAttempts: 1,
			Args: demo.Receipt{Invoice: "INV-3", To: "c@example.com", Template: "receipt-legacy"}},
			want{engine.StateArchived, engine.ReasonAttemptsExhausted}},
		{"customer v1 upcast", engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindCustomerSync, SchemaVersion: 1,
			Args: demo.CustomerV1{CustomerID: 7, Name: "Grace Hopper"}},
			want{engine.StateCompleted, ""}},
		{"customer v2", engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindCustomerSync,
			Args: demo.CustomerV2{CustomerID: 8, FirstName: "Ada", LastName: "Lovelace"}},
			want{engine.StateCompleted, ""}},
		{"webhook v2 upcast", engine.EnqueueParams{Queue: demo.QueueEmail, Kind: demo.KindWebhookDeliver, SchemaVersion: 2,
			Args: map[string]any{"url": "https://h.example.com", "event": "invoice.paid", "secret": "s"}},
			want{engine.StateCompleted, ""}},
		{"webhook v1 no path", engine.EnqueueParams{Queue: demo.QueueEmail, Kind: demo.KindWebhookDeliver, SchemaVersion: 1,
			Args: map[string]any{"endpoint": "https://h.example.com"}},
			want{engine.StateUndecodable, engine.ReasonUndecodable}},
		{"poison", engine.EnqueueParams{Queue: demo.QueueReports, Kind: demo.KindReportRender, Args: demo.PoisonReport},
			want{engine.StateQuarantined, engine.ReasonQuarantined}},
		{"deadline", engine.EnqueueParams{Queue: demo.QueueReports, Kind: demo.KindReportRender, Deadline: &past,
			Args: demo.Report{Report: "board-pack", WorkMS: 5000}},
			want{engine.StateArchived, engine.ReasonDeadlineExceeded}},
		{"report", engine.EnqueueParams{Queue: demo.QueueReports, Kind: demo.KindReportRender,
			Args: demo.Report{Report: "churn", WorkMS: 10}},
			want{engine.StateCompleted, ""}},
	}
	ps := make([]engine.EnqueueParams, len(jobs))
	for i, j := range jobs {
		ps[i] = j.p
	}
	res, err := e.EnqueueMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", jobs[i].name, r.Err)
		}
		ids[i] = r.Job.ID
	}
	run(t, e)
	got := waitTerminal(t, store, ids)
	for i, c := range jobs {
		j := got[ids[i]]
		if j.State != c.want.state || j.TerminalReason != c.want.reason {
			t.Errorf("%s: %s/%q, want %s/%q (errors %+v)", c.name, j.State, j.TerminalReason, c.want.state, c.want.reason, j.Errors)
		}
	}

	// The tally saw the same story. Death handlers run after the terminal
	// write, so the last death may still be on its way when the store
	// already shows every job terminal: wait for it, bounded.
	snap := tally.Snapshot()
	for until := time.Now().Add(10 * time.Second); len(snap.Deaths) < 4 && time.Now().Before(until); {
		time.Sleep(10 * time.Millisecond)
		snap = tally.Snapshot()
	}
	tot := snap.Total
	if tot.Enqueued != len(jobs) || tot.Completed != 5 || tot.Archived != 3 || tot.Quarantined != 1 || tot.Undecodable != 1 {
		t.Errorf("tally total = %+v, want enqueued %d, completed 5, archived 3, quarantined 1, undecodable 1", tot, len(jobs))
	}
	if tot.Crashed != 2 {
		t.Errorf("tally crashed = %d, want 2 (the poison pill's first two crashes)", tot.Crashed)
	}
	if tot.Running != 0 {
		t.Errorf("tally running = %d after every job ended", tot.Running)
	}
	if len(snap.Deaths) != 4 {
		t.Errorf("tally heard %d deaths, want 4: %+v", len(snap.Deaths), snap.Deaths)
	}

	// The poison pill's fingerprint is quarantined: enqueuing it again is
	// refused, and the tally counts the refusal.
	_, err = e.Enqueue(ctx, engine.EnqueueParams{Queue: demo.QueueReports, Kind: demo.KindReportRender, Args: demo.PoisonReport})
	if !errors.Is(err, engine.ErrQuarantined) {
		t.Errorf("enqueue the poison pill again: %v, want ErrQuarantined", err)
	}
	if r := tally.Snapshot().Total.Refused; r != 1 {
		t.Errorf("tally refused = %d, want 1", r)
	}
}

func TestSeedIdempotent(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	tally := demo.NewTally()
	e := newEngine(t, store, tally)
	ctx := context.Background()
	if ok, err := demo.Seeded(ctx, store); err != nil || ok {
		t.Fatalf("Seeded on an empty store = %v, %v", ok, err)
	}
	st := demo.NewStory(time.Now(), time.Minute, 5)
	if err := demo.Seed(ctx, e, st); err != nil {
		t.Fatal(err)
	}
	if ok, err := demo.Seeded(ctx, store); err != nil || !ok {
		t.Fatalf("Seeded after Seed = %v, %v", ok, err)
	}
	n := tally.Snapshot().Total.Enqueued
	if want := len(demo.SeedJobs(time.Now(), st)); n != want {
		t.Errorf("seed enqueued %d, want %d", n, want)
	}
	if err := demo.Seed(ctx, e, st); err != nil {
		t.Fatalf("second seed: %v", err)
	}
	if again := tally.Snapshot().Total.Enqueued; again != n {
		t.Errorf("second seed enqueued %d more", again-n)
	}
}

func TestTrickle(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	tally := demo.NewTally()
	e := newEngine(t, store, tally)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		demo.Trickle(ctx, e, 5*time.Millisecond, demo.NewStory(time.Now(), time.Minute, 0))
	}()
	deadline := time.Now().Add(30 * time.Second)
	for tally.Snapshot().Total.Enqueued < 5 {
		if time.Now().After(deadline) {
			t.Fatal("the trickle enqueued fewer than 5 jobs in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// newEngine builds an engine working every demo queue with fast timings.
func newEngine(t *testing.T, store backend.Store, tally *demo.Tally) *engine.Engine {
	t.Helper()
	if tally != nil {
		store = tally.Wrap(store)
	}
	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{
			demo.QueueBilling: {Concurrency: 4},
			demo.QueueEmail:   {Concurrency: 4},
			demo.QueueReports: {Concurrency: 4},
		},
		PollInterval:        20 * time.Millisecond,
		MaintenanceInterval: 20 * time.Millisecond,
		HeartbeatInterval:   200 * time.Millisecond,
		CrashBackoff:        func(int) time.Duration { return 10 * time.Millisecond },
		ShutdownTimeout:     2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Register(e); err != nil {
		t.Fatal(err)
	}
	if tally != nil {
		e.OnDead(tally.OnDead)
	}
	return e
}

// run starts e and stops it when the test ends.
func run(t *testing.T, e *engine.Engine) {
	t.Helper()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
}

// waitTerminal polls until every job is in a terminal state.
func waitTerminal(t *testing.T, s backend.Store, ids []string) map[string]*engine.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := map[string]*engine.Job{}
		pending := 0
		for _, id := range ids {
			j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: id})
			if err != nil {
				t.Fatalf("get %s: %v", id, err)
			}
			out[id] = j
			if !j.State.Terminal() {
				pending++
			}
		}
		if pending == 0 {
			return out
		}
		if time.Now().After(deadline) {
			for id, j := range out {
				if !j.State.Terminal() {
					t.Logf("job %s (%s) still %s", id, j.Kind, j.State)
				}
			}
			t.Fatalf("%d jobs not terminal after 60s", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOrderWorkflow: an order that meets the outage dies at its charge
// with its reservation recorded; after the outage a replay from the
// charge finishes it without reserving again. An order outside the
// outage runs its three steps.
func TestOrderWorkflow(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	e := newEngine(t, store, nil)
	ctx := context.Background()
	// 15 s: at load 38 the first charge came after a 4 s outage had
	// ended, and the order that must die completed.
	until := time.Now().Add(15 * time.Second).UTC()
	ok, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindOrderFulfil,
		Args: demo.Order{Order: "ORD-1", AmountCents: 100}})
	if err != nil {
		t.Fatal(err)
	}
	// One attempt: the order dies at its first charge, well inside the
	// outage however loaded the machine is; with the kind's three
	// attempts its backoffs (1 s, 2 s) could outlast the outage and let
	// the charge succeed.
	dead, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindOrderFulfil,
		Args: demo.Order{Order: "ORD-2", AmountCents: 200, Fail: "outage", OutageUntil: &until}, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	run(t, e)
	got := waitTerminal(t, store, []string{ok.ID, dead.ID})
	steps := func(j *engine.Job) string {
		cp, err := engine.ParseCheckpoint(j.Checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, st := range cp.Steps {
			s = append(s, st.Name+":"+string(st.State))
		}
		return strings.Join(s, ",")
	}
	if j := got[ok.ID]; j.State != engine.StateCompleted || steps(j) != "reserve:completed,charge:completed,confirm:completed" {
		t.Fatalf("order outside the outage: %s, steps %s", j.State, steps(j))
	}
	d := got[dead.ID]
	if d.State != engine.StateArchived || steps(d) != "reserve:completed,charge:failed" ||
		!strings.Contains(d.LastErrorText(), "payment ledger: dial tcp 10.0.0.12:5432: connection refused") {
		t.Fatalf("order in the outage: %s, steps %s, error %q", d.State, steps(d), d.LastErrorText())
	}
	if time.Now().Before(until) {
		time.Sleep(time.Until(until) + 100*time.Millisecond)
	}
	re, err := e.ReplayFromStep(ctx, dead.ID, engine.ReplayParams{Step: 2})
	if err != nil {
		t.Fatalf("replay from the charge: %v", err)
	}
	j := waitTerminal(t, store, []string{re.ID})[re.ID]
	cp, _ := engine.ParseCheckpoint(j.Checkpoint)
	if j.State != engine.StateCompleted || steps(j) != "reserve:completed,charge:completed,confirm:completed" || cp.Steps[0].Attempts != 1 {
		t.Fatalf("replayed order: %s, steps %s %+v", j.State, steps(j), cp.Steps)
	}
}

// TestSchedules: the demo declares its schedules, which the console
// lists with their next fires in their zones, and the monthly report
// renders the month before its tick's.
func TestSchedules(t *testing.T) {
	t.Parallel()
	e := newEngine(t, sqlitetest.New(t), nil)
	run(t, e)
	ctx := context.Background()
	zones := map[string]string{"reports.nightly": "Europe/Berlin", "reports.monthly": "America/New_York"}
	var page *engine.SchedulePage
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if page, err = e.Schedules(ctx, 0, ""); err != nil {
			t.Fatal(err)
		}
		if len(page.Schedules) == len(zones) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedules %+v, want %v", page.Schedules, zones)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, s := range page.Schedules {
		zone, ok := zones[s.Name]
		if !ok || s.Zone != zone || s.Paused || s.Gone || len(s.Next) != 3 {
			t.Fatalf("schedule %+v, want one of %v, live, with three next fires", s, zones)
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range s.Next {
			l := n.In(loc)
			if s.Name == "reports.nightly" && (l.Hour() != 2 || l.Minute() != 30) ||
				s.Name == "reports.monthly" && (l.Day() != 1 || l.Hour() != 6) {
				t.Errorf("%s fires at %v", s.Name, l)
			}
		}
	}
	for _, p := range demo.Schedules() {
		if p.JobFunc == nil {
			continue
		}
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		j := p.JobFunc(time.Date(2027, 1, 1, 6, 0, 0, 0, ny))
		var r demo.Report
		if err := json.Unmarshal(mustJSON(t, j.Args), &r); err != nil || r.Month != "2026-12" {
			t.Errorf("%s at 2027-01-01: %+v (%v), want the report of 2026-12", p.Name, r, err)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
