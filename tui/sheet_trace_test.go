package tui

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestSheetTraceID: a job enqueued with a trace context in its metadata
// (as sluiceotel writes it) shows its trace id on the sheet, Y copies
// it, and a failed attempt that left its span's traceparent shows that
// attempt's trace under its error.
func TestSheetTraceID(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{MaintenanceInterval: 20 * time.Millisecond, WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, eng: eng}
	const (
		enqueued = "4bf92f3577b34da6a3ce929d0e0e4736"
		attempt  = "0af7651916cd43dd8448eb211c80319c"
	)
	meta := `{"tenant":"acme","sluice.trace":{"traceparent":"00-` + enqueued + `-00f067aa0ba902b7-01"}}`
	if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: "trc-0001", Queue: "billing", Kind: "invoice.generate",
		Payload: json.RawMessage(`{"invoice":9}`), MaxAttempts: 1, Metadata: json.RawMessage(meta)}); err != nil {
		t.Fatal(err)
	}
	job := f.claim(t, ctx, "billing", "trc-0001")
	p := &backendtest.Outcome{
		JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
		Charge: backend.ChargeAttempt, Event: engine.EventArchived, Actor: testWorker, Message: errRefused,
		Error:        &engine.AttemptError{Message: errRefused, Worker: testWorker, Ref: "00-" + attempt + "-b7ad6b7169203331-01"},
		ErrorPattern: engine.NormalizeError(errRefused),
		To:           engine.StateArchived, Reason: engine.ReasonAttemptsExhausted,
	}
	if _, err := store.JobFinish(ctx, p.Plan(job)); err != nil {
		t.Fatal(err)
	}

	s := start(t, eng, testOptions())
	s.waitFor("trc-0001")
	s.keys("<enter>")
	screen := s.waitFor("job trc-0001", "trace        "+enqueued, "Y copies it")
	s.golden(screen)
	s.keys("Y")
	s.waitFor("copied trace id " + enqueued)
	// ] goes to lifecycle, the timeline, the errors, as far as the sheet
	// scrolls: the attempt's own trace is under its error.
	s.keys("]", "]", "]")
	s.waitFor("errors (1)", "#1 error", "trace "+attempt)
}

// TestTraceIDOf: only a well-formed traceparent with a real trace id
// yields one.
func TestTraceIDOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01", ""},
		{"4bf92f3577b34da6a3ce929d0e0e4736", ""},
		{"", ""},
	} {
		if got := traceIDOf(tc.in); got != tc.want {
			t.Errorf("traceIDOf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
