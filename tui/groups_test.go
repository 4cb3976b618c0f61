package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// TestErrorGroupsNarrowKeepTheError: on a narrow terminal the error
// groups screen still tells its groups apart by their error: at 60
// columns the ERROR column was cut to "…" and the outage's group and the
// bad data's read the same (found walking the console).
func TestErrorGroupsNarrowKeepTheError(t *testing.T) {
	for _, w := range []int{60, 70, 80, 120} {
		m := stillModel(t, w, 14)
		m.screen = scrErrors
		loadGroups(m, gRefused, gCurrency, gTemplate)
		screen := plainScreen(m)
		for _, want := range []string{"dial tcp <addr>", "invalid currency", "template not fo", "4,180"} {
			if !strings.Contains(screen, want) {
				t.Fatalf("at %d columns the groups do not show %q:\n%s", w, want, screen)
			}
		}
	}
}

// TestErrorGroupsReopenedSaysSince: a resolved group whose job died again
// says so in STATUS, with since when where there is room and as a mark
// where there is not, and the line under the list says when it came back,
// who had resolved it, when, and their note.
func TestErrorGroupsReopenedSaysSince(t *testing.T) {
	for _, w := range []int{60, 120} {
		m := stillModel(t, w, 14)
		m.screen = scrErrors
		now := m.now()
		resolved, died := now.Add(-time.Hour), now.Add(-3*time.Minute)
		g := gRefused
		g.Status, g.Note, g.TriagedBy, g.TriagedAt, g.ReopenedAt = engine.GroupReopened, "fixed in 42", "maya", &resolved, &died
		loadGroups(m, g, gCurrency)
		screen := plainScreen(m)
		status, line := "reopened 3m", "reopened: a job died 3m ago, after it was resolved by maya 1h ago: fixed in 42"
		if w < 100 {
			status, line = "! ", "reopened: a job died 3m ago, after it was"
		}
		for _, want := range []string{status, line} {
			if !strings.Contains(screen, want) {
				t.Fatalf("at %d columns the reopened group does not show %q:\n%s", w, want, screen)
			}
		}
	}
}
