package tui

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// reInScheduled is a scheduled run's wait a little over three hours
// ahead: 3h12m, or 3h11m once a minute turned over while the test ran.
var reInScheduled = regexp.MustCompile(`\(in 3h1[12]m\)`)

// scheduledScreen takes the start's clock time out of a screen and
// pins its wait.
func scheduledScreen(screen, at string) string {
	screen = strings.ReplaceAll(screen, at, "HH:MM")
	return reInScheduled.ReplaceAllString(screen, "(in 3h12m)")
}

// TestBulkScheduled: the bulk preview's start field (its key @) takes a
// clock time and says when the run then starts; y schedules it and the
// dialog closes, since nothing runs before then; :operations shows it
// "scheduled" with its time and wait, and cancels it.
func TestBulkScheduled(t *testing.T) {
	f := setup(t, false)
	opts := testOptions()
	s := start(t, f.eng, opts)
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("queue:billing kind:invoice.generate")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("b")
	s.waitFor("retry 5 jobs", "start [", "@: start at HH:MM")
	at := opts.Now().Add(3*time.Hour + 13*time.Minute).Format("15:04")
	s.keys("@")
	s.keys("2", "5", ":", "0", "0", "<enter>")
	s.waitFor(`start time "25:00": want HH:MM`)
	for range 5 {
		s.keys("<backspace>")
	}
	s.typeText(at)
	s.waitFor("start ["+at+"▏", "enter applies")
	s.keys("y") // not the confirm key while the field has the keys
	s.keys("<enter>")
	screen := s.waitFor("scheduled for "+at+" (in 3h1", "y start")
	s.goldenAs("dialog", scheduledScreen(screen, at))

	s.keys("y")
	s.waitFor("bulk retry scheduled for " + at)
	s.waitGone("bulk retry scheduled for " + at)
	s.keys(":")
	s.typeText("operations")
	s.keys("<enter>")
	screen = s.waitFor("scheduled", at+" (in 3h1")
	s.goldenAs("operations", scheduledScreen(screen, at))
	page, err := f.eng.Operations(context.Background(), 10, "")
	if err != nil || len(page.Operations) != 1 {
		t.Fatalf("operations: %+v %v", page, err)
	}
	op := page.Operations[0]
	if op.Status != engine.OperationPending || op.StartAt == nil || op.StartAt.In(opts.Now().Location()).Format("15:04") != at {
		t.Fatalf("the scheduled operation: %+v", op)
	}
	s.keys("c")
	s.waitFor("Cancel operation", "scheduled for "+at)
	s.keys("y")
	s.waitFor("cancelled")
	if op, err := f.eng.Operation(context.Background(), op.ID); err != nil || op.Status != engine.OperationCancelled {
		t.Fatalf("after cancel: %+v %v", op, err)
	}
	if slices.Contains(f.events(t, "inv-0001"), engine.EventRetried) {
		t.Fatal("a scheduled run retried a job before its time")
	}
}
