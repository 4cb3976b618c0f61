package tui

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/engine"
)

// die enqueues a job and fails its one attempt: it is archived now, after
// anything counted before.
func (f *fixture) die(t *testing.T, id, queue, kind, msg string) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.eng.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: queue, Kind: kind,
		Payload: json.RawMessage(`{"late":true}`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	job := f.claim(t, ctx, queue, id)
	p := backendtest.Outcome{
		JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
		Charge: backend.ChargeAttempt, Event: engine.EventArchived, Actor: testWorker, Message: msg,
		Error:        &engine.AttemptError{Message: msg, Worker: testWorker},
		ErrorPattern: engine.NormalizeError(msg),
		To:           engine.StateArchived, Reason: engine.ReasonAttemptsExhausted,
	}
	if _, err := f.store.JobFinish(ctx, p.Plan(job)); err != nil {
		t.Fatalf("finish %s: %v", id, err)
	}
}

// TestBulkDialogRunsItsPreview: the bulk dialog hands the preview's plan
// to the run and says what that means. A job dies and a previewed one is
// deleted while the preview is on the screen; the run retries exactly the
// previewed jobs still dead, not the one that died later.
func TestBulkDialogRunsItsPreview(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("queue:billing kind:invoice.generate")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("b")
	s.goldenAs("preview", s.waitFor("retry 5 jobs (state archived, queue billing, kind invoice.generate)", "the run takes at most these 5", "y start"))

	f.die(t, "inv-0006", "billing", "invoice.generate", errRefused)
	if err := f.eng.Delete(context.Background(), "inv-0001"); err != nil {
		t.Fatal(err)
	}
	s.keys("y")
	s.waitFor("Bulk retry — pending", "0 / 4 processed")
	f.startEngine(t)
	s.waitFor("Bulk retry — completed", "4 / 4 processed")
	s.keys("<esc>")
	s.waitFor("bulk retry completed: 4 matched, 4 retried, 0 failed")
	for _, id := range []string{"inv-0002", "inv-0003", "inv-0004", "inv-0005"} {
		if !slices.Contains(f.events(t, id), engine.EventRetried) {
			t.Errorf("%s was previewed and still dead but not retried", id)
		}
	}
	if slices.Contains(f.events(t, "inv-0006"), engine.EventRetried) {
		t.Error("inv-0006 died after the preview and was retried")
	}
}
