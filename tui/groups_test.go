package tui

import (
	"strings"
	"testing"
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
