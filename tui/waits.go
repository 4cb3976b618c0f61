package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
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
		return "⏸ signal " + termtext.Line(w.Signal)
	case engine.WaitKindChildren:
		return fmt.Sprintf("⏸ children %d/%d", w.Done, w.Total)
	}
	return "⏸ " + termtext.Line(string(w.Kind))
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

// The signal key (s): the payload of the signal the job waits for is
// written in the editor the payload edit uses (the built-in one under
// Options.BuiltinEditor, else $EDITOR on a temporary file), checked to be
// JSON, shown in a confirmation, and only y sends it. A job that waits
// for no signal gets the command line instead, for the name.

// signalTarget is the job the signal key sends to — the one shown
// (oneJob) — and the signal it waits for ("" when none); with no job,
// why says so and info tells a wait from a refusal.
func (m *Model) signalTarget() (id, name, why string, info bool) {
	j, why, info := m.oneJob()
	if j == nil {
		return "", "", why, info
	}
	if w := engine.WaitOf(j); w != nil && w.Kind == engine.WaitKindSignal {
		name = w.Signal
	} else if w := j.Wait; w != nil && w.Kind == engine.WaitKindSignal && j.State == engine.StateScheduled {
		name = w.Signal // a listed row: its wait's summary
	}
	return j.ID, name, "", false
}

// startSignal is the signal key.
func (m *Model) startSignal() tea.Cmd {
	if m.sess.readOnly {
		return nil // the key is unbound read-only; this is the backstop
	}
	id, name, why, info := m.signalTarget()
	switch {
	case id == "":
		return m.noJob("signal: "+why, info)
	case name == "":
		// Waiting for no signal: the command line, for the name.
		return m.openInput(inputCommand, "signal ")
	}
	return m.openingEditor(m.prepareSignalEdit(id, name, nil))
}

// prepareSignalEdit opens a signal's payload (cur, else {}) in the
// editor; the temporary file is written here, in the command.
func (m *Model) prepareSignalEdit(id, name string, cur json.RawMessage) tea.Cmd {
	setup := m.editorSetup()
	return func() tea.Msg {
		text := []byte("{}\n")
		if len(cur) > 0 {
			text = prettyJSON(cur)
		}
		r := editReadyMsg{mode: editSignal, id: id, signal: name}
		return setup.ready(r, text, "sluice-signal-*.json")
	}
}

// signalEditTitle is the editor's title for a signal's payload.
func signalEditTitle(r editReadyMsg) string {
	return "Payload of the signal " + termtext.Line(r.signal) + " to " + termtext.Line(r.id)
}

// signalEdited checks the edited payload is one JSON value; it runs in
// saveEdit's command, and sends nothing: the confirmation does.
func signalEdited(r editReadyMsg, b []byte, out editSavedMsg) editSavedMsg {
	var c bytes.Buffer
	if err := json.Compact(&c, bytes.TrimSpace(b)); err != nil || c.Len() == 0 {
		out.invalid = fmt.Errorf("not valid JSON: the signal's payload is one JSON value")
		return out
	}
	r.removeFile()
	out.signalPayload = c.Bytes()
	return out
}

// signalPayloadEdited asks before sending: the signal, the job and the
// payload; the edit key opens the payload again.
func (m *Model) signalPayloadEdited(msg editSavedMsg) tea.Cmd {
	r := msg.ready
	switch {
	case msg.invalid != nil:
		return tea.Batch(r.removeCmd(), m.toastErr(fmt.Sprintf("%s — nothing sent", msg.invalid)))
	case msg.err != nil:
		return tea.Batch(r.removeCmd(), m.toastErr("signal "+termtext.Line(r.signal)+": "+termtext.Line(msg.err.Error())))
	}
	id, name, payload := r.id, r.signal, msg.signalPayload
	lines := append([]string{m.theme.Muted.Render("payload:")}, resultLines("  ", payload)...)
	m.dlg.confirm = &confirmDialog{
		title:    fmt.Sprintf("Send the signal %s to %s?", termtext.Line(name), termtext.Line(id)),
		count:    1,
		lines:    lines,
		yes:      func() tea.Cmd { return m.sendSignal(id, name, payload) },
		edit:     func() tea.Cmd { return m.openingEditor(m.prepareSignalEdit(id, name, payload)) },
		editHint: "edit the payload",
	}
	return nil
}

// sendSignal sends the signal name to job id with payload.
func (m *Model) sendSignal(id, name string, payload json.RawMessage) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := ctl.Signal(c, id, name, payload)
		return signalMsg{id: id, name: name, err: err}
	}
}

// signalMsg reports a signal sent from the command line or the editor.
type signalMsg struct {
	id, name string
	err      error
}

// signalCommand is :signal NAME [JSON]: the signal goes to the job
// shown (oneJob: the sheet's, else the one under the cursor), with the JSON as its payload (null
// when none). Refused read-only, as every action is.
func (m *Model) signalCommand(arg string) (tea.Cmd, error) {
	if m.sess.readOnly {
		return nil, fmt.Errorf("read-only: signals are not allowed")
	}
	name, payload, _ := strings.Cut(arg, " ")
	payload = strings.TrimSpace(payload)
	if name == "" {
		return nil, fmt.Errorf("signal NAME [JSON]: NAME is the signal the job waits for")
	}
	if payload != "" && !json.Valid([]byte(payload)) {
		return nil, fmt.Errorf("signal %s: the payload is not JSON", termtext.Line(name))
	}
	j, why, _ := m.oneJob()
	if j == nil {
		return nil, fmt.Errorf("signal: %s", why)
	}
	return m.sendSignal(j.ID, name, json.RawMessage(payload)), nil
}

// signalDone says how the signal went; the job's own change refreshes
// the sheet.
func (m *Model) signalDone(msg signalMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("signal " + termtext.Line(msg.name) + " to " + termtext.Line(msg.id) + ": " + termtext.Line(msg.err.Error()))
	}
	cmd := m.toast("signal " + termtext.Line(msg.name) + " sent to " + termtext.Line(msg.id))
	if m.sheet.open && m.sheet.id == msg.id {
		return tea.Batch(cmd, m.loadDetail(msg.id, false))
	}
	return cmd
}
