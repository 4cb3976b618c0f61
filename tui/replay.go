package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
)

// Replay from a step: `:replay N` on the job shown (oneJob: the sheet's,
// else the cursor's), or the replay key (R) on the step picked in the
// sheet's steps section, asks the engine what the replay would keep and run again, shows that
// in a confirm dialog, and only y creates the new job.

type replayPreviewMsg struct {
	id   string
	step int
	// result is the replacement result of step N−1, when one was edited.
	result json.RawMessage
	plan   *engine.ReplayPlan
	err    error
}

type replayDoneMsg struct {
	id   string
	step int
	job  *engine.Job
	err  error
}

// replayCommand is `:replay N`.
func (m *Model) replayCommand(arg string) (tea.Cmd, error) {
	if m.sess.readOnly {
		return nil, fmt.Errorf("read-only: replay is not allowed")
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("replay N: N is the step to run again from (1, 2, …)")
	}
	j, why, _ := m.oneJob()
	if j == nil {
		return nil, fmt.Errorf("replay: %s", why)
	}
	return m.replayPreview(j.ID, n, nil), nil
}

// replayPreview asks what a replay of id from step n would keep and run
// again; the answer opens the confirm dialog. `:replay N` and the replay
// key on the sheet's picked step (steps.go) both come here.
func (m *Model) replayPreview(id string, n int, result json.RawMessage) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return previewReplay(c, ctl, id, n, result)
	}
}

// previewReplay is the preview call, for replayPreview and for the save
// of an edited result (edit.go).
func previewReplay(ctx context.Context, ctl engine.Control, id string, n int, result json.RawMessage) replayPreviewMsg {
	plan, err := ctl.ReplayPreview(ctx, id, engine.ReplayParams{Step: n, Result: result})
	return replayPreviewMsg{id: id, step: n, result: result, plan: plan, err: err}
}

// replayPreviewed shows the preview and asks.
func (m *Model) replayPreviewed(msg replayPreviewMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("replay " + termtext.Line(msg.id) + ": " + termtext.Line(msg.err.Error()))
	}
	t := m.theme
	var lines []string
	for i, s := range msg.plan.Kept {
		if len(msg.result) > 0 && i == len(msg.plan.Kept)-1 {
			lines = append(lines, t.OKText.Render("keep  ")+t.Muted.Render(fmt.Sprintf("%2d ", i+1))+termtext.Line(s.Name)+
				t.WarnText.Render(" · result replaced:"))
			lines = append(lines, resultLines(t.Muted.Render("        "), s.Result)...)
			continue
		}
		lines = append(lines, t.OKText.Render("keep  ")+t.Muted.Render(fmt.Sprintf("%2d ", i+1))+termtext.Line(s.Name)+
			t.Muted.Render(" · its result is replayed"))
	}
	for i, s := range msg.plan.Rerun {
		lines = append(lines, t.WarnText.Render("run   ")+t.Muted.Render(fmt.Sprintf("%2d ", len(msg.plan.Kept)+i+1))+termtext.Line(s.Name)+
			t.Muted.Render(" · was "+string(s.State)))
	}
	lines = append(lines, t.WarnText.Render("run   ")+t.Muted.Render("   then every step the handler asks for after those"),
		"", t.Muted.Render("a new job runs; "+termtext.Line(msg.id)+" stays as it is, linked to it"))
	id, step, result := msg.id, msg.step, msg.result
	d := &confirmDialog{
		title: fmt.Sprintf("Replay %s from step %d as a new job?", termtext.Line(id), step),
		count: 1,
		lines: lines,
		yes:   func() tea.Cmd { return m.replayCmd(id, step, result) },
	}
	if step >= 2 && len(msg.plan.Kept) == step-1 {
		// Step N−1's result, the input of the steps that run again, may be
		// replaced: edited as a payload is, then previewed again.
		prev := msg.plan.Kept[step-2]
		cur := prev.Result
		if len(result) > 0 {
			cur = result
		}
		d.edit = func() tea.Cmd { return m.openingEditor(m.prepareReplayEdit(id, step, prev.Name, cur)) }
		d.editHint = fmt.Sprintf("replace step %d's result", step-1)
	}
	m.dlg.confirm = d
	return nil
}

