package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// Workflows that wait (engine/wait.go), in the sheet: what a waiting job
// waits for, its children with their states (links enter follows), and
// :signal NAME [JSON], which sends a signal to the sheet's job.

// maxChildLinks bounds the children the sheet lists and reads.
const maxChildLinks = 50

// waitLine says what a job waits for.
func waitLine(w *engine.Wait) string {
	return fmt.Sprintf("%s (step %d %s)", w.Describe(), w.Step, w.Name)
}

// waitCell is a listed waiting job's last column: what it waits for, in
// a few words ("⏸ signal payment.confirmed", "⏸ until 14:05:00",
// "⏸ children 97/100"); "" for a job that waits for nothing. The names
// are job data: escaped.
func waitCell(j *engine.Job, now time.Time) string {
	w := j.Wait
	if w == nil || j.State != engine.StateScheduled {
		return ""
	}
	switch w.Kind {
	case engine.WaitKindSleep:
		return "⏸ until " + waitClock(w.Until, now)
	case engine.WaitKindSignal:
		return "⏸ signal " + Sanitize(w.Signal)
	case engine.WaitKindChildren:
		return fmt.Sprintf("⏸ children %d/%d", w.Done, w.Total)
	}
	return "⏸ " + Sanitize(string(w.Kind))
}

// waitClock is a wait's time as the sheet's timeline shows times (UTC),
// with the date when it is not today's.
func waitClock(t, now time.Time) string {
	if t.IsZero() {
		return "?"
	}
	t, now = t.UTC(), now.UTC()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04")
}

// childStates reads the states of d's first spawned children; nil when it
// has none or they cannot be read (the sheet then lists them without).
// It runs in the detail command, off the UI goroutine.
func childStates(ctx context.Context, ctl engine.Control, d *engine.JobDetail) map[string]engine.State {
	if d == nil || d.Job == nil || len(d.Job.Checkpoint) == 0 {
		return nil
	}
	cp, err := engine.ParseCheckpoint(d.Job.Checkpoint)
	if err != nil || len(cp.Children) == 0 {
		return nil
	}
	ids := cp.Children[:min(len(cp.Children), maxChildLinks)]
	page, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{IDs: ids}, Limit: len(ids)})
	if err != nil {
		return nil
	}
	out := make(map[string]engine.State, len(page.Jobs))
	for _, j := range page.Jobs {
		out[j.ID] = j.State
	}
	return out
}

// childLinks lists a job's children as links, with their states.
func childLinks(cp *engine.Checkpoint, states map[string]engine.State) []sheetLink {
	if cp == nil {
		return nil
	}
	var out []sheetLink
	for i, id := range cp.Children {
		if i == maxChildLinks {
			out = append(out, sheetLink{label: "children", id: fmt.Sprintf("… %d more", len(cp.Children)-i), more: true})
			break
		}
		note := "state unknown"
		if st, ok := states[id]; ok {
			note = string(st)
		} else if states != nil {
			note = "gone"
		}
		out = append(out, sheetLink{label: "child", id: id, note: note})
	}
	return out
}

// signalMsg reports a signal sent from the command line.
type signalMsg struct {
	id, name string
	err      error
}

// signalCommand is :signal NAME [JSON]: the signal goes to the sheet's
// job (or the one under the cursor), with the JSON as its payload (null
// when none). Refused read-only, as every action is.
func (m *Model) signalCommand(arg string) (tea.Cmd, error) {
	if m.readOnly {
		return nil, fmt.Errorf("read-only: signals are not allowed")
	}
	name, payload, _ := strings.Cut(arg, " ")
	payload = strings.TrimSpace(payload)
	if name == "" {
		return nil, fmt.Errorf("signal NAME [JSON]: NAME is the signal the job waits for")
	}
	if payload != "" && !json.Valid([]byte(payload)) {
		return nil, fmt.Errorf("signal %s: the payload is not JSON", Sanitize(name))
	}
	id := ""
	if m.sheet.open && m.sheet.id != "" {
		id = m.sheet.id
	} else if r := m.jobs.current(); r != nil && m.screen == scrJobs {
		id = r.job.ID
	}
	if id == "" {
		return nil, fmt.Errorf("signal: no job under the cursor")
	}
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := ctl.Signal(c, id, name, json.RawMessage(payload))
		return signalMsg{id: id, name: name, err: err}
	}, nil
}

// signalDone says how the signal went; the job's own change refreshes
// the sheet.
func (m *Model) signalDone(msg signalMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("signal " + Sanitize(msg.name) + " to " + Sanitize(msg.id) + ": " + Sanitize(msg.err.Error()))
	}
	cmd := m.toast("signal " + Sanitize(msg.name) + " sent to " + Sanitize(msg.id))
	if m.sheet.open && m.sheet.id == msg.id {
		return tea.Batch(cmd, m.loadDetail(msg.id, false))
	}
	return cmd
}
