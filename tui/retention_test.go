package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// TestRetentionShown: the sheet of a terminal job says when retention
// deletes it (or that it is kept), and :queues says each queue's
// retention, as the engine is configured: billing's dead kept 30 days,
// email's forever and its cancelled 2 hours.
func TestRetentionShown(t *testing.T) {
	f := setup(t, false)
	eng, err := engine.New(f.store, engine.Config{NoMaintenance: true, QueueRetention: map[string]map[engine.State]time.Duration{
		"billing": {engine.StateArchived: 30 * 24 * time.Hour},
		"email":   {engine.StateArchived: engine.Forever, engine.StateCancelled: 2 * time.Hour},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("<enter>")
	screen := s.waitFor("job inv-0005", "retention", "(in 30d)")
	s.goldenAs("billing_sheet", screen)

	s.keys("<esc>", "<esc>")
	s.waitGone("/ queue:billing")
	s.keys("/")
	s.typeText("queue:email")
	s.keys("<enter>")
	s.waitFor("/ queue:email", "rcp-0001")
	s.keys("<enter>")
	screen = s.waitFor("retention", "kept forever (archived in email)")
	if !strings.Contains(screen, "job ") {
		t.Fatalf("no sheet:\n%s", screen)
	}

	s.keys("<esc>", ":")
	s.typeText("queues")
	s.keys("<enter>")
	s.waitFor("retention of billing: archived 30d · quarantined, undecodable 14d · completed, cancelled 1d")
	s.keys("j")
	s.goldenAs("queues", s.waitFor("retention of email: archived forever · quarantined, undecodable 14d · completed 1d · cancelled 2h"))
}
