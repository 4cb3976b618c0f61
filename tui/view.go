package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
)

// Smallest terminal the console lays out in; below it says so.
const (
	minWidth  = 60
	minHeight = 12
)

func wOf(s string) int { return ansi.StringWidth(s) }

func (m *Model) tooSmall() bool { return m.width < minWidth || m.height < minHeight }

// Layout, top to bottom: title line, the store's durability warning
// when Meta has one, tabs (or the screen's title), the
// filter line (jobs screen), a banner when a load fails, the body, the
// status line.
func (m *Model) chromeHeight() int {
	h := 3 // title, tabs, status
	if m.screen == scrJobs || m.dlg.input != nil {
		h++
	}
	if in := m.dlg.input; in != nil {
		h += len(in.errLines(m.width, m.theme))
	}
	if m.live.banner != "" {
		h++
	}
	if m.storeWarned() {
		h += len(m.sess.meta.Warnings)
	}
	return h
}

// storeWarned reports whether Meta says the store loses jobs silently.
func (m *Model) storeWarned() bool { return m.sess.meta != nil && len(m.sess.meta.Warnings) > 0 }

// storeWarningLines say why the store may lose jobs, one line each under
// the header, for as long as the console runs: it is the server's
// configuration, not a passing failure. Not "⚠", which marks a failing
// load.
func (m *Model) storeWarningLines(w int) []string {
	out := make([]string, len(m.sess.meta.Warnings))
	for i, s := range m.sess.meta.Warnings {
		out[i] = m.theme.WarnText.Render(fit(clip("! store: "+termtext.Line(s), w), w))
	}
	return out
}

func (m *Model) bodyHeight() int { return max(m.height-m.chromeHeight(), 1) }

// listHeight is how many job rows fit (the table header takes a line).
func (m *Model) listHeight() int { return max(m.bodyHeight()-1, 1) }

// View draws the whole screen.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	if m.opts.Mouse {
		v.MouseMode = tea.MouseModeCellMotion
	}
	v.WindowTitle = "sluice"
	return v
}

// Render returns the screen as a string (what View draws), for tests and
// snapshots.
func (m *Model) Render() string { return m.render() }

func (m *Model) render() string {
	if m.sess.quitting {
		return ""
	}
	w, h := m.width, m.height
	if m.tooSmall() {
		return m.smallView(w, h)
	}
	lines := make([]string, 0, h)
	lines = append(lines, m.titleLine(w))
	if m.storeWarned() {
		lines = append(lines, m.storeWarningLines(w)...)
	}
	if m.screen == scrJobs {
		lines = append(lines, m.tabsLine(w))
	} else {
		lines = append(lines, m.screenTitle(w))
	}
	if m.dlg.input != nil {
		m.dlg.input.SetSize(w, 1)
		lines = append(lines, m.dlg.input.View(m.theme)...)
	} else if m.screen == scrJobs {
		lines = append(lines, m.filterLine(w))
	}
	if m.live.banner != "" {
		lines = append(lines, m.theme.Banner.Render(fit(clip("⚠ "+m.live.banner, w-2), w-2)))
	}
	bh := m.bodyHeight()
	body := m.body(w, bh)
	body = m.overlays(body, w, bh)
	lines = append(lines, body...)
	lines = append(lines, m.statusLine(w))
	return strings.Join(lines, "\n")
}

// openLayers name what waits behind the too-small notice: the editor or
// dialog open, and a bulk run the console holds (none: empty). Each is
// said, not only the first: a run hidden behind an open editor still
// goes on.
func (m *Model) openLayers() []string {
	var out []string
	switch {
	case m.edit.editor != nil:
		out = append(out, "An editor is open")
	case m.dlg.confirm != nil:
		out = append(out, "A confirmation is open")
	}
	if b := m.dlg.bulk; b != nil {
		switch {
		case b.phase == bulkRunning && b.op != nil:
			out = append(out, fmt.Sprintf("A bulk %s is running", b.action))
		case b.phase == bulkStarting && !b.visible:
			// Hidden with esc while its start is on its way: the status
			// line that says so is not drawn either.
			out = append(out, fmt.Sprintf("A bulk %s is starting", b.action))
		case b.visible:
			out = append(out, fmt.Sprintf("The bulk %s dialog is open", b.action))
		}
	}
	return out
}

