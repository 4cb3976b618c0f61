package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
)

// TestAttemptRuns: a job's runs are its error entries, and its last claim
// when that left none (completed, running); entries written before runs
// kept their start still line up by their end.
func TestAttemptRuns(t *testing.T) {
	at := func(s int) *time.Time { v := time.Date(2026, 12, 7, 3, 0, s, 0, time.UTC); return &v }
	e := func(n int, started *time.Time, end int, msg string) engine.AttemptError {
		return engine.AttemptError{Attempt: n, At: *at(end), Started: started, Worker: fmt.Sprint("w", n), Message: msg}
	}
	cases := []struct {
		name string
		job  engine.Job
		want string // n:outcome per run
	}{
		{"dead after two errors", engine.Job{State: engine.StateArchived, Fence: 2, AttemptedAt: at(10),
			Errors: []engine.AttemptError{e(1, at(1), 2, "a"), e(2, at(10), 12, "b")}}, "1:error 2:error"},
		{"completed after an error", engine.Job{State: engine.StateCompleted, Fence: 2, AttemptedAt: at(20), FinalizedAt: at(21),
			Errors: []engine.AttemptError{e(1, at(1), 2, "a")}}, "1:error 2:completed"},
		{"running again", engine.Job{State: engine.StateRunning, Fence: 3, AttemptedAt: at(30),
			Errors: []engine.AttemptError{e(1, at(1), 2, "a"), e(2, at(10), 12, "b")}}, "1:error 2:error 3:running"},
		{"entries without a start", engine.Job{State: engine.StateRetryable, Fence: 2, AttemptedAt: at(10),
			Errors: []engine.AttemptError{e(1, nil, 2, "a"), e(2, nil, 12, "b")}}, "1:error 2:error"},
		{"completed after entries without a start", engine.Job{State: engine.StateCompleted, Fence: 2, AttemptedAt: at(20),
			Errors: []engine.AttemptError{e(1, nil, 2, "a")}}, "1:error 2:completed"},
		{"never ran", engine.Job{State: engine.StateAvailable}, ""},
	}
	for _, tc := range cases {
		var got []string
		for _, r := range attemptRuns(&tc.job) {
			got = append(got, fmt.Sprintf("%d:%s", r.n, r.outcome))
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s: runs %q, want %q", tc.name, g, tc.want)
		}
	}
}

// TestCompareSection: two runs side by side — times, how long each ran,
// workers, the payload edit between them, and their errors as a line
// diff whose shared trace line is kept once.
func TestCompareSection(t *testing.T) {
	at := func(s, ms int) *time.Time {
		v := time.Date(2026, 12, 7, 3, 0, s, ms*1_000_000, time.UTC)
		return &v
	}
	j := &engine.Job{ID: "cmp-1", State: engine.StateArchived, Fence: 2, AttemptedAt: at(30, 0),
		Errors: []engine.AttemptError{
			{Attempt: 1, At: *at(2, 250), Started: at(1, 0), Worker: "worker-1",
				Message: "dial tcp 10.0.0.7:5432: connect: connection refused", Trace: "main.charge\n\tbilling.go:42"},
			{Attempt: 2, At: *at(31, 500), Started: at(30, 0), Worker: "worker-2", Crash: true,
				Message: "panic: nil map write", Trace: "main.charge\n\tbilling.go:57"},
		}}
	events := []engine.Event{
		{Kind: engine.EventPayloadEdited, At: *at(20, 0), Actor: "maya", Message: "amount: 120 → 12"},
		{Kind: engine.EventPayloadEdited, At: *at(40, 0), Actor: "maya", Message: "after both: not listed"},
	}
	b := &sheetLines{w: 72, t: themes.Resolve("mono", true, func(string) string { return "" })}
	b.compareSection(keymap.Default(), attemptRuns(j), 1, events)
	out := ansi.Strip(strings.Join(b.out, "\n")) + "\n"
	for _, want := range []string{"attempts #1 ↔ #2", "1.25s", "1.5s", "edited 1× between them", "amount: 120 → 12",
		"− dial tcp", "+ panic: nil map write", "    main.charge", "−     billing.go:42"} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "after both") {
		t.Errorf("an edit after both runs is listed between them:\n%s", out)
	}
	golden.RequireEqual(t, out)
}

// TestCompareAttemptsKey: on a real store, a job that failed, had its
// payload edited and failed again: = on its sheet puts the two runs side
// by side (the edit between them, the errors as a diff); = again, past
// the first run, closes the comparison.
func TestCompareAttemptsKey(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{MaintenanceInterval: 20 * time.Millisecond, WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, eng: eng}
	if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: "cmp-0001", Queue: "billing", Kind: "invoice.generate",
		Payload: json.RawMessage(`{"invoice":9,"amount":120}`), MaxAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	fail := func(to engine.State, msg string) {
		job := f.claim(t, ctx, "billing", "cmp-0001")
		o := &backendtest.Outcome{
			JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
			Charge: backend.ChargeAttempt, Event: engine.EventFailed, Actor: testWorker, Message: msg,
			Error:        &engine.AttemptError{Message: msg, Worker: testWorker, Started: job.AttemptedAt},
			ErrorPattern: engine.NormalizeError(msg), To: to,
		}
		if to.Terminal() {
			o.Event, o.Reason = engine.EventArchived, engine.ReasonAttemptsExhausted
		}
		if _, err := store.JobFinish(ctx, o.Plan(job)); err != nil {
			t.Fatal(err)
		}
	}
	fail(engine.StateAvailable, errRefused)
	cur, err := eng.GetJob(ctx, "cmp-0001", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.UpdatePayload(ctx, "cmp-0001", json.RawMessage(`{"invoice":9,"amount":12}`), cur.Job.Version); err != nil {
		t.Fatal(err)
	}
	fail(engine.StateArchived, "invoice 9: amount below the minimum")

	s := start(t, eng, testOptions())
	s.waitFor("cmp-0001")
	s.keys("<enter>")
	s.waitFor("job cmp-0001")
	s.keys("=")
	s.waitFor("attempts #1 ↔ #2", "edited 1× between them", "− dial tcp 10.0.0.7:5432", "+ invoice 9: amount below the minimum")
	s.keys("=")
	s.waitGone("attempts #1 ↔ #2")
	s.waitFor("job cmp-0001", "timeline (")
}
