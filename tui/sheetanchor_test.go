package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// failingDetail is job id after n failed attempts, a second apart, read
// as a store gives it back: the error list capped (the first and the
// latest MaxKeptErrors-1), a failed event per attempt, the timeline
// derived from both.
func failingDetail(id string, n int, start time.Time) *engine.JobDetail {
	j := &engine.Job{ID: id, Queue: "flaky", Kind: "flaky.poll", State: engine.StateRetryable,
		Attempt: n, MaxAttempts: 1000, CreatedAt: start, StateChangedAt: start.Add(time.Duration(n) * time.Second)}
	var ev []engine.Event
	for a := 1; a <= n; a++ {
		at := start.Add(time.Duration(a) * time.Second)
		msg := fmt.Sprintf("poll upstream: attempt %d: 502 Bad Gateway", a)
		j.Errors = append(j.Errors, engine.AttemptError{Attempt: a, At: at, Worker: "w1", Message: msg})
		ev = append(ev, engine.Event{JobID: id, Kind: engine.EventFailed, At: at, Actor: "w1",
			From: engine.StateRunning, To: engine.StateRetryable, Attempt: a, Message: msg})
	}
	j.Errors = backend.TrimErrors(j.Errors, engine.MaxKeptErrors)
	return &engine.JobDetail{Job: j, Timeline: engine.Timeline(j, ev)}
}

// TestSheetKeepsItsPlaceAsTheJobChanges: on the walk, the sheet of a job
// failing every few seconds (Redis, attached), scrolled down into its
// timeline, moved two lines at each attempt: past MaxKeptErrors the
// oldest kept error entry leaves the list, and with it the claim the
// timeline derives from it, above the lines on screen. Read again, the
// sheet keeps the lines that were at its top there.
func TestSheetKeepsItsPlaceAsTheJobChanges(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 1, 120, 36)
	id := m.jobs.rows[0].job.ID
	start := time.Date(2026, 12, 6, 5, 19, 59, 0, time.UTC)
	n := engine.MaxKeptErrors + 5
	m.sheet.open = true
	m.sheet.reset(id)
	m.sheet.detailSeq = 7
	m.Update(detailMsg{seq: 7, id: id, detail: failingDetail(id, n, start)})
	m.Render()
	for range 3 {
		m.Update(keyMsg("<ctrl+d>"))
	}
	screen := ansi.Strip(m.Render())
	top := sheetTop(screen)
	if !strings.Contains(top, "#") && !strings.Contains(top, "attempt") {
		t.Fatalf("the sheet's top line %q is not in the timeline:\n%s", top, screen)
	}
	for a := n + 1; a <= n+3; a++ {
		m.Update(detailMsg{seq: 7, id: id, detail: failingDetail(id, a, start)})
		screen = ansi.Strip(m.Render())
		if got := sheetTop(screen); got != top {
			t.Fatalf("after attempt %d the sheet's top line is %q, was %q:\n%s", a, got, top, screen)
		}
	}
}
