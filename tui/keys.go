package tui

import (
	"fmt"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// layer is what is on top of the console: the one thing the keys reach,
// and the one drawn over everything else (top).
type layer int

const (
	layerScreen        layer = iota // the screen: list, sheet and their keys
	layerSmall                      // the too-small notice, drawn alone
	layerEditor                     // the built-in editor
	layerEditorOpening              // an editor on its way: keys wait for it
	layerInput                      // the / or : input line
	layerConfirm                    // a confirmation
	layerBulk                       // the bulk dialog
	layerHelp                       // the help
)

// top is the layer the keys go to. handleKey routes by it and overlays
// draws by it, so the layer that takes the keys is the one on screen: a
// key handler and a frame that each tested their own conditions could
// disagree, keys then reaching a dialog the frame does not show, or a
// dialog being drawn over an editor that takes the keys.
func (m *Model) top() layer {
	switch {
	case m.tooSmall():
		return layerSmall
	case m.edit.editor != nil:
		return layerEditor
	case m.edit.opening:
		return layerEditorOpening
	case m.dlg.input != nil:
		return layerInput
	case m.dlg.confirm != nil:
		return layerConfirm
	case m.dlg.bulk != nil && m.dlg.bulk.visible:
		return layerBulk
	case m.dlg.help.open:
		return layerHelp
	}
	return layerScreen
}

// handleKey routes a key press to the layer on top (top): the notice,
// the editor, the input line, a dialog, the help, else the global keys,
// then the screen's.
func (m *Model) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	if msg.String() == "ctrl+c" {
		return m.quit()
	}
	km := m.km
	switch m.top() {
	case layerSmall:
		// Nothing is drawn but the notice: no key may reach a dialog, an
		// editor or a list the operator cannot see (y confirmed a bulk
		// retry hidden behind it). q quits, as the notice says, unless
		// an editor holds text.
		if m.edit.editor == nil && km.Matches(msg, keymap.Quit) {
			return m.quit()
		}
		return nil
	case layerEditor:
		return m.edit.editor.Update(m, msg)
	case layerEditorOpening:
		// No key reaches the screen behind an editor on its way.
		if km.Matches(msg, keymap.Back) {
			m.edit.opening = false
			m.edit.seq++
			return m.toast("edit given up — nothing changed")
		}
		return nil
	case layerInput:
		return m.dlg.input.Update(m, msg)
	case layerConfirm:
		return m.dlg.confirm.Update(m, msg)
	case layerBulk:
		return m.dlg.bulk.Update(m, msg)
	case layerHelp:
		m.dlg.help.SetSize(m.width, m.bodyHeight())
		return m.dlg.help.Update(km, msg)
	}
	switch {
	case km.Matches(msg, keymap.Quit):
		return m.quit()
	case km.Matches(msg, keymap.Help):
		m.dlg.help.open = true
		return nil
	case km.Matches(msg, keymap.Command):
		return m.openInput(inputCommand, "")
	case km.Matches(msg, keymap.Filter):
		var cmd tea.Cmd
		if m.screen != scrJobs {
			cmd = m.switchScreen(scrJobs)
		}
		// The filter in force, and a space: what is typed is a new term.
		q := m.jobs.query
		if q != "" {
			q += " "
		}
		return tea.Batch(cmd, m.openInput(inputFilter, q))
	case km.Matches(msg, keymap.Back):
		return m.back()
	case km.Matches(msg, keymap.Refresh):
		return m.reloadAll()
	}
	if m.screen == scrJobs {
		return m.jobs.Update(m, msg)
	}
	return m.listKey(msg)
}

// moveJobs moves the jobs cursor d rows.
func (m *Model) moveJobs(d int) tea.Cmd {
	m.jobs.move(d, max(m.listHeight(), 1))
	return tea.Batch(m.sheetFollow(), m.maybeLoadMore())
}

// selectTab switches the jobs list to state tab i.
func (m *Model) selectTab(i int) tea.Cmd {
	v := &m.jobs
	v.tab = i
	v.filter.States = nil
	v.selectAll = false
	return tea.Batch(v.reload(m), m.loadCounts())
}

// back undoes one level: the sheet, select-all, the filter, then another
// screen.
func (m *Model) back() tea.Cmd {
	v := &m.jobs
	switch {
	case m.screen != scrJobs && len(m.nav) > 0:
		return m.popNav()
	case m.screen != scrJobs:
		return m.switchScreen(scrJobs)
	case m.sheet.open && len(m.sheet.trail) > 0:
		return m.sheetBack()
	case m.sheet.open:
		m.sheet.open = false
		m.sheet.trail = nil
		return nil
	case v.selectAll:
		v.selectAll = false
		return nil
	case len(m.nav) > 0:
		return m.popNav()
	case v.query != "" || len(v.filter.States) > 0:
		v.setFilter("", engine.Filter{})
		return tea.Batch(m.jobs.reload(m), m.loadCounts())
	case len(v.marked) > 0:
		n := len(v.marked)
		v.clearMarks()
		return m.toast(fmt.Sprintf("cleared %s", plural(int64(n), "mark", "marks")))
	}
	return nil
}

