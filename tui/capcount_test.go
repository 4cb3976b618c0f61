package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/sluicehq/sluice/engine"
)

// TestCappedCountSaysWhy: a state's count under a filter that stopped
// short read "archived 9,484+" with nothing to say why, and a dry run of
// the same jobs then said 9,997. The status line now says what capped it
// (the store's scan budget, or the count's bound) and, once a dry run of
// the tab's jobs has counted them whole, the tab shows that figure and
// when it was counted.
func TestCappedCountSaysWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fc   *engine.JobCounts
		want string
	}{
		{"scan", &engine.JobCounts{States: map[engine.State]int64{engine.StateArchived: 9484}, Capped: []engine.State{engine.StateArchived},
			Max: 10_000, Scans: map[engine.State]*engine.ScanReport{engine.StateArchived: {Bounded: true, Scanned: 12_000, Total: 14_500}}},
			"archived 9,484+: the store's scan budget stopped the count (12,000 of 14,500 jobs scanned); b counts them all"},
		{"bound", &engine.JobCounts{States: map[engine.State]int64{engine.StateArchived: 10_000}, Capped: []engine.State{engine.StateArchived}, Max: 10_000},
			"archived 10,000+: counted to the bound of 10,000; b counts them all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := loadedModel(t, 10, 160, 36)
			f, err := engine.ParseQuery("error:partner")
			if err != nil {
				t.Fatal(err)
			}
			m.jobs.setFilter("error:partner", f)
			m.tally.fcounts, m.tally.fcountsFor = tc.fc, f.String()
			screen := ansi.Strip(m.Render())
			lines := strings.Split(screen, "\n")
			if !strings.Contains(lines[1], "archived "+commas(tc.fc.States[engine.StateArchived])+"+") {
				t.Fatalf("the tab does not read at least:\n%s", lines[1])
			}
			if !strings.Contains(screen, tc.want) {
				t.Fatalf("the status line does not say what capped the count (%q):\n%s", tc.want, screen)
			}
			before := lines[1] + "\n" + lines[len(lines)-1]
			// A dry run of the tab's jobs counts them all.
			m.dlg.bulk = &bulkDialog{phase: bulkLoading, action: engine.ActionRetry, selector: m.jobs.effectiveFilter(), seq: 99, visible: true}
			at := time.Date(2026, 12, 5, 7, 31, 2, 0, time.UTC)
			m.Update(bulkPreviewMsg{seq: 99, res: &engine.BulkResult{Matched: 9_997}, at: at})
			m.dlg.bulk = nil
			screen = ansi.Strip(m.Render())
			lines = strings.Split(screen, "\n")
			if !strings.Contains(lines[1], "archived 9,997 ") && !strings.HasSuffix(strings.TrimSpace(lines[1]), "archived 9,997") {
				t.Fatalf("the tab does not show the dry run's count:\n%s", lines[1])
			}
			if !strings.Contains(screen, "archived 9,997 as the dry run counted at 07:31:02") {
				t.Fatalf("the status line does not say where the whole count comes from:\n%s", screen)
			}
			golden.RequireEqual(t, normalize(before+"\n"+lines[1]+"\n"+lines[len(lines)-1]))
		})
	}
}

// TestQuarantinedRunsAddUp: a quarantined job read "ATTEMPT 0/3 CRASHES
// 3" over a timeline numbered #1 … #8 (runs: one per claim, lost leases
// among them), with nothing to reconcile them. The sheet now says the
// runs and how many charged nothing.
func TestQuarantinedRunsAddUp(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 1, 120, 36)
	now := m.now()
	j := &engine.Job{ID: "poison-1", Queue: "reports", Kind: "report.render", State: engine.StateQuarantined,
		TerminalReason: engine.ReasonQuarantined, Attempt: 0, MaxAttempts: 3, CrashAttempt: 3, Fence: 8,
		CreatedAt: now.Add(-time.Hour), StateChangedAt: now}
	var tl []engine.Event
	for run := 1; run <= 8; run++ {
		at := now.Add(time.Duration(run-9) * time.Minute)
		tl = append(tl, engine.Event{Kind: engine.EventClaimed, At: at, Attempt: run, Actor: "worker-1"})
		kind := engine.EventLeaseLost
		if run > 5 {
			kind = engine.EventCrashed
		}
		tl = append(tl, engine.Event{Kind: kind, At: at.Add(time.Second), Attempt: run, Actor: "reaper:w2"})
	}
	m.sheet.open = true
	m.sheet.reset(j.ID)
	m.sheet.detail = &engine.JobDetail{Job: j, Timeline: tl}
	screen := ansi.Strip(m.Render())
	var sheet []string
	for _, l := range strings.Split(screen, "\n") {
		if _, r, ok := strings.Cut(l, "│"); ok {
			sheet = append(sheet, r)
		}
	}
	if !strings.Contains(strings.Join(strings.Fields(strings.Join(sheet, " ")), " "), "attempt 0/3 · crashes 3 · 8 runs (timeline #), 5 charged nothing") {
		t.Fatalf("the sheet does not reconcile attempts, crashes and the timeline's runs:\n%s", screen)
	}
	golden.RequireEqual(t, normalize(screen))
}

// TestPositionTakesTheCappedCount: on the walk (Redis, scan budget 500,
// error:partner) the tab read "archived 500+" and the status line, in
// the same frame, "1 of 200+": the rows loaded so far. With a capped
// count for the tab the position reads at least that count.
func TestPositionTakesTheCappedCount(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 200, 160, 36)
	m.jobs.next = "more" // a page of 200 with more behind it
	f, err := engine.ParseQuery("error:partner")
	if err != nil {
		t.Fatal(err)
	}
	m.jobs.setFilter("error:partner", f)
	m.tally.fcounts, m.tally.fcountsFor = &engine.JobCounts{States: map[engine.State]int64{engine.StateArchived: 500}, Capped: []engine.State{engine.StateArchived},
		Max: 10_000, Scans: map[engine.State]*engine.ScanReport{engine.StateArchived: {Bounded: true, Scanned: 500, Total: 2_700}}}, f.String()
	if got := m.position(); got != "1 of 500+" {
		t.Fatalf("position %q beside the tab's 500+, want 1 of 500+", got)
	}
	// Past the bound, the rows loaded are the better floor.
	m.tally.fcounts.States[engine.StateArchived] = 100
	if got := m.position(); got != "1 of 200+" {
		t.Fatalf("position %q with 200 rows loaded and a count of 100+, want 1 of 200+", got)
	}
}
