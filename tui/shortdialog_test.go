package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// dialogWhole fails t unless screen holds a dialog drawn from its top
// border to its bottom border, the screen no taller than h.
func dialogWhole(t *testing.T, screen string, h int) {
	t.Helper()
	lines := strings.Split(screen, "\n")
	if len(lines) > h {
		t.Fatalf("the screen is %d lines, taller than the terminal's %d:\n%s", len(lines), h, screen)
	}
	top, bottom := -1, -1
	for i, l := range lines {
		if strings.Contains(l, "╭") && top < 0 {
			top = i
		}
		if strings.Contains(l, "╰") && strings.Contains(l, "╯") {
			bottom = i
		}
	}
	if top < 0 || bottom < top {
		t.Fatalf("the dialog is not drawn whole (top border at line %d, bottom border at line %d):\n%s", top, bottom, screen)
	}
}

// TestBulkPreviewWholeAt60x12: at 60×12 the bulk preview is drawn whole,
// its bottom border on screen under the confirm key. fitPrio stopped
// dropping lines once they fitted the rows without the line that says
// how many went, so the dialog came out one line taller than its room
// and its bottom border was cut (the count and "y start" still showed).
func TestBulkPreviewWholeAt60x12(t *testing.T) {
	const w, h = 60, 12
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.tm.Send(tea.WindowSizeMsg{Width: w, Height: h})
	waitCond(t, "the screen at its new size", func() bool {
		lines := strings.Split(ansi.Strip(s.h.last()), "\n")
		return len(lines) == h && wOf(lines[0]) <= w
	})
	s.keys("b")
	screen := s.waitFor("Bulk retry — dry run", "retry 7 jobs", "y start", "lines hidden")
	dialogWhole(t, screen, h)
	s.golden(screen)
}

// TestFitPrioFitsItsRows: whatever the rows, fitPrio's lines (the one
// saying how many were hidden included) fit them, as long as the lines
// that always stay do, and those stay.
func TestFitPrioFitsItsRows(t *testing.T) {
	var lines []pline
	add := func(prio, group int, s string) { lines = append(lines, pline{prio: prio, s: s, group: group}) }
	add(keepAlways, 0, "title")
	add(keepAlways, 0, "action")
	add(keepSample, 0, "sample:")
	for i := range 6 {
		add(keepSample, 0, fmt.Sprintf("  job %d", i))
	}
	add(keepNotes, 1, "the run takes at most")
	add(keepNotes, 1, "these jobs")
	add(keepAlways, 0, "rate")
	add(keepContext, 0, "")
	add(keepAlways, 0, "y start")
	for h := 5; h <= len(lines)+1; h++ {
		out := fitPrio(lines, h)
		if len(out) > h {
			t.Errorf("h=%d: %d lines:\n%s", h, len(out), strings.Join(out, "\n"))
		}
		for _, l := range lines {
			if l.prio == keepAlways && !strings.Contains(strings.Join(out, "\n"), l.s) {
				t.Errorf("h=%d: %q went", h, l.s)
			}
		}
		if len(lines) <= h && len(out) != len(lines) {
			t.Errorf("h=%d: lines that fit were dropped:\n%s", h, strings.Join(out, "\n"))
		}
	}
}
