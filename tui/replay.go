package tui

import (
	"context"
	"fmt"
	"strconv"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// Replay from a step: `:replay N` on the sheet's job (else the cursor's),
// or the replay key (R) on the step picked in the sheet's steps section,
// asks the engine what the replay would keep and run again, shows that
// in a confirm dialog, and only y creates the new job.

type replayPreviewMsg struct {
	id   string
	step int
	plan *engine.ReplayPlan
	err  error
}

type replayDoneMsg struct {
	id   string
	step int
	job  *engine.Job
	err  error
}

// replayCommand is `:replay N`.
func (m *Model) replayCommand(arg string) (tea.Cmd, error) {
	if m.readOnly {
		return nil, fmt.Errorf("read-only: replay is not allowed")
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("replay N: N is the step to run again from (1, 2, …)")
	}
	id := ""
	if m.sheet.open && m.sheet.id != "" {
		id = m.sheet.id
	} else if r := m.jobs.current(); r != nil && m.screen == scrJobs {
		id = r.job.ID
	}
	if id == "" {
		return nil, fmt.Errorf("replay: no job under the cursor")
	}
	return m.replayPreview(id, n), nil
}

// replayPreview asks what a replay of id from step n would keep and run
// again; the answer opens the confirm dialog. `:replay N` and the replay
// key on the sheet's picked step (steps.go) both come here.
func (m *Model) replayPreview(id string, n int) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		plan, err := ctl.ReplayPreview(c, id, engine.ReplayParams{Step: n})
		return replayPreviewMsg{id: id, step: n, plan: plan, err: err}
	}
}

// replayPreviewed shows the preview and asks.
func (m *Model) replayPreviewed(msg replayPreviewMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("replay " + Sanitize(msg.id) + ": " + Sanitize(msg.err.Error()))
	}
	t := m.theme
	var lines []string
	for i, s := range msg.plan.Kept {
		lines = append(lines, t.OKText.Render("keep  ")+t.Muted.Render(fmt.Sprintf("%2d ", i+1))+Sanitize(s.Name)+
			t.Muted.Render(" · its result is replayed"))
	}
	for i, s := range msg.plan.Rerun {
		lines = append(lines, t.WarnText.Render("run   ")+t.Muted.Render(fmt.Sprintf("%2d ", len(msg.plan.Kept)+i+1))+Sanitize(s.Name)+
			t.Muted.Render(" · was "+string(s.State)))
	}
	lines = append(lines, t.WarnText.Render("run   ")+t.Muted.Render("   then every step the handler asks for after those"),
		"", t.Muted.Render("a new job runs; "+Sanitize(msg.id)+" stays as it is, linked to it"))
	id, step := msg.id, msg.step
	m.dialog = &confirmDialog{
		title: fmt.Sprintf("Replay %s from step %d as a new job?", Sanitize(id), step),
		count: 1,
		lines: lines,
		yes:   func() tea.Cmd { return m.replayCmd(id, step) },
	}
	return nil
}

func (m *Model) replayCmd(id string, step int) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		j, err := ctl.ReplayFromStep(c, id, engine.ReplayParams{Step: step})
		return replayDoneMsg{id: id, step: step, job: j, err: err}
	}
}

func (m *Model) replayDone(msg replayDoneMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("replay " + Sanitize(msg.id) + ": " + Sanitize(msg.err.Error()))
	}
	m.sheet.invalidate()
	cmds := []tea.Cmd{m.toast(fmt.Sprintf("replaying %s from step %d as %s", Sanitize(msg.id), msg.step, Sanitize(msg.job.ID)))}
	if m.sheet.open && m.sheet.id == msg.id {
		// The original now names its fork.
		cmds = append(cmds, m.loadDetail(msg.id, false))
	}
	return tea.Batch(cmds...)
}
