package tui

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"

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
	case m.editor != nil:
		return layerEditor
	case m.editOpening:
		return layerEditorOpening
	case m.input != nil:
		return layerInput
	case m.dialog != nil:
		return layerConfirm
	case m.bulk != nil && m.bulk.visible:
		return layerBulk
	case m.help:
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
		if m.editor == nil && km.Matches(msg, keymap.Quit) {
			return m.quit()
		}
		return nil
	case layerEditor:
		return m.editorKey(msg)
	case layerEditorOpening:
		// No key reaches the screen behind an editor on its way.
		if km.Matches(msg, keymap.Back) {
			m.editOpening = false
			m.editSeq++
			return m.toast("edit given up — nothing changed")
		}
		return nil
	case layerInput:
		return m.inputKey(msg)
	case layerConfirm:
		return m.dialogKey(msg)
	case layerBulk:
		return m.bulkKey(msg)
	case layerHelp:
		page := max(m.bodyHeight()-1, 1)
		switch {
		case km.Matches(msg, keymap.Help) || km.Matches(msg, keymap.Back) || km.Matches(msg, keymap.Quit):
			m.help = false
			m.helpScroll = 0
		case km.Matches(msg, keymap.Down):
			m.helpScroll++
		case km.Matches(msg, keymap.Up):
			m.helpScroll--
		case km.Matches(msg, keymap.PageDown):
			m.helpScroll += page
		case km.Matches(msg, keymap.PageUp):
			m.helpScroll -= page
		case km.Matches(msg, keymap.Top):
			m.helpScroll = 0
		case km.Matches(msg, keymap.Bottom):
			m.helpScroll = 1 << 20 // clamped when drawn
		}
		m.helpScroll = max(m.helpScroll, 0)
		return nil
	}
	switch {
	case km.Matches(msg, keymap.Quit):
		return m.quit()
	case km.Matches(msg, keymap.Help):
		m.help = true
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
		return m.jobsKey(msg)
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

func (m *Model) jobsKey(msg tea.KeyPressMsg) tea.Cmd {
	km, v := m.km, &m.jobs
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
	case km.Matches(msg, keymap.SheetDown), km.Matches(msg, keymap.SheetUp):
		if !m.sheet.open {
			return nil
		}
		step := max(m.bodyHeight()/2, 1)
		if km.Matches(msg, keymap.SheetUp) {
			step = -step
		}
		m.sheet.scroll = max(m.sheet.scroll+step, 0)
		return nil
	case km.Matches(msg, keymap.NextSection), km.Matches(msg, keymap.PrevSection):
		if !m.sheet.open {
			return nil
		}
		d := 1
		if km.Matches(msg, keymap.PrevSection) {
			d = -1
		}
		if !m.sheet.jumpSection(d) && d > 0 {
			// Past the last section nothing moves: said, not silent.
			return m.toast("the last section of the sheet" + m.linksKeyNote())
		}
		return nil
	case km.Matches(msg, keymap.Links):
		return m.toLinks()
	case km.Matches(msg, keymap.StepDown):
		return m.moveStep(1)
	case km.Matches(msg, keymap.StepUp):
		return m.moveStep(-1)
	case km.Matches(msg, keymap.ReplayStep):
		return m.replayStep()
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
	case km.Matches(msg, keymap.Payload):
		return m.togglePayload()
	}
	return nil
}

