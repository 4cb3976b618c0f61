package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// TestBulkPreviewSaysWhatCameSince: the bulk preview's count is as of its
// dry run, and the dialog says so while the list behind it moves. Two
// jobs die while the preview of the archived tab (7 jobs) is open: the
// tab reads 9, and the dialog says when it counted and that 2 more are
// archived since, which the run leaves out; ctrl+r counts again and the
// line goes. At 60×12 the count and "y start" stay and the two lines
// become one. The preview used to say "retry 7 jobs" and nothing else
// while the tab rose behind it (sluice demo: 9, then 145, then 4,188).
func TestBulkPreviewSaysWhatCameSince(t *testing.T) {
	for _, c := range []struct {
		w, h int
		more string
	}{
		{80, 24, "2 more archived since — not included; ctrl+r"},
		{60, 12, "· 2 more since, not included"},
	} {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			f := setup(t, false)
			s := start(t, f.eng, testOptions())
			s.waitFor("evil-0001")
			s.tm.Send(tea.WindowSizeMsg{Width: c.w, Height: c.h})
			waitCond(t, "the screen at its new size", func() bool {
				lines := strings.Split(ansi.Strip(s.h.last()), "\n")
				return len(lines) == c.h && wOf(lines[0]) <= c.w
			})
			s.keys("b")
			s.waitFor("retry 7 jobs (state archived)", "as of ", "(5m ago)", "y start")
			// The live counts poll the store each second: let one pass
			// before the store changes behind the console.
			time.Sleep(1100 * time.Millisecond)
			f.die(t, "late-0001", "billing", "invoice.generate", errRefused)
			f.die(t, "late-0002", "billing", "invoice.generate", errRefused)
			screen := s.waitFor("arch 9", "3 of 9", "retry 7 jobs (state archived)", c.more, "y start")
			if c.w == 80 && !strings.Contains(screen, "as of ") {
				t.Fatalf("no age line:\n%s", screen)
			}
			dialogWhole(t, screen, c.h)
			s.golden(screen)

			s.keys("<ctrl+r>")
			screen = s.waitFor("retry 9 jobs (state archived)", "as of ", "y start")
			if strings.Contains(screen, "more") {
				t.Fatalf("after the dry run ran again the dialog still says more came:\n%s", screen)
			}
		})
	}
}

// dryRunControl answers dry runs with the count it is set to and the
// counters with the archived count it is set to, and records the calls.
type dryRunControl struct {
	engine.Control
	mu       sync.Mutex
	matched  int64
	archived int64
	cutoff   time.Time
	bulks    []engine.BulkParams
}

func (c *dryRunControl) Bulk(_ context.Context, p engine.BulkParams) (*engine.BulkResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bulks = append(c.bulks, p)
	return &engine.BulkResult{Matched: c.matched,
		Plan: &engine.BulkPlan{Action: p.Action, Selector: p.Selector, Cutoff: c.cutoff}}, nil
}

func (c *dryRunControl) Counts(context.Context, string) (*engine.Counts, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: c.archived}}, nil
}

func (c *dryRunControl) set(matched, archived int64, cutoff time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.matched, c.archived, c.cutoff = matched, archived, cutoff
}

// TestBulkPreviewRerunDropsStale: the re-run key sends a new dry run
// under a new tag; the answer of the one before, coming late, is dropped
// rather than drawn as the preview. The "more since" line shows while the
// tabs hold more than at the dry run, and goes when they match again; the
// age counts up; a selector the counters cannot count (an error group)
// gets no figure, however the tabs move.
func TestBulkPreviewRerunDropsStale(t *testing.T) {
	now := time.Date(2026, 11, 29, 2, 14, 0, 0, time.UTC)
	clock := now
	ctl := &dryRunControl{}
	ctl.set(9, 9, now.Add(-12*time.Second))
	m := New(ctl, Options{NoSubscribe: true, Now: func() time.Time { return clock }, Theme: "dark"})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: 9}}
	screen := func() string { return plainScreen(m) }
	must := func(what string, wants ...string) {
		t.Helper()
		s := screen()
		for _, w := range wants {
			if !strings.Contains(s, w) {
				t.Fatalf("%s: the screen does not show %q:\n%s", what, w, s)
			}
		}
	}
	mustNot := func(what, text string) {
		t.Helper()
		if s := screen(); strings.Contains(s, text) {
			t.Fatalf("%s: the screen shows %q:\n%s", what, text, s)
		}
	}

	archived := engine.Filter{States: []engine.State{engine.StateArchived}}
	cmd := m.startBulk(engine.ActionRetry, archived, "the current filter")
	if cmd == nil {
		t.Fatal("no dry run")
	}
	first := cmd()
	m.Update(first)
	must("the first preview", "retry 9 jobs (state archived)", "as of 02:13:48 (12s ago)", "ctrl+r re-run dry run")
	mustNot("the first preview", "more")

	clock = now.Add(time.Second)
	tick := m.handleMsg(bulkAgeTickMsg{seq: m.dlg.bulk.seq})
	if tick == nil {
		t.Fatal("the age tick stopped while the preview is open")
	}
	must("a second later", "as of 02:13:48 (13s ago)")
	if m.handleMsg(bulkAgeTickMsg{seq: m.dlg.bulk.seq - 1}) != nil {
		t.Fatal("a tick of another dry run kept ticking")
	}

	// The tabs rise by 4,179 while the preview is open.
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: 4188}}
	must("the tabs rose", "retry 9 jobs", "as of 02:13:48 (13s ago)", "4,179 more archived since — not included; ctrl+r", "counts again")
	// They fall back (someone else retried them): nothing more to say.
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: 9}}
	mustNot("the tabs match again", "more archived")
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: 4188}}

	// ctrl+r: a new dry run, under a new tag.
	ctl.set(4188, 4188, now.Add(time.Second))
	oldSeq := m.dlg.bulk.seq
	_, rerun := m.Update(tea.KeyPressMsg{Code: 'r', Mod: tea.ModCtrl})
	if rerun == nil || m.dlg.bulk == nil || m.dlg.bulk.seq == oldSeq {
		t.Fatalf("ctrl+r sent no new dry run (cmd %v, dialog %+v)", rerun != nil, m.dlg.bulk)
	}
	must("re-running", "counting matching jobs…")
	second := rerun()
	// The first answer again, late: dropped.
	m.Update(first)
	must("a stale answer", "counting matching jobs…")
	mustNot("a stale answer", "retry 9 jobs")
	m.Update(second)
	must("the new preview", "retry 4,188 jobs (state archived)", "as of 02:14:01 (0s ago)")
	mustNot("the new preview", "more")
	m.Update(first)
	must("a stale answer after the new one", "retry 4,188 jobs")
	ctl.mu.Lock()
	if n := len(ctl.bulks); n != 2 || !ctl.bulks[0].DryRun || !ctl.bulks[1].DryRun {
		t.Fatalf("bulk calls %+v, want two dry runs", ctl.bulks)
	}
	ctl.mu.Unlock()

	// An error group: the counters cannot count it, so no figure.
	m.dlg.bulk = nil
	group := engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"},
		Kinds: []string{"invoice.generate"}, ErrorPattern: "dial tcp <addr>: connect: connection refused"}
	m.Update(m.startBulk(engine.ActionRetry, group, "error group billing / invoice.generate — dial tcp <addr>: connect: connection refused")())
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: 9000}}
	must("an error group", "as of 02:14:01 (0s ago); jobs that arrived since", "are not included")
	mustNot("an error group", "more")
}