func (m *Model) smallView(w, h int) string {
	msg := fmt.Sprintf("sluice: the terminal is too small (%d×%d); the console needs %d×%d. q quits.", w, h, minWidth, minHeight)
	switch open := m.openLayers(); len(open) {
	case 0:
	case 1:
		// What waits behind the notice, and that no key reaches it.
		msg += " " + open[0] + "; no key reaches it until the terminal is larger."
	default:
		msg += " " + strings.Join(open, "; ") + "; no key reaches them until the terminal is larger."
	}
	if w <= 0 || h <= 0 {
		return ""
	}
	return strings.Join(padLines(wrap(msg, w), h), "\n")
}

// screenBody is the list screen shown, drawn w×h.
func (m *Model) screenBody(w, h int) []string {
	c := m.listOf(m.screen)
	if c == nil {
		return padLines(nil, h)
	}
	c.SetSize(w, h)
	return c.View(m)
}

func (m *Model) body(w, h int) []string {
	if m.dlg.help.open {
		m.dlg.help.SetSize(w, h)
		return m.dlg.help.View(m.km, m.theme, m.sess.readOnly)
	}
	if m.screen != scrJobs {
		return m.screenBody(w, h)
	}
	if !m.sheet.open {
		m.jobs.SetSize(w, h)
		return m.jobs.View(m)
	}
	sw := m.sheetWidth()
	if sw >= w {
		m.sheet.SetSize(w, h)
		return m.sheet.View(m)
	}
	lw := w - sw
	m.jobs.SetSize(lw, h)
	left := m.jobs.View(m)
	m.sheet.SetSize(sw, h)
	right := m.sheet.View(m)
	out := make([]string, h)
	for i := range h {
		// The table's lines are exactly lw wide.
		out[i] = left[i] + right[i]
	}
	return out
}

// overlays draws the dialog, or the toasts, over the body: toasts wait
// while a dialog is open (syncToasts).
func (m *Model) overlays(body []string, w, h int) []string {
	// Only the layer that takes the keys is drawn over the body (top): a
	// dialog made visible by an answer while an editor or the input line
	// has the keys waits for them to close instead of covering them.
	switch top := m.top(); top {
	case layerEditor:
		ed := m.edit.editor
		box := ed.View(m.km, m.theme)
		body = overlay(body, box, max((w-ed.w)/2, 0), max((h-len(box))/2, 0), w)
	case layerConfirm, layerBulk:
		bw := min(max(w*2/3, 50), w-2, 100)
		var box []string
		if top == layerConfirm {
			m.dlg.confirm.SetSize(bw, h)
			box = m.dlg.confirm.View(m.km, m.theme)
		} else {
			m.dlg.bulk.SetSize(bw, h)
			box = m.dlg.bulk.View(m)
		}
		y := max((h-len(box))/2, 0)
		body = overlay(body, box, (w-bw)/2, y, w)
	}
	if !m.dialogOpen() {
		body = m.toasts.View(body, w, h, m.theme)
	}
	return body
}

type titleKey struct {
	w        int
	scr      screen
	meta     *engine.Meta
	readOnly bool
	live     bool
	down     bool
	denied   bool
	theme    *themes.Theme
}

// titleLine is the top line (cached).
func (m *Model) titleLine(w int) string {
	k := titleKey{w: w, scr: m.screen, meta: m.sess.meta, readOnly: m.sess.readOnly, live: m.live.sub != nil, down: m.unreachable(), denied: m.sess.denied, theme: m.theme}
	if m.cache.title.ok && m.cache.title.key == k {
		return m.cache.title.s
	}
	s := m.renderTitle(w)
	m.cache.title.key, m.cache.title.s, m.cache.title.ok = k, s, true
	return s
}

