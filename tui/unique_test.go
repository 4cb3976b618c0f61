package tui

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// TestUniqueKeyHeldRetry: a cancelled unique job whose key a live job
// took since shows its key on its sheet; its retry's confirmation names
// the live job, and the retry is refused with a toast that names it.
func TestUniqueKeyHeldRetry(t *testing.T) {
	f := setup(t, false)
	ctx := t.Context()
	u := &engine.UniqueOpts{ByPayload: true}
	payload := json.RawMessage(`{"to":"u@example.com"}`)
	dead, err := f.eng.Enqueue(ctx, engine.EnqueueParams{ID: "uq-dead", Queue: "email", Kind: "receipt.send", Payload: payload, Unique: u})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Cancel(ctx, "uq-dead"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Enqueue(ctx, engine.EnqueueParams{ID: "uq-live", Queue: "email", Kind: "receipt.send", Payload: payload, Unique: u, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("state:cancelled id:uq-dead")
	s.keys("<enter>")
	s.waitFor("uq-dead")
	s.keys("<enter>")
	s.waitFor("unique key", dead.UniqueKey)
	s.keys("<esc>")
	s.keys("r")
	// The confirmation says so before the operator confirms.
	s.waitFor("Retry job uq-dead?", "live job uq-live holds this job's unique key")
	s.keys("y")
	// The toast wraps; the holder is on its second line.
	s.waitFor("0 retried · 1 failed (unique_held 1)", "live job uq-live holds")
}

// TestUniqueKeyHeldBulkRetry: a bulk retry's preview says how many of
// the matched jobs a live job holds the unique key of, naming one, before
// the operator confirms; the run refuses those and retries the rest.
func TestUniqueKeyHeldBulkRetry(t *testing.T) {
	f := setup(t, false)
	ctx := t.Context()
	u := &engine.UniqueOpts{ByPayload: true}
	for i, to := range []string{"a", "b", "c"} {
		payload := json.RawMessage(`{"to":"` + to + `@example.com"}`)
		id := "uqb-dead-" + to
		if _, err := f.eng.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "email", Kind: "receipt.send", Payload: payload, Unique: u}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.eng.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			continue // c's key is free
		}
		if _, err := f.eng.Enqueue(ctx, engine.EnqueueParams{ID: "uqb-live-" + to, Queue: "email", Kind: "receipt.send", Payload: payload, Unique: u, Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("state:cancelled")
	s.keys("<enter>")
	s.waitFor("uqb-dead-a")
	s.keys("b")
	s.waitFor("retry 3 jobs", "2 of 3 matched are held by a live job, e.g. uqb-live-a;", "they will be refused")
	s.keys("y")
	s.waitFor("Bulk retry — pending")
	f.startEngine(t)
	s.waitFor("Bulk retry — completed")
	s.keys("<esc>")
	s.waitFor("bulk retry completed: 3 matched, 1 retried, 2 failed")
}

// TestUniqueKeyHeldMarkedRetry: a marked retry's confirmation says how
// many of the marked jobs a live job holds the unique key of, naming
// one, before the operator confirms; the run refuses those.
func TestUniqueKeyHeldMarkedRetry(t *testing.T) {
	f := setup(t, false)
	ctx := t.Context()
	u := &engine.UniqueOpts{ByPayload: true}
	for i, to := range []string{"a", "b", "c"} {
		payload := json.RawMessage(`{"to":"` + to + `@example.com"}`)
		id := "uqm-dead-" + to
		if _, err := f.eng.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "email", Kind: "receipt.send", Payload: payload, Unique: u}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.eng.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			continue // b's key is free
		}
		if _, err := f.eng.Enqueue(ctx, engine.EnqueueParams{ID: "uqm-live-" + to, Queue: "email", Kind: "receipt.send", Payload: payload, Unique: u, Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("state:cancelled")
	s.keys("<enter>")
	s.waitFor("› uqm-dead-c")
	s.keys("<space>", "<space>", "<space>")
	s.waitFor("3 marked")
	s.keys("r")
	confirm := s.waitFor("Retry 3 marked jobs?", "2 of 3 marked are held by a live job, e.g. uqm-dead-c by uqm-live-c;", "retries will be refused")
	s.golden(confirm)
	s.keys("y")
	s.waitFor("1 retried · 2 failed")
}
