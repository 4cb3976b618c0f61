package tui

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// TestBulkCanaryFields: the bulk preview's canary fields (key C) take a
// sample size, then a halt threshold (a share or a percentage, refused
// outside 0–1), and y starts a canary run with them; the progress shows
// its stage. When the run halts the dialog says why and what to do,
// :operations shows the reason on its row, and the resume key (O) asks,
// then sets it going again.
func TestBulkCanaryFields(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("queue:billing kind:invoice.generate")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("b")
	s.waitFor("retry 5 jobs", "canary [", "C: sample first")
	s.keys("C", "3", "<enter>")
	s.waitFor("halt above [▏]")
	s.typeText("150%")
	s.keys("<enter>")
	s.waitFor(`halt threshold "150%": a share of failures`)
	for range 4 {
		s.keys("<backspace>")
	}
	s.typeText("25%")
	s.keys("<enter>")
	screen := s.waitFor("canary [    3] a sample first, on at 90% ok · halt above [25%]", "y start")
	s.goldenAs("dialog", screen)
	s.keys("y")
	s.waitFor("canary: picking a sample of 3")
	page, err := f.eng.Operations(context.Background(), 10, "")
	if err != nil || len(page.Operations) != 1 {
		t.Fatalf("operations: %+v %v", page, err)
	}
	op := page.Operations[0]
	if c := op.Canary; c == nil || c.Size != 3 || c.HaltFailureRate != 0.25 || c.MinSuccess != engine.DefaultCanaryMinSuccess {
		t.Fatalf("the canary run as started: %+v", op.Canary)
	}
	// Its sample failed: halted as the engine halts it, through the
	// store (no runner here, and no worker to fail the sample).
	ctx := context.Background()
	l, err := f.store.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "test", TTL: time.Hour})
	if err != nil || l == nil || l.Operation.ID != op.ID {
		t.Fatalf("claim: %+v %v", l, err)
	}
	c := *l.Operation.Canary
	c.Stage, c.SampleOutcomes = engine.CanaryHalted, engine.Outcomes{Failed: 3}
	c.Sample = []string{"inv-0001", "inv-0003", "inv-0005"}
	c.Reason = engine.SampleHaltReason(&c, "dial tcp 10.0.0.7:5432: connect: connection refused")
	if _, err := f.store.OperationCanarySet(ctx, &backend.OperationCanarySetParams{ID: op.ID, Holder: l.Holder, Fence: l.Fence,
		Canary: &c, Halt: true, Error: c.Reason}); err != nil {
		t.Fatal(err)
	}
	// The dialog, still open, ends on the halt and says what to do.
	screen = s.waitFor("halted: canary sample 3: 0 ok, 3 failed", ":operations — O resumes it, c cancels it")
	s.goldenAs("halted", screen)
	s.keys("<esc>")
	s.keys(":")
	s.typeText("operations")
	s.keys("<enter>")
	screen = s.waitFor("halted", "O resume")
	s.goldenAs("operations", screen)
	s.keys("<enter>")
	s.waitFor("halted: canary sample 3: 0 ok, 3 failed")
	s.keys("O")
	s.waitFor("Resume operation")
	s.keys("y")
	// Read again: pending, watching a fresh window.
	s.waitFor("pending")
	if got, err := f.eng.Operation(ctx, op.ID); err != nil || got.Status != engine.OperationPending || got.Canary.Stage != engine.CanaryWatching {
		t.Fatalf("after resume: %+v %v", got, err)
	}
}
