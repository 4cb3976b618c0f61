package tui

// The bulk preview's canary fields (a retry redrives a sample first and
// halts itself when the redriven fail again), and what the console shows
// of a canary run.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// bulkCanary is the canary's two fields: the sample's size (empty: no
// canary) and the halt threshold, a share ("0.2") or a percentage
// ("20%"; empty: the engine's default).
type bulkCanary struct {
	size, halt textField
}

func newBulkCanary() bulkCanary {
	return bulkCanary{size: textField{accept: "0123456789", max: 4}, halt: textField{accept: "0123456789.%", max: 5}}
}

// on reports whether one of the fields has the keys.
func (c *bulkCanary) on() bool { return c.size.on || c.halt.on }

// readSize is the typed size, 0 for none.
func readSize(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > engine.MaxCanarySize {
		return 0, fmt.Errorf("canary size %q: a number of jobs, 1–%d (empty: no canary)", s, engine.MaxCanarySize)
	}
	return n, nil
}

// readHalt is the typed halt threshold as a share, 0 for the default.
func readHalt(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err == nil && (strings.HasSuffix(s, "%") || v >= 1) {
		v /= 100
	}
	if err != nil || v <= 0 || v >= 1 {
		return 0, fmt.Errorf("halt threshold %q: a share of failures, 0.2 or 20%% (empty: %s)", s, pct(engine.DefaultHaltFailureRate))
	}
	return v, nil
}

// params is the canary the fields ask for, nil for none.
func (c *bulkCanary) params() *engine.CanaryParams {
	n, err := readSize(c.size.in)
	if err != nil || n == 0 {
		return nil
	}
	h, _ := readHalt(c.halt.in)
	return &engine.CanaryParams{Size: n, HaltFailureRate: h}
}

// canaryKey types in the canary's fields: tab or enter leaves the size
// for the threshold (a size left empty asks for no canary), and the
// threshold for the rest of the preview; a value that does not read
// keeps the keys and says why; esc cancels the dialog.
func (m *Model) canaryKey(msg tea.KeyPressMsg) tea.Cmd {
	c := &m.dlg.bulk.canary
	f := &c.size
	if c.halt.on {
		f = &c.halt
	}
	switch f.key(m.km, msg) {
	case fieldDropped:
		return m.dropBulk()
	case fieldLeft:
		var err error
		if f == &c.size {
			var n int
			n, err = readSize(f.in)
			if err == nil {
				f.err, f.on = "", false
				c.halt.on = n > 0
				return nil
			}
		} else if _, err = readHalt(f.in); err == nil {
			f.err, f.on = "", false
			return nil
		}
		f.err = err.Error()
	}
	return nil
}

// canaryLines are the canary's fields in the preview: "canary [50] a
// sample first, on at 90% ok · halt above [20%] failed of the last 100".
func (m *Model) canaryLines(inner int) []pline {
	c, t := &m.dlg.bulk.canary, m.theme
	prio := keepNotes
	if c.on() || c.size.in != "" || c.size.err != "" || c.halt.err != "" {
		prio = keepAlways
	}
	head := t.Bold.Render("canary ") + t.Cell.Render("["+fitRight(c.size.shown(), 5)+"]") + " "
	var note string
	switch p := c.params(); {
	case p == nil && !c.size.on:
		note = t.Muted.Render("none")
		if m.km.Enabled(keymap.BulkCanary) {
			note += t.Muted.Render(" · " + m.km.B(keymap.BulkCanary).Help().Key + ": sample first, halt on repeat failures")
		}
	default:
		halt := c.halt.shown()
		if halt == "" {
			halt = pct(engine.DefaultHaltFailureRate)
		}
		note = t.Muted.Render(fmt.Sprintf("a sample first, on at %s ok · halt above ", pct(engine.DefaultCanaryMinSuccess))) +
			t.Cell.Render("["+halt+"]") + t.Muted.Render(fmt.Sprintf(" failed of the last %d", engine.DefaultCanaryWindow))
		if c.on() {
			note += t.Muted.Render(" · enter applies")
		}
	}
	out := []pline{{prio: prio, s: clip(head+note, inner)}}
	for _, e := range []string{c.size.err, c.halt.err} {
		if e == "" {
			continue
		}
		for _, l := range wrap(e, inner) {
			out = append(out, pline{prio: keepAlways, s: t.ErrorText.Render(l)})
		}
	}
	return out
}

// haltedHint says what an operator does with a halted run.
func (m *Model) haltedHint() string {
	return fmt.Sprintf(":operations — %s resumes it, %s cancels it", m.km.B(keymap.ResumeOperation).Help().Key, m.km.B(keymap.Cancel).Help().Key)
}

// resumeOperation asks the engine to set a halted run going again.
func (m *Model) resumeOperation(id string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		op, err := ctl.ResumeOperation(c, id)
		return opResumeMsg{op: op, err: err}
	}
}

// opResumeMsg answers resumeOperation.
type opResumeMsg struct {
	op  *engine.Operation
	err error
}

// resumed takes a resume's answer: a toast, and :operations read again.
func (m *Model) resumed(msg opResumeMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("resume operation: " + termtext.Line(msg.err.Error()))
	}
	cmds := []tea.Cmd{m.toast("operation " + termtext.Line(msg.op.ID) + " resumed: it goes on watching a fresh window")}
	if m.screen == scrOperations {
		cmds = append(cmds, m.loadScreen(scrOperations))
	}
	return tea.Batch(cmds...)
}

func pct(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }
