package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// TestTabsCountTheFilter: the state tabs count what
// the filter matches — from the counters under states and one queue, from
// engine.Control.CountJobs under any other term — and the tab's number is
// the list's "of N". A backend that cannot count a filter leaves the tabs
// as totals, and they say so.
func TestTabsCountTheFilter(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	if strings.Contains(s.waitFor("archived 7"), "totals") {
		t.Fatal("the unfiltered tabs call themselves totals")
	}
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	if screen := s.waitFor("/ queue:billing", "› inv-0005", "archived 5", "1 of 5"); strings.Contains(screen, "totals") {
		t.Fatalf("one queue's counters are exact, yet the tabs say totals:\n%s", screen)
	}
	s.keys("/")
	s.typeText(` error:"currency"`)
	s.keys("<enter>")
	screen := s.waitFor(`error:"currency"`, "▸archived 2", "1 of 2")
	if strings.Contains(screen, "totals") || !strings.Contains(screen, "quarantined 0") || !strings.Contains(screen, "scheduled 0") {
		t.Fatalf("the tabs do not count the filter:\n%s", screen)
	}
	s.golden(screen)
	// Another state's tab under the same filter: none there, and the
	// list agrees.
	s.keys("<tab>")
	s.waitFor("▸quarantined 0", "no quarantined jobs match the filter")
}

func TestTabsSayWhenTheyAreTotals(t *testing.T) {
	f := setup(t, false)
	s := start(t, noFilterCounts{f.eng}, testOptions())
	s.waitFor("evil-0001")
	s.keys("/")
	s.typeText(`error:"currency"`)
	s.keys("<enter>")
	s.waitFor(`error:"currency"`, "▸arch 7", "quar 3", "  totals")
}

// TestTabsMarkCappedCounts: a state whose filter count reached its bound
// reads as at least that many, and the list does not claim a total.
func TestTabsMarkCappedCounts(t *testing.T) {
	t.Parallel()
	m := stillModel(t, goldenW, goldenH)
	f, err := engine.ParseQuery(`error:"refused"`)
	if err != nil {
		t.Fatal(err)
	}
	m.jobs.setFilter(`error:"refused"`, f)
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: 50_000}}
	m.tally.fcounts = &engine.JobCounts{States: map[engine.State]int64{engine.StateArchived: 10_000, engine.StateCancelled: 3},
		Capped: []engine.State{engine.StateArchived}, Max: 10_000}
	m.tally.fcountsFor = f.String()
	tabs := strings.Split(plainScreen(m), "\n")[1]
	if !strings.Contains(tabs, "▸arch 10,000+") || !strings.Contains(tabs, "canc 3") || strings.Contains(tabs, "totals") {
		t.Fatalf("tabs %q, want arch 10,000+ and canc 3", tabs)
	}
	if n, ok := m.matchCount(); ok {
		t.Fatalf("matchCount = %d, true past the bound", n)
	}
}

// TestTabsKeepNonEmptyStatesInSight: where the state tabs do not fit,
// empty states go first (the rightmost first) and the line says how many,
// so a state with jobs (quarantined 1, yellow) is never cut off the edge.
// At 60 columns "quar 1" used to run past it (found walking the console).
func TestTabsKeepNonEmptyStatesInSight(t *testing.T) {
	m := loadedModel(t, 50, 60, 12)
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{
		engine.StateCompleted: 446, engine.StateArchived: 4228, engine.StateQuarantined: 1,
	}}
	for _, w := range []int{60, 70, 80} {
		line := ansi.Strip(m.renderTabs(w))
		if wOf(line) > w {
			t.Fatalf("at %d columns the tabs take %d: %q", w, wOf(line), line)
		}
		for _, want := range []string{"done 446", "arch 4,228", "quar 1"} {
			if !strings.Contains(line, want) {
				t.Fatalf("at %d columns the tabs %q do not show %q", w, line, want)
			}
		}
	}
	// Six states with jobs at 60 columns: all of them, and the note goes.
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateRunning: 1, engine.StateRetryable: 1,
		engine.StateCompleted: 381, engine.StateArchived: 4224, engine.StateQuarantined: 1, engine.StateUndecodable: 2}}
	if line := ansi.Strip(m.renderTabs(60)); wOf(line) > 60 || !strings.Contains(line, "undec 2") || strings.Contains(line, "…") {
		t.Fatalf("six states with jobs at 60 columns: %q", line)
	}
	if line := ansi.Strip(m.renderTabs(200)); strings.Contains(line, "empty") || !strings.Contains(line, "scheduled 0") {
		t.Fatalf("wide tabs: %q", line)
	}
}
