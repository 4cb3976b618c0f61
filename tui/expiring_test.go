package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestExpiringTabAndSheet: with billing's dead jobs kept an hour inside a
// warning of two, the archived tab says how many retention deletes within
// the window, expires<2h lists exactly those, and a billing job's sheet
// says it is expiring; an email job, kept the default fortnight, is not.
func TestExpiringTabAndSheet(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{
		MaintenanceInterval: 20 * time.Millisecond, MaxAttempts: 3, WorkerID: "console-test",
		QueueRetention: map[string]map[engine.State]time.Duration{"billing": {engine.StateArchived: time.Hour}},
		ExpiryWarning:  2 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, eng: eng}
	f.seed(t, ctx)
	billing := 0
	for _, j := range seedArchived {
		if j.queue == "billing" {
			billing++
		}
	}

	s := start(t, eng, testOptions())
	s.waitFor(fmt.Sprintf("arch 7 (%d exp)", billing))
	s.keys("/")
	s.typeText("expires<2h")
	s.keys("<enter>")
	s.waitFor("expires<2h", fmt.Sprintf("1 of %d", billing), "inv-0005")
	s.waitGone("rcp-0001")
	// Beside the filter's own counts the tab leaves out the note, which
	// counts every job: it would read as the filter's.
	s.waitGone(" exp)")
	s.keys("<enter>")
	s.waitFor("job inv-0005", "expiring: deleted")
	s.keys("<esc>", "<esc>")
	s.waitGone("expires<2h")
	s.keys("g")
	s.waitFor("evil-0001")
	s.keys("<enter>")
	screen := s.waitFor("job evil-0001", "retention    deleted")
	if strings.Contains(screen, "expiring: deleted") {
		t.Fatalf("an email job kept a fortnight reads as expiring:\n%s", screen)
	}
}