// Update takes the list's answers and the keys of the jobs screen: the
// moves, the tabs, marks and actions; the sheet's own keys go to the
// sheet (sheetView.Update).
func (v *jobsView) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case listMsg:
		return v.take(m, msg)
	case tea.KeyPressMsg:
		return v.key(m, msg)
	}
	return nil
}

// key takes a key of the jobs screen.
func (v *jobsView) key(m *Model, msg tea.KeyPressMsg) tea.Cmd {
	km := m.km
	v.touched = true
	h := max(m.listHeight(), 1)
	moved := m.moveJobs
	switch {
	case km.Matches(msg, keymap.Down):
		return moved(1)
	case km.Matches(msg, keymap.Up):
		return moved(-1)
	case km.Matches(msg, keymap.PageDown):
		return moved(h)
	case km.Matches(msg, keymap.PageUp):
		return moved(-h)
	case km.Matches(msg, keymap.Top):
		return m.jumpTop()
	case km.Matches(msg, keymap.Bottom):
		return m.jumpBottom()
	case km.Matches(msg, keymap.NextTab), km.Matches(msg, keymap.PrevTab):
		d := 1
		if km.Matches(msg, keymap.PrevTab) {
			d = -1
		}
		n := len(engine.AllStates)
		if v.tab < 0 {
			return m.selectTab(0)
		}
		return m.selectTab((v.tab + d + n) % n)
	case km.Matches(msg, keymap.Open):
		if m.sheet.open {
			if id := m.sheet.linkAtTop(); id != "" {
				// On a link: follow it (steps.go); esc comes back, and
				// the cursor's job comes back when the cursor moves.
				return m.followLink(id)
			}
			m.sheet.open = false
			m.sheet.trail = nil
			return nil
		}
		if v.current() == nil {
			// The sheet still holds the job opened last, perhaps on
			// another tab: shown here, its action keys would seem to
			// act on a job the list does not have.
			return m.toastErr("no job under the cursor")
		}
		m.sheet.open = true
		m.sheet.id = ""
		return m.sheetFollow()
	case sheetKey(km, msg):
		return m.sheet.Update(m, msg)
	case km.Matches(msg, keymap.Signal):
		return m.startSignal()
	case km.Matches(msg, keymap.Mark):
		if r := v.current(); r != nil {
			v.toggleMark(r)
			return moved(1)
		}
		return nil
	case km.Matches(msg, keymap.MarkAll):
		n := v.markVisible(h)
		return m.toast(fmt.Sprintf("marked %s · %s marked in all", plural(int64(n), "job", "jobs"), commas(int64(len(v.marked)))))
	case km.Matches(msg, keymap.SelectAll):
		v.selectAll = !v.selectAll
		return nil
	case km.Matches(msg, keymap.Retry):
		return m.act(engine.ActionRetry)
	case km.Matches(msg, keymap.Cancel):
		return m.act(engine.ActionCancel)
	case km.Matches(msg, keymap.Delete):
		return m.act(engine.ActionDelete)
	case km.Matches(msg, keymap.Release):
		return m.act(engine.ActionRelease)
	case km.Matches(msg, keymap.Edit):
		return m.startEdit(editPayload)
	case km.Matches(msg, keymap.RetryInput):
		return m.startEdit(editRetry)
	case km.Matches(msg, keymap.Bulk):
		f := v.effectiveFilter()
		return m.startBulk(defaultBulkAction(f.States), f, "the current filter")
	case km.Matches(msg, keymap.Copy):
		j, why, info := m.oneJob()
		if j == nil {
			return m.noJob(why, info)
		}
		return tea.Batch(tea.SetClipboard(j.ID), m.toast("copied "+termtext.Line(j.ID)))
	case km.Matches(msg, keymap.CopyTrace):
		j, why, info := m.oneJob()
		if j == nil {
			return m.noJob(why, info)
		}
		id := traceID(j)
		if id == "" {
			return m.toast("no trace id on job " + termtext.Line(j.ID))
		}
		return tea.Batch(tea.SetClipboard(id), m.toast("copied trace id "+id))
	case km.Matches(msg, keymap.Payload):
		return m.sheet.Update(m, msg)
	}
	return nil
}

// togglePayload shows or hides the payload of the sheet's job, fetching it
// on first show.
func (m *Model) togglePayload() tea.Cmd {
	if m.sess.hidePayload {
		return nil
	}
	var cmd tea.Cmd
	if !m.sheet.open {
		m.sheet.open = true
		m.sheet.id = ""
		cmd = m.sheetFollow()
	}
	s := &m.sheet
	if s.id == "" {
		return cmd
	}
	s.showPayload = !s.showPayload
	s.invalidate()
	if !s.showPayload {
		// Back where the sheet was, not deep in the traces above.
		s.jumpToPayload = false
		s.scroll = s.scrollBefore
		return cmd
	}
	s.scrollBefore = s.scroll
	// Scroll to the payload once it is drawn.
	s.jumpToPayload = true
	if s.payload == nil && !s.payloadLoading {
		s.payloadLoading = true
		s.invalidate()
		return tea.Batch(cmd, m.loadDetail(s.id, true))
	}
	return cmd
}