func (m *Model) renderTitle(w int) string {
	t := m.theme
	var b strings.Builder
	b.WriteString(t.Title.Render("sluice"))
	b.WriteString("  ")
	for i, name := range screenNames {
		// The schedules, limits and audit screens (:schedules, :limits,
		// :audit) are tabs only while shown: most programs declare no
		// schedule and set no limit, and the trail is looked up.
		if (screen(i) == scrSchedules || screen(i) == scrLimits || screen(i) == scrAudit) && m.screen != screen(i) {
			continue
		}
		if i > 0 {
			b.WriteString(t.Subtle.Render(" · "))
		}
		if screen(i) == m.screen {
			b.WriteString(t.TabActive.Render(name))
		} else {
			b.WriteString(t.Tab.Render(name))
		}
	}
	left := b.String()
	var info []string
	if m.sess.meta != nil {
		info = append(info, termtext.Line(m.sess.meta.Backend))
	}
	if m.opts.Source != "" {
		info = append(info, termtext.Line(m.opts.Source))
	}
	if m.sess.meta != nil {
		who := string(m.sess.meta.Role)
		if m.sess.meta.Actor != "" {
			who = termtext.Line(m.sess.meta.Actor) + " (" + who + ")"
		}
		info = append(info, who)
	}
	var badges string
	if m.sess.readOnly {
		badges += " " + t.Badge.Render("READ-ONLY")
	}
	if m.storeWarned() {
		badges += " " + t.WarnText.Render("! NOT DURABLE")
	}
	switch {
	case m.sess.denied:
		badges += " " + t.ErrorText.Render("✕ refused")
	case m.unreachable():
		// A load is failing: whatever the stream says, the data on
		// screen is not live.
		badges += " " + t.ErrorText.Render("○ unreachable")
	case m.live.sub != nil:
		badges += " " + t.OKText.Render("● live")
	}
	// The badges outrank the backend, source and caller: on a narrow
	// terminal the info text is cut first, so READ-ONLY stays in sight;
	// then the screen names give way to the current one, so the
	// connection's badge (live or unreachable) does too.
	if wOf(left)+1+wOf(badges) > w {
		left = t.Title.Render("sluice") + "  " + t.TabActive.Render(screenNames[m.screen])
	}
	text := strings.Join(info, " · ")
	if room := w - wOf(left) - 1 - wOf(badges); wOf(text) > room {
		text = clip(text, max(room, 0))
	}
	right := t.HeaderInfo.Render(text) + badges
	gap := w - wOf(left) - wOf(right)
	if gap < 1 {
		return clip(left+" "+right, w)
	}
	return left + strings.Repeat(" ", gap) + right
}

func (m *Model) screenTitle(w int) string {
	t := m.theme
	var s string
	switch m.screen {
	case scrQuarantine:
		s = "Quarantine — fingerprints whose jobs crashed their workers" + m.keyHint(keymap.Release, "release") + m.keyHint(keymap.Open, "jobs")
	case scrOperations:
		s = "Operations — bulk actions and their progress" + m.keyHint(keymap.Open, "watch") + m.keyHint(keymap.Cancel, "cancel")
	case scrQueues:
		s = "Queues — jobs per state" + m.keyHint(keymap.Pause, "pause/resume") + m.keyHint(keymap.Open, "jobs")
	case scrSchedules:
		s = "Schedules — periodic jobs" + m.keyHint(keymap.Pause, "pause/resume") + m.keyHint(keymap.RunNow, "run now") + m.keyHint(keymap.Open, "dead jobs")
	case scrAudit:
		s = "Audit — operator actions, newest first" + m.auditScope() + m.keyHint(keymap.Open, "open")
	case scrLimits:
		s = "Limits — running jobs across every process" + m.keyHint(keymap.SetLimit, "set") + m.keyHint(keymap.Open, "waiting jobs")
	case scrErrors:
		// One rule, said first: the jobs list's tab and filter scope
		// the groups, whatever the filter names.
		scope := m.groupScope()
		if scope == "" {
			scope = "all jobs"
		}
		s = "Error groups of " + scope + " — the jobs tab and filter scope them"
		if m.lists.groups.ignored {
			// keymap.ShowIgnored is in the help; the line has no room for
			// it, but says when it is on.
			s = "Error groups, the ignored too, of " + scope + " — the jobs tab and filter scope them"
		}
		if m.jobs.query != "" {
			s += " (:clear drops the filter)"
		}
		s += m.keyHint(keymap.Open, "jobs") + m.keyHint(keymap.Bulk, "bulk retry") + m.keyHint(keymap.ResolveGroup, "resolve") +
			m.keyHint(keymap.IgnoreGroup, "ignore")
	}
	return t.Bold.Render(clip(s, w))
}

