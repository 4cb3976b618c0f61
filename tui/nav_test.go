package tui

import (
	"strings"
	"testing"
)

// TestBackIsAStack: esc goes back to the screen and the row it came from;
// the error groups say when the filter scopes them; :jobs is the plain
// job list.
func TestBackIsAStack(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	s.waitFor("invalid currency", "connection refused", "template not found")
	s.keys("j", "<enter>")
	s.waitFor("errgroup:", "inv-0005")
	s.waitGone("evil-0001")
	s.keys("<esc>")
	screen := s.waitFor("Error groups", "template not found")
	if !strings.Contains(screen, "› billing      invoice.generate") || !strings.Contains(screen, "2 of 4") {
		t.Fatalf("esc did not return to the group it came from:\n%s", screen)
	}
	s.goldenAs("back", screen)
	s.keys("<esc>")
	s.waitFor("/ no filter", "evil-0001", "▸archived 7")
	// A filter scopes the groups; the screen says so.
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	screen = s.waitFor("invalid currency", "connection refused")
	if !strings.Contains(screen, "Error groups of state archived, queue billing — the jobs tab and filter scope them") {
		t.Fatalf("the scoped error groups do not state their scope:\n%s", screen)
	}
	s.goldenAs("scoped", screen)
	// :jobs from a group's list with the sheet open: the plain list.
	s.keys("j", "<enter>")
	s.waitFor("errgroup:", "inv-0005")
	s.keys("<enter>")
	s.waitFor("timeline (")
	s.keys(":")
	s.typeText("jobs")
	s.keys("<enter>")
	screen = s.waitFor("/ no filter", "evil-0001")
	if strings.Contains(screen, "timeline (") {
		t.Fatalf(":jobs kept the sheet open:\n%s", screen)
	}
}