// resultLines shows a step's result, pretty and escaped (job data), each
// line after indent, a bounded few.
func resultLines(indent string, raw json.RawMessage) []string {
	const most = 8
	text := strings.TrimRight(string(prettyJSON(raw)), "\n")
	if len(raw) == 0 {
		text = "null"
	}
	ls := strings.Split(text, "\n")
	var out []string
	for i, l := range ls {
		if i == most {
			out = append(out, indent+fmt.Sprintf("… %d more lines", len(ls)-most))
			break
		}
		out = append(out, indent+termtext.Line(l))
	}
	return out
}

func (m *Model) replayCmd(id string, step int, result json.RawMessage) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		j, err := ctl.ReplayFromStep(c, id, engine.ReplayParams{Step: step, Result: result})
		return replayDoneMsg{id: id, step: step, job: j, err: err}
	}
}

// prepareReplayEdit opens step N−1's result (cur, as the preview had it)
// in the editor the payload edit uses: the built-in one (Options.
// BuiltinEditor), else $EDITOR on a temporary file, written here in the
// command, not in Update.
func (m *Model) prepareReplayEdit(id string, step int, name string, cur json.RawMessage) tea.Cmd {
	setup := m.editorSetup()
	return func() tea.Msg {
		pretty := prettyJSON(cur)
		if len(cur) == 0 {
			pretty = []byte("null")
		}
		r := editReadyMsg{mode: editReplayResult, id: id, step: step, stepName: name}
		return setup.ready(r, pretty, "sluice-result-*.json")
	}
}

// replayResultTitle is the editor's title for a replacement result.
func replayResultTitle(r editReadyMsg) string {
	return fmt.Sprintf("Result of step %d (%s) for the replay of %s from step %d",
		r.step-1, termtext.Line(r.stepName), termtext.Line(r.id), r.step)
}

// replayResultEdited checks the edited result is one JSON value and
// previews the replay with it (unchanged: without a replacement). It runs
// in saveEdit's command.
func replayResultEdited(ctx context.Context, ctl engine.Control, r editReadyMsg, b []byte, out editSavedMsg) editSavedMsg {
	var result json.RawMessage
	if strings.TrimSpace(string(b)) != strings.TrimSpace(string(r.orig)) {
		v, err := engine.ValidateJSON(b)
		if err != nil {
			out.invalid = fmt.Errorf("not valid JSON: %v", err)
			return out
		}
		result = v
	}
	c, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	p := previewReplay(c, ctl, r.id, r.step, result)
	if p.err != nil {
		out.err = p.err
		return out
	}
	r.removeFile()
	out.preview = &p
	return out
}

// replayResultSaved takes an edited result's preview: the confirm dialog
// again, now showing the replacement.
func (m *Model) replayResultSaved(msg editSavedMsg) tea.Cmd {
	switch {
	case msg.invalid != nil:
		return tea.Batch(msg.ready.removeCmd(), m.toastErr(fmt.Sprintf("%s — the replay was not started", msg.invalid)))
	case msg.err != nil:
		return tea.Batch(msg.ready.removeCmd(), m.toastErr("replay "+termtext.Line(msg.id)+": "+termtext.Line(msg.err.Error())))
	}
	return m.replayPreviewed(*msg.preview)
}

func (m *Model) replayDone(msg replayDoneMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("replay " + termtext.Line(msg.id) + ": " + termtext.Line(msg.err.Error()))
	}
	m.sheet.invalidate()
	cmds := []tea.Cmd{m.toast(fmt.Sprintf("replaying %s from step %d as %s", termtext.Line(msg.id), msg.step, termtext.Line(msg.job.ID)))}
	if m.sheet.open && m.sheet.id == msg.id {
		// The original now names its fork.
		cmds = append(cmds, m.loadDetail(msg.id, false))
	}
	return tea.Batch(cmds...)
}