// togglePayload shows or hides the payload of the sheet's job, fetching it
// on first show.
func (m *Model) togglePayload() tea.Cmd {
	if m.hidePayload {
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

// defaultBulkAction is what b does to the jobs of some states: retry the
// dead, release the held, cancel the waiting, delete the finished.
func defaultBulkAction(states []engine.State) engine.Action {
	for _, s := range states {
		switch s {
		case engine.StateQuarantined:
			return engine.ActionRelease
		case engine.StateScheduled, engine.StateAvailable, engine.StateRetryable, engine.StateRunning:
			return engine.ActionCancel
		case engine.StateCompleted:
			return engine.ActionDelete
		}
	}
	return engine.ActionRetry
}

var pastTense = map[engine.Action]string{
	engine.ActionRetry:   "retried",
	engine.ActionCancel:  "cancelled",
	engine.ActionDelete:  "deleted",
	engine.ActionRelease: "released",
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// oneJob is the job every one-job action acts on (retry, cancel, delete,
// release, the payload edit, retry with new input, copy, the signal key,
// :signal and :replay): the job the screen shows. With the sheet open
// that is the sheet's job, which may be one a link led to, not the list's
// cursor row (r on a followed link retried the row); without it, the
// cursor's row. While a linked job is still loading there is none: why
// says so, and info tells a wait (a plain toast) from a refusal (an error
// toast).
func (m *Model) oneJob() (j *engine.Job, why string, info bool) {
	if m.screen != scrJobs {
		return nil, "no job under the cursor", false
	}
	r := m.jobs.current()
	if s := &m.sheet; s.open && s.id != "" {
		switch {
		case s.detail != nil && s.detail.Job != nil && s.detail.Job.ID == s.id:
			return s.detail.Job, "", false
		case r != nil && r.job.ID == s.id:
			// The cursor's own job, its sheet on its way: the row is it.
			return r.job, "", false
		case s.err != nil:
			return nil, "the linked job " + termtext.Line(s.id) + " could not be read: " + termtext.Line(s.err.Error()) + " — nothing done", false
		}
		return nil, "still loading the linked job " + termtext.Line(s.id) + " — nothing done", true
	}
	if r == nil {
		return nil, "no job under the cursor", false
	}
	return r.job, "", false
}

// noJob is the toast of a one-job key that has no job to act on.
func (m *Model) noJob(why string, info bool) tea.Cmd {
	if info {
		return m.toast(why)
	}
	return m.toastErr(why)
}

// act confirms and runs an action on the marked jobs, the cursor's job,
// or — when everything matching is selected — every matching job.
func (m *Model) act(a engine.Action) tea.Cmd {
	v := &m.jobs
	if v.selectAll {
		return m.startBulk(a, v.effectiveFilter(), "all jobs matching the filter")
	}
	ids := v.markedIDs()
	var title string
	var lines []string
	if len(ids) == 0 {
		j, why, info := m.oneJob()
		if j == nil {
			return m.noJob(why, info)
		}
		id := termtext.Line(j.ID)
		// An action the job's state does not take is refused here, not
		// confirmed and then failed (u on an archived job asked "Release
		// job …?" and then said "wrong state").
		if states, err := engine.ActionFrom(a); err == nil && !slices.Contains(states, j.State) {
			from := make([]string, len(states))
			for i, s := range states {
				from[i] = string(s)
			}
			return m.toastErr(fmt.Sprintf("%s applies to %s jobs; %s is %s", a, strings.Join(from, ", "), id, j.State))
		}
		ids = []string{j.ID}
		title = fmt.Sprintf("%s job %s?", titleCase(string(a)), id)
		if a == engine.ActionRetry && j.SupersededBy != "" {
			return m.confirmForcedRetry(j)
		}
		if a == engine.ActionRelease {
			return m.confirmReleaseOne(j.ID, title)
		}
	} else {
		title = fmt.Sprintf("%s %s?", titleCase(string(a)), plural(int64(len(ids)), "marked job", "marked jobs"))
		if hidden := v.hiddenMarks(); hidden > 0 {
			lines = append(lines, m.theme.WarnText.Render(fmt.Sprintf("%s hidden by the filter", plural(int64(hidden), "of them is", "of them are"))))
		}
		for i, id := range ids {
			if i == 5 {
				lines = append(lines, m.theme.Muted.Render(fmt.Sprintf("… and %s more", commas(int64(len(ids)-5)))))
				break
			}
			lines = append(lines, "  "+termtext.Line(id))
		}
		if len(ids) > engine.MaxApplyIDs {
			lines = append(lines, m.theme.Muted.Render(fmt.Sprintf("sent in %d chunks of at most %s", (len(ids)+engine.MaxApplyIDs-1)/engine.MaxApplyIDs, commas(engine.MaxApplyIDs))))
		}
	}
	count := int64(len(ids))
	m.dialog = &confirmDialog{
		title: title,
		count: count,
		lines: lines,
		yes: func() tea.Cmd {
			return m.applyCmd(a, ids)
		},
	}
	return nil
}

// confirmForcedRetry asks before retrying a superseded job (retried with
// new input or replayed from a step), saying what superseded it: the
// store refuses the retry unless forced, since the job's side effects
// would run again beside its successor's.
func (m *Model) confirmForcedRetry(j *engine.Job) tea.Cmd {
	id, by := j.ID, j.SupersededBy
	m.dialog = &confirmDialog{
		title: fmt.Sprintf("Retry superseded job %s?", termtext.Line(id)),
		count: 1,
		lines: []string{
			m.theme.WarnText.Render("superseded by " + termtext.Line(by) + " (its retry with new input or replay)"),
			"retrying it anyway runs its side effects again",
		},
		yes: func() tea.Cmd { return m.forceRetryCmd(id) },
	}
	return nil
}

// confirmReleaseOne asks before releasing one quarantined job, saying
// what comes next: the job goes on probation, its fingerprint and the
// fingerprint's other held jobs stay as they are.
func (m *Model) confirmReleaseOne(id, title string) tea.Cmd {
	t := m.theme
	next := "The fingerprint's other held jobs stay held until it is released on :quarantine."
	if k := m.km.B(keymap.Release).Help().Key; k != "" && m.km.Enabled(keymap.Release) {
		next = "The fingerprint's other held jobs stay held until " + k + " on :quarantine releases it."
	}
	m.dialog = &confirmDialog{
		title: title,
		count: 1,
		notes: []dialogNote{
			{"Its fingerprint stays quarantined.", t.WarnText},
			{"On probation: its crash count resets, and its next crash quarantines it again at once.", t.Muted},
			{next, t.Muted},
		},
		yes: func() tea.Cmd {
			apply := m.applyCmd(engine.ActionRelease, []string{id})
			return func() tea.Msg {
				msg := apply()
				if a, ok := msg.(actionMsg); ok {
					a.probation = true
					return a
				}
				return msg
			}
		},
	}
	return nil
}

// actionDone reports an Apply: a toast with the per-id results, marks
// cleared for the jobs that were acted on, and the screen reloaded.
func (m *Model) actionDone(msg actionMsg) tea.Cmd {
	ok := 0
	reasons := map[string]int{}
	var firstFail string
	m.rowGen++ // rows show their notes
	for _, r := range msg.results {
		if r.OK || r.Reason == "not_found" {
			delete(m.jobs.marked, r.ID)
			delete(m.jobs.failNote, r.ID)
		}
		if r.OK {
			ok++
			continue
		}
		if _, still := m.jobs.marked[r.ID]; still {
			// It stays marked, saying why: a second r redoes only these.
			m.jobs.failNote[r.ID] = "✗ " + termtext.Line(r.Reason) + ": " + termtext.Line(r.Error)
		}
		reasons[r.Reason]++
		if firstFail == "" {
			firstFail = termtext.Line(r.ID) + ": " + termtext.Line(r.Error)
		}
	}
	m.jobs.markOrder = m.markedKeysInOrder()
	text := fmt.Sprintf("%d %s", ok, pastTense[msg.action])
	failed := len(msg.results) - ok
	var cmd tea.Cmd
	switch {
	case msg.err != nil:
		text = fmt.Sprintf("%s: %s", text, termtext.Line(msg.err.Error()))
		cmd = m.toastErr(text)
	case failed > 0:
		var parts []string
		for _, r := range sortedKeys(reasons) {
			parts = append(parts, fmt.Sprintf("%s %d", r, reasons[r]))
		}
		text = fmt.Sprintf("%s · %d failed (%s) — %s", text, failed, strings.Join(parts, ", "), firstFail)
		cmd = m.toastErr(text)
	default:
		if msg.probation && ok == 1 {
			text += " · on probation; fingerprint still quarantined"
		}
		cmd = m.toast(text)
	}
	cmds := []tea.Cmd{cmd, m.loadCounts(), m.jobs.refresh(m)}
	if m.sheet.open && m.sheet.id != "" {
		cmds = append(cmds, m.loadDetail(m.sheet.id, false))
	}
	return tea.Batch(cmds...)
}

// markedKeysInOrder keeps the marking order of the ids still marked.
func (m *Model) markedKeysInOrder() []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range m.jobs.markOrder {
		if _, ok := m.jobs.marked[id]; ok && !seen[id] {
			out = append(out, id)
			seen[id] = true
		}
	}
	return out
}

// startEdit edits the payload of the job shown (oneJob) in $EDITOR: to
// save it in place (e) or to retry with it as new input (w).
func (m *Model) startEdit(mode editMode) tea.Cmd {
	j, why, info := m.oneJob()
	if j == nil {
		return m.noJob(why, info)
	}
	if p := m.pendingEdit; p != nil && p.id == j.ID && p.mode == mode {
		return m.editReady(*p)
	}
	return m.openingEditor(m.prepareEdit(mode, j.ID))
}

// openingEditor runs cmd, which prepares an editor, with the keys held
// until it opens (Model.editOpening).
func (m *Model) openingEditor(cmd tea.Cmd) tea.Cmd {
	m.editSeq++
	seq := m.editSeq
	m.editOpening = true
	return func() tea.Msg {
		msg := cmd()
		if r, ok := msg.(editReadyMsg); ok {
			r.seq = seq
			return r
		}
		return msg
	}
}

func (m *Model) editReady(msg editReadyMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr(fmt.Sprintf("edit %s: %s", termtext.Line(msg.id), termtext.Line(msg.err.Error())))
	}
	if m.opts.BuiltinEditor {
		return m.openEditor(msg)
	}
	argv := append(m.editorCommand(), msg.path)
	c := exec.Command(argv[0], argv[1:]...)
	return tea.ExecProcess(c, func(err error) tea.Msg { return editorDoneMsg{ready: msg, err: err} })
}

func (m *Model) editorDone(msg editorDoneMsg) tea.Cmd {
	if msg.err != nil {
		m.pendingEdit = &msg.ready
		return m.toastErr(fmt.Sprintf("editor: %s — nothing saved", termtext.Line(msg.err.Error())))
	}
	return m.saveEdit(msg.ready, nil)
}

func (m *Model) editSaved(msg editSavedMsg) tea.Cmd {
	if m.editorSaved(msg) {
		return nil // refused: the text stays in the editor, with the reason
	}
	m.pendingEdit = nil
	if msg.mode == editReplayResult {
		return m.replayResultSaved(msg)
	}
	if msg.mode == editSignal {
		return m.signalPayloadEdited(msg)
	}
	key := m.km.B(keymap.Edit).Help().Key
	if msg.mode == editRetry {
		key = m.km.B(keymap.RetryInput).Help().Key
	}
	switch {
	case msg.invalid != nil:
		r := msg.ready
		m.pendingEdit = &r
		return m.toastErr(fmt.Sprintf("%s — nothing saved; %s edits it again", msg.invalid, key))
	case msg.err != nil:
		if isErr(msg.err, engine.ErrConflict) && msg.mode == editPayload {
			return m.toastErr("the payload changed since it was opened — nothing saved; " + key + " edits the new version")
		}
		return m.toastErr(fmt.Sprintf("save %s: %s", termtext.Line(msg.id), termtext.Line(msg.err.Error())))
	case msg.same:
		return m.toast("payload unchanged — nothing saved")
	}
	text := fmt.Sprintf("payload saved (version %d)", msg.job.Version)
	if msg.mode == editRetry {
		text = "retried with new input as " + termtext.Line(msg.job.ID)
	}
	cmds := []tea.Cmd{m.toast(text), m.loadCounts(), m.jobs.refresh(m)}
	if m.sheet.open && m.sheet.id == msg.id && msg.mode == editPayload {
		// Show what was saved: one load, with the payload, so no answer
		// without it can land after and hide it.
		m.sheet.stale = false
		if !m.sheet.showPayload {
			m.sheet.scrollBefore = m.sheet.scroll
		}
		m.sheet.showPayload = true
		m.sheet.jumpToPayload = true
		m.sheet.payload = nil
		m.sheet.payloadLoading = true
		m.sheet.invalidate()
		cmds = append(cmds, m.loadDetail(msg.id, true))
	} else if m.sheet.open && m.sheet.id == msg.id {
		m.sheet.stale = false
		cmds = append(cmds, m.loadDetail(msg.id, m.sheet.showPayload))
	}
	return tea.Batch(cmds...)
}
