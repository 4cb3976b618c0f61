package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// TestErrorGroupsOneScope: the jobs tab and the whole filter scope the
// error groups, and the title says so. Only the filter's queues and
// kinds did: an error text (or a tag, a date) left every group on
// screen under a title that claimed a scope.
func TestErrorGroupsOneScope(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("/")
	s.typeText("error:currency")
	s.keys("<enter>")
	s.waitFor("/ error:currency", "› inv-0005")
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	screen := s.waitFor("invalid currency", `Error groups of state archived, error "currency" — the jobs tab and filter scope them`)
	if strings.Contains(screen, "connection refused") || strings.Contains(screen, "template not found") {
		t.Fatalf("groups outside the filter are listed:\n%s", screen)
	}
	s.golden(screen)
}

// TestErrorGroupsNoStaleFirstFrame: going back to :errors drew the rows
// as last read, minutes old (a group's LAST read 8m while it was dying
// that second), until the new answer came; now the screen says loading
// until it is read again.
func TestErrorGroupsNoStaleFirstFrame(t *testing.T) {
	f := setup(t, false)
	m := f.stillConsole(t, goldenW, goldenH, nil)
	runCmd(m, m.switchScreen(scrErrors))
	if !strings.Contains(ansi.Strip(m.Render()), "connection refused") {
		t.Fatalf("the groups were not drawn:\n%s", ansi.Strip(m.Render()))
	}
	runCmd(m, m.switchScreen(scrJobs))
	cmd := m.switchScreen(scrErrors) // its answer not yet in
	screen := ansi.Strip(m.Render())
	if strings.Contains(screen, "connection refused") || !strings.Contains(screen, "loading…") {
		t.Fatalf("the first frame back on :errors shows the rows as last read:\n%s", screen)
	}
	runCmd(m, cmd)
	if !strings.Contains(ansi.Strip(m.Render()), "connection refused") {
		t.Fatalf("the groups were not drawn again:\n%s", ansi.Strip(m.Render()))
	}
}