func (m *Model) keyHint(a keymap.Action, what string) string {
	if !m.km.Enabled(a) {
		return ""
	}
	return " · " + m.km.B(a).Help().Key + " " + what
}

type filterKey struct {
	w          int
	query, err string
	theme      *themes.Theme
	km         *keymap.KeyMap
}

// filterLine shows the filter in force (cached).
func (m *Model) filterLine(w int) string {
	k := filterKey{w: w, query: m.jobs.query, err: m.jobs.queryErr, theme: m.theme, km: m.km}
	if m.cache.filter.ok && m.cache.filter.key == k {
		return m.cache.filter.s
	}
	s := m.renderFilterLine(w)
	m.cache.filter.key, m.cache.filter.s, m.cache.filter.ok = k, s, true
	return s
}

func (m *Model) renderFilterLine(w int) string {
	t := m.theme
	v := &m.jobs
	prompt := t.Filter.Render("/")
	switch {
	case v.queryErr != "":
		msg := strings.TrimPrefix(v.queryErr, engine.ErrInvalid.Error()+": ")
		return clip(prompt+" "+termtext.Line(v.query)+"  "+t.FilterError.Render("✗ "+termtext.Line(msg)), w)
	case v.query == "":
		return clip(prompt+" "+t.Subtle.Render("no filter — "+m.km.B(keymap.Filter).Help().Key+" filters with the query grammar"), w)
	}
	return clip(prompt+" "+t.Value.Render(termtext.Line(v.query)), w)
}

// statusLine is the bottom line: where the cursor is, marks, selection,
// running operations on the left; the short help on the right.
func (m *Model) statusLine(w int) string {
	t := m.theme
	var parts []string
	switch m.screen {
	case scrJobs:
		v := &m.jobs
		if len(v.rows) > 0 {
			parts = append(parts, m.position())
		}
		if note := m.newerNote(); note != "" {
			parts = append(parts, t.InfoText.Render(note))
		}
		if v.loading && v.loaded && v.loadMode != listRefresh && v.loadMode != listSegment {
			parts = append(parts, "loading…")
		}
		if len(v.marked) > 0 {
			parts = append(parts, t.RowMarked.Render(fmt.Sprintf("%s marked", commas(int64(len(v.marked))))))
		}
		if v.selectAll {
			parts = append(parts, t.WarnText.Render("ALL MATCHING SELECTED — actions run as a bulk operation"))
		}
		if note := v.scanNote(); note != "" {
			parts = append(parts, t.WarnText.Render(note))
		}
		if note := m.capNote(); note != "" {
			parts = append(parts, t.InfoText.Render(note))
		}
	default:
		if ls, n := m.current(); ls != nil && n > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d", ls.cursor+1, n))
		}
	}
	if m.edit.opening {
		parts = append(parts, t.InfoText.Render("opening the editor… esc gives it up"))
	}
	if b := m.dlg.bulk; b != nil && !b.visible && b.phase == bulkStarting {
		parts = append(parts, t.InfoText.Render(fmt.Sprintf("bulk %s starting…", b.action)))
	}
	if b := m.dlg.bulk; b != nil && !b.visible && b.op != nil {
		frac := 0.0
		if b.op.Matched > 0 {
			frac = float64(b.op.Processed) / float64(b.op.Matched)
		}
		parts = append(parts, t.InfoText.Render(fmt.Sprintf("bulk %s %.0f%%", b.action, frac*100)))
	}
	left := t.Status.Render(strings.Join(parts, " · "))
	right := m.shortHelp(w - wOf(left) - 2)
	if m.edit.editor != nil {
		right = editorHint(m.km, m.theme) // the list's keys go to the editor meanwhile
	}
	gap := w - wOf(left) - wOf(right)
	if gap < 1 {
		return clip(left, w)
	}
	return left + strings.Repeat(" ", gap) + right
}

// matchCount is how many jobs the list shows in all, when the counts can
// tell: the counters for a tab without a filter beyond one queue, the
// filter's own counts below their bound otherwise.
func (m *Model) matchCount() (int64, bool) {
	v := &m.jobs
	if m.tally.counts == nil || v.tab < 0 {
		return 0, false
	}
	s := engine.AllStates[v.tab]
	f := v.filter
	if !countsServe(f) {
		fc, _ := m.filterCounts()
		if e, ok := m.exactFor(s); ok && fc != nil && fc.IsCapped(s) {
			return e.n, true
		}
		if fc == nil || fc.IsCapped(s) {
			return 0, false
		}
		n, ok := fc.States[s]
		return n, ok
	}
	q := f.Queues
	if len(q) == 1 {
		return m.tally.counts.Queues[q[0]][s], true
	}
	return m.tally.counts.Total[s], true
}

// matchLowerBound is the tab's count when it is only a lower bound (a
// capped count under a filter the counters do not serve: "500+").
func (m *Model) matchLowerBound() (int64, bool) {
	v := &m.jobs
	if m.tally.counts == nil || v.tab < 0 || countsServe(v.filter) {
		return 0, false
	}
	s := engine.AllStates[v.tab]
	fc, _ := m.filterCounts()
	if fc == nil || !fc.IsCapped(s) {
		return 0, false
	}
	n, ok := fc.States[s]
	return n, ok
}

type helpKey struct {
	w     int
	scr   screen
	sheet bool
	steps bool
	links bool
	km    *keymap.KeyMap
	theme *themes.Theme
}

// screenHelp is the one-line help of each screen.
func (m *Model) screenHelp() []key.Binding {
	km := m.km
	switch m.screen {
	case scrQuarantine:
		return km.Short(keymap.Open, keymap.Release, keymap.Copy, keymap.Back, keymap.Help, keymap.Quit)
	case scrOperations:
		return km.Short(keymap.Open, keymap.Cancel, keymap.ResumeOperation, keymap.Copy, keymap.Back, keymap.Help, keymap.Quit)
	case scrQueues:
		return km.Short(keymap.Open, keymap.Pause, keymap.Back, keymap.Help, keymap.Quit)
	case scrSchedules:
		return km.Short(keymap.Open, keymap.Pause, keymap.RunNow, keymap.Back, keymap.Help, keymap.Quit)
	case scrLimits:
		return km.Short(keymap.Open, keymap.SetLimit, keymap.Back, keymap.Help, keymap.Quit)
	case scrAudit:
		return km.Short(keymap.Open, keymap.Copy, keymap.Back, keymap.Help, keymap.Quit)
	case scrErrors:
		return km.Short(keymap.Open, keymap.Bulk, keymap.Back, keymap.Help, keymap.Quit)
	}
	if m.sheet.open {
		// The sheet's own keys first: they are what the operator needs now.
		// With steps to replay from: the step keys and the replay key.
		// With links: the links key, which reaches them from anywhere.
		links := keymap.Action("")
		if m.sheet.followable() > 0 {
			links = keymap.Links
		}
		if m.sheet.nSteps > 0 && km.Enabled(keymap.ReplayStep) {
			return km.Short(keymap.Payload, links, keymap.NextSection, keymap.StepDown, keymap.ReplayStep, keymap.SheetDown,
				keymap.Retry, keymap.Edit, keymap.Release, keymap.Copy, keymap.Back, keymap.Help)
		}
		return km.Short(keymap.Payload, links, keymap.NextSection, keymap.SheetDown, keymap.Edit, keymap.Retry,
			keymap.Release, keymap.Copy, keymap.Back, keymap.Help)
	}
	return km.ShortHelp()
}

// shortHelp is as much of the one-line help as fits in w (cached).
func (m *Model) shortHelp(w int) string {
	k := helpKey{w: w, scr: m.screen, sheet: m.sheet.open && m.screen == scrJobs, steps: m.sheet.nSteps > 0, links: m.sheet.followable() > 0, km: m.km, theme: m.theme}
	if m.cache.help.ok && m.cache.help.key == k {
		return m.cache.help.s
	}
	t := m.theme
	var help []string
	for _, b := range m.screenHelp() {
		help = append(help, t.HelpKey.Render(b.Help().Key)+" "+t.HelpDesc.Render(b.Help().Desc))
	}
	right := ""
	for i := len(help); i > 0; i-- {
		right = strings.Join(help[:i], t.HelpSep.Render(" · "))
		if wOf(right) <= w {
			break
		}
		right = ""
	}
	m.cache.help.key, m.cache.help.s, m.cache.help.ok = k, right, true
	return right
}

// cached is one memoized line.
type cached[K comparable] struct {
	key K
	s   string
	ok  bool
}
