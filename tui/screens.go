package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// The other screens: Quarantine, Operations, Queues and Error groups.
// Their lists are short (at most a few hundred rows), rendered per frame
// for the visible rows only.

type listScreen struct {
	cursor, offset int
	loaded         bool
	err            error
}

func (ls *listScreen) clamp(n, h int) {
	ls.cursor = min(max(ls.cursor, 0), max(n-1, 0))
	if h <= 0 {
		return
	}
	if ls.cursor < ls.offset {
		ls.offset = ls.cursor
	}
	if ls.cursor >= ls.offset+h {
		ls.offset = ls.cursor - h + 1
	}
	ls.offset = max(min(ls.offset, max(n-h, 0)), 0)
}

type colSpec struct {
	title string
	w     int // 0: takes what is left
	right bool
}

type cell struct {
	s  string // sanitized
	st lipgloss.Style
}

func (m *Model) current() (*listScreen, int) {
	switch m.screen {
	case scrQuarantine:
		return &m.quar, len(m.quarData)
	case scrOperations:
		return &m.ops, len(m.opsData)
	case scrQueues:
		return &m.queues, len(m.queuesData)
	case scrErrors:
		return &m.groups, len(m.groupsData)
	}
	return nil, 0
}

// renderList draws a header and the visible rows of a list screen.
func (m *Model) renderList(ls *listScreen, cols []colSpec, n int, row func(i int) []cell, w, h int, empty string) []string {
	t := m.theme
	fixed := 0
	for _, c := range cols {
		if c.w > 0 {
			fixed += c.w + 1
		}
	}
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = c.w
		if c.w == 0 {
			widths[i] = max(w-fixed-2, 0)
		}
	}
	line := func(cells []cell, plain, cursor bool) string {
		var b strings.Builder
		if cursor {
			b.WriteString("› ")
		} else {
			b.WriteString("  ")
		}
		for i, c := range cols {
			if widths[i] == 0 {
				continue
			}
			s := ""
			if i < len(cells) {
				s = cells[i].s
			}
			if c.right {
				s = fitRight(s, widths[i])
			} else {
				s = fit(s, widths[i])
			}
			if !plain && i < len(cells) {
				s = cells[i].st.Render(s)
			}
			b.WriteString(s)
			if i < len(cols)-1 {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	head := make([]cell, len(cols))
	for i, c := range cols {
		head[i] = cell{s: c.title}
	}
	out := []string{t.TableHeader.Render(fit(line(head, true, false), w))}
	rows := h - 1
	ls.clamp(n, rows)
	switch {
	case ls.err != nil && n == 0:
		out = append(out, t.ErrorText.Render(clip("  "+termtext.Line(ls.err.Error()), w)))
	case !ls.loaded:
		out = append(out, t.Muted.Render("  loading…"))
	case n == 0:
		out = append(out, t.Muted.Render("  "+empty))
	}
	for i := ls.offset; i < min(ls.offset+rows, n) && ls.loaded; i++ {
		cells := row(i)
		if i == ls.cursor {
			out = append(out, t.RowCursor.Render(fit(line(cells, true, true), w)))
		} else {
			out = append(out, clip(line(cells, false, false), w))
		}
	}
	return padLines(out, h)
}

func (m *Model) screenBody(w, h int) []string {
	t := m.theme
	now := m.now()
	switch m.screen {
	case scrQuarantine:
		cols := []colSpec{{"FINGERPRINT", 16, false}, {"KIND", 20, false}, {"STATUS", 11, false}, {"CRASHES", 7, true},
			{"SINCE", 6, true}, {"HELD", 6, true}, {"LAST CRASH", 0, false}}
		return m.renderList(&m.quar, cols, len(m.quarData), func(i int) []cell {
			fp := m.quarData[i]
			st := t.WarnText
			if fp.Status != engine.FingerprintQuarantined {
				st = t.Muted
			}
			return []cell{
				{termtext.Line(fp.Fingerprint), t.Cell}, {termtext.Line(fp.Kind), t.Row}, {string(fp.Status), st},
				{fmt.Sprint(fp.Crashes), t.WarnText}, {age(now, fp.Since), t.Cell},
				{commas(int64(fp.Held)), t.Row}, {stepCrashText(fp) + termtext.Line(fp.LastError), t.ErrorText},
			}
		}, w, h, "no quarantined fingerprints")
	case scrOperations:
		cols := []colSpec{{"OPERATION", 15, false}, {"ACTION", 7, false}, {"STATUS", 9, false}, {"PROGRESS", 16, false},
			{"MATCHED", 9, true}, {"DONE", 9, true}, {"OK", 9, true}, {"FAILED", 7, true}, {"BY", 10, false}, {"AGE", 5, true}, {"SELECTOR", 0, false}}
		return m.renderList(&m.ops, cols, len(m.opsData), func(i int) []cell {
			op := m.opsData[i]
			frac := 0.0
			if op.Matched > 0 {
				frac = float64(op.Processed) / float64(op.Matched)
			}
			st := t.Muted
			switch op.Status {
			case engine.OperationRunning, engine.OperationPending:
				st = t.InfoText
			case engine.OperationCompleted:
				st = t.OKText
			case engine.OperationFailed:
				st = t.ErrorText
			}
			return []cell{
				{fitMiddle(termtext.Line(op.ID), 15), t.Cell}, {string(op.Action), t.Row}, {string(op.Status), st},
				{barText(frac, 11) + fmt.Sprintf(" %3.0f%%", min(frac, 1)*100), t.Accent},
				{commas(op.Matched), t.Row}, {commas(op.Processed), t.Row}, {commas(op.Succeeded), t.OKText},
				{commas(op.Failed), t.ErrorText}, {termtext.Line(op.CreatedBy), t.Cell}, {age(now, op.CreatedAt), t.Cell},
				{describeFilter(op.Selector), t.Muted},
			}
		}, w, h, "no bulk operations yet")
	case scrQueues:
		states := []engine.State{engine.StateAvailable, engine.StateRunning, engine.StateRetryable, engine.StateScheduled,
			engine.StateArchived, engine.StateQuarantined, engine.StateUndecodable, engine.StateCompleted, engine.StateCancelled}
		cols := []colSpec{{"QUEUE", 16, false}, {"STATUS", 8, false}}
		for _, s := range states {
			cols = append(cols, colSpec{strings.ToUpper(shortState[s]), 9, true})
		}
		cols = append(cols, colSpec{"", 0, false})
		row := func(i int) []cell {
			q := m.queuesData[i]
			status, st := "active", t.OKText
			if q.Paused {
				status, st = "paused", t.WarnText
			}
			cells := []cell{{termtext.Line(q.Name), t.Row}, {status, st}}
			for _, s := range states {
				n := q.Counts[s]
				cs := t.Subtle
				if n > 0 {
					cs = t.State(string(s))
				}
				cells = append(cells, cell{commas(n), cs})
			}
			return cells
		}
		n := len(m.queuesData)
		lines := m.renderList(&m.queues, cols, n, row, w, h, "no queues yet")
		if n == 0 || !m.queues.loaded {
			return lines
		}
		// The cursor's queue's retention, below the rows (no column is
		// wide enough for it beside the counts).
		q := m.queuesData[m.queues.cursor]
		var r map[engine.State]time.Duration
		if m.meta != nil && m.meta.Retention != nil {
			r = m.meta.Retention.Of(q.Name)
		}
		info := clip("  "+t.Muted.Render("retention of "+termtext.Line(q.Name)+": "+retentionSummary(r)), w)
		if pos := 2 + min(n, h-1); pos < h {
			lines[pos] = info
			return lines
		}
		return append(m.renderList(&m.queues, cols, n, row, w, max(h-2, 1), "no queues yet"), "", info)
	case scrErrors:
		// The error is what tells the groups apart: below 100 columns
		// FIRST goes and QUEUE and KIND narrow, so that it keeps a third
		// of the line or more (at 60 columns it was cut to "…").
		first := w >= 100
		qw, kw := 12, 22
		if !first {
			qw, kw = min(12, max(8, w/8)), min(22, max(12, w/5))
		}
		// NEAR counts the groups of one beside each (nearLine), where
		// there is room and the error text is not hidden.
		near := first && !m.groupsHidden
		cols := []colSpec{{"QUEUE", qw, false}, {"KIND", kw, false}, {"JOBS", 8, true}}
		if near {
			cols = append(cols, colSpec{"NEAR", 4, true})
		}
		cols = append(cols, colSpec{"LAST", 5, true})
		if first {
			cols = append(cols, colSpec{"FIRST", 5, true})
		}
		cols = append(cols, colSpec{"ERROR", 0, false})
		row := func(i int) []cell {
			g := m.groupsData[i]
			cs := []cell{
				{termtext.Line(g.Queue), t.Row}, {termtext.Line(g.Kind), t.Row}, {commas(g.Count), t.State("archived")},
			}
			if near {
				cs = append(cs, cell{m.nearCount(i), t.WarnText})
			}
			cs = append(cs, cell{age(now, g.LastSeen), t.Cell})
			if first {
				cs = append(cs, cell{age(now, g.FirstSeen), t.Cell})
			}
			return append(cs, cell{termtext.Line(g.Pattern), t.ErrorText})
		}
		const empty = "no dead jobs — nothing to explain"
		n := len(m.groupsData)
		s := ""
		if n > 0 && m.groups.loaded {
			s = m.nearLine()
		}
		if s == "" {
			return m.renderList(&m.groups, cols, n, row, w, h, empty)
		}
		// Below the rows, as a queue's retention is: in the first free
		// line, or in two lines taken from a list that fills the screen.
		info := clip("  "+t.WarnText.Render(s), w)
		if pos := 2 + min(n, h-1); pos < h {
			lines := m.renderList(&m.groups, cols, n, row, w, h, empty)
			lines[pos] = info
			return lines
		}
		return append(m.renderList(&m.groups, cols, n, row, w, max(h-2, 1), empty), "", info)
	}
	return padLines(nil, h)
}

func barText(frac float64, w int) string {
	full := int(min(max(frac, 0), 1)*float64(w) + 0.5)
	return strings.Repeat("█", full) + strings.Repeat("░", w-full)
}

// itemKey names the item at row i of a list screen: what the cursor
// stays on while the list changes under it ("" when there is none).
func (m *Model) itemKey(s screen, i int) string {
	if i < 0 {
		return ""
	}
	switch s {
	case scrQuarantine:
		if i < len(m.quarData) {
			return m.quarData[i].Fingerprint
		}
	case scrOperations:
		if i < len(m.opsData) {
			return m.opsData[i].ID
		}
	case scrQueues:
		if i < len(m.queuesData) {
			return m.queuesData[i].Name
		}
	case scrErrors:
		if i < len(m.groupsData) {
			g := m.groupsData[i]
			return groupKey(g)
		}
	}
	return ""
}

// setGroups keeps the error groups read, and what is worked out from
// them once rather than per frame: which groups of one job sit beside
// each group. When their error text was hidden from this session, nothing
// is: near groups are told apart by that text.
func (m *Model) setGroups(gs []engine.ErrorGroup) {
	m.groupsData, m.groupsNear, m.groupsHidden = gs, nil, false
	for _, g := range gs {
		if g.Pattern == engine.HiddenValue || g.Sample == engine.HiddenValue {
			m.groupsHidden = true
		}
	}
	if !m.groupsHidden {
		m.groupsNear = engine.NearSingletons(gs)
	}
}

// nearCount is how many groups of one sit beside group i ("" for none).
func (m *Model) nearCount(i int) string {
	if i < len(m.groupsNear) && len(m.groupsNear[i]) > 0 {
		return fmt.Sprint(len(m.groupsNear[i]))
	}
	return ""
}

// nearLine says, for the cursor's group, how many groups of one sit
// beside it and the first of them: most likely the same failure with an
// id the normaliser missed, which a retry of this group leaves dead.
// "" when there are none.
func (m *Model) nearLine() string {
	i := m.groups.cursor
	if i < 0 || i >= len(m.groupsNear) || len(m.groupsNear[i]) == 0 {
		return ""
	}
	near := m.groupsNear[i]
	first := termtext.Line(m.groupsData[near[0]].Pattern)
	if len(near) == 1 {
		return "1 near-identical group beside this one: " + first
	}
	return fmt.Sprintf("%d near-identical groups beside this one, the first: %s", len(near), first)
}

// groupKey tells error groups apart: queue, kind and pattern.
func groupKey(g engine.ErrorGroup) string { return g.Queue + "\x00" + g.Kind + "\x00" + g.Pattern }

// follow puts the cursor of screen s back on the item named key after
// its rows changed; an item gone leaves the cursor on the row it had.
func (m *Model) follow(s screen, ls *listScreen, key string) {
	if key == "" {
		return
	}
	for i := 0; ; i++ {
		k := m.itemKey(s, i)
		if k == "" {
			return
		}
		if k == key {
			ls.cursor = i
			return
		}
	}
}

// maxReloadPause bounds the pause a live reload of a screen takes after
// a slow load (reloadScreen).
const maxReloadPause = 5 * time.Second

func (m *Model) screenLoaded(msg tea.Msg) tea.Cmd {
	var seq uint64
	var err error
	var ls *listScreen
	var s screen
	switch msg := msg.(type) {
	case quarantineMsg:
		seq, err, ls, s = msg.seq, msg.err, &m.quar, scrQuarantine
	case operationsMsg:
		seq, err, ls, s = msg.seq, msg.err, &m.ops, scrOperations
	case queuesMsg:
		seq, err, ls, s = msg.seq, msg.err, &m.queues, scrQueues
	case groupsMsg:
		seq, err, ls, s = msg.seq, msg.err, &m.groups, scrErrors
	}
	if seq != m.screenSeq {
		return nil
	}
	m.screenBusy = false
	m.screenNotBefore = m.now().Add(min(m.now().Sub(m.screenSent), maxReloadPause))
	again := m.screenAgain && err == nil && m.screen == s
	m.screenAgain = false
	if err == nil {
		// The cursor stays on its item, not on its row number.
		key := m.itemKey(s, ls.cursor)
		switch msg := msg.(type) {
		case quarantineMsg:
			m.quarData = msg.fps
		case operationsMsg:
			m.opsData = msg.ops
		case queuesMsg:
			m.queuesData = msg.queues
		case groupsMsg:
			m.setGroups(msg.groups)
		}
		m.follow(s, ls, key)
	}
	ls.err = err
	if err != nil {
		if isInputErr(err) {
			ls.loaded = true
			return nil
		}
		return m.failed(retryScreen, screenNames[m.screen], err)
	}
	ok := m.succeeded(retryScreen)
	ls.loaded = true
	if again {
		// Changes came in while this load ran: one more, paced.
		ok = tea.Batch(ok, m.reloadScreen())
	}
	if m.screen == scrOperations {
		return tea.Batch(ok, m.opsTick())
	}
	return ok
}

// listKey handles the keys of the list screens.
func (m *Model) listKey(msg tea.KeyPressMsg) tea.Cmd {
	km := m.km
	ls, n := m.current()
	if ls == nil {
		return nil
	}
	h := max(m.bodyHeight()-1, 1)
	switch {
	case km.Matches(msg, keymap.Down):
		ls.cursor++
	case km.Matches(msg, keymap.Up):
		ls.cursor--
	case km.Matches(msg, keymap.PageDown):
		ls.cursor += h
	case km.Matches(msg, keymap.PageUp):
		ls.cursor -= h
	case km.Matches(msg, keymap.Top):
		ls.cursor = 0
	case km.Matches(msg, keymap.Bottom):
		ls.cursor = n - 1
	case km.Matches(msg, keymap.NextTab), km.Matches(msg, keymap.PrevTab):
		return m.switchScreen(scrJobs)
	case n == 0:
		return nil
	case km.Matches(msg, keymap.Open):
		return m.openListItem(ls.cursor)
	default:
		return m.listAction(msg, ls.cursor)
	}
	ls.clamp(n, h)
	return nil
}

// openListItem goes from a list row to the jobs it is about.
func (m *Model) openListItem(i int) tea.Cmd {
	v := &m.jobs
	if m.screen != scrOperations {
		m.pushNav()
		m.sheet.open = false
	}
	switch m.screen {
	case scrQuarantine:
		fp := m.quarData[i]
		v.setFilter("fingerprint:"+fp.Fingerprint, engine.Filter{Fingerprint: fp.Fingerprint, States: []engine.State{engine.StateQuarantined}})
		v.query = "fingerprint:" + fp.Fingerprint
	case scrQueues:
		q := m.queuesData[i].Name
		f := engine.Filter{Queues: []string{q}}
		v.setFilter(f.String(), f)
	case scrErrors:
		g := m.groupsData[i]
		f := g.Selector
		v.setFilter(f.String(), f)
		// The tab shows the state; the filter line the rest.
		q := v.filter
		v.query = q.String()
	case scrOperations:
		op := m.opsData[i]
		if !opDone(op.Status) {
			return m.watchOperation(op)
		}
		return m.toast(fmt.Sprintf("operation %s %s: %s matched, %s ok, %s failed", termtext.Line(op.ID), op.Status,
			commas(op.Matched), commas(op.Succeeded), commas(op.Failed)))
	}
	return tea.Batch(m.switchScreen(scrJobs), m.loadCounts())
}

// listAction runs the screen's actions on a row.
func (m *Model) listAction(msg tea.KeyPressMsg, i int) tea.Cmd {
	km := m.km
	switch m.screen {
	case scrQuarantine:
		fp := m.quarData[i]
		switch {
		case km.Matches(msg, keymap.Release):
			if fp.Status != engine.FingerprintQuarantined {
				return m.toastErr("fingerprint is on probation, not quarantined: nothing to release")
			}
			fpv := fp.Fingerprint
			m.dialog = &confirmDialog{
				title: fmt.Sprintf("Release 1 fingerprint, %s?", plural(int64(fp.Held), "held job", "held jobs")),
				count: int64(fp.Held),
				lines: []string{
					m.theme.Muted.Render("kind " + termtext.Line(fp.Kind) + " · " + fmt.Sprint(fp.Crashes) + " crashes"),
					m.theme.Muted.Render("its held jobs return to available; the next crash quarantines it again"),
				},
				yes: func() tea.Cmd { return m.releaseFingerprint(fpv) },
			}
		case km.Matches(msg, keymap.Copy):
			return tea.Batch(tea.SetClipboard(fp.Fingerprint), m.toast("copied fingerprint"))
		}
	case scrOperations:
		op := m.opsData[i]
		switch {
		case km.Matches(msg, keymap.Cancel):
			if opDone(op.Status) {
				return m.toastErr("operation already " + string(op.Status))
			}
			id := op.ID
			m.dialog = &confirmDialog{
				title: fmt.Sprintf("Cancel operation %s (%s of %s processed)?", termtext.Line(op.ID), commas(op.Processed), commas(op.Matched)),
				yes:   func() tea.Cmd { return m.cancelOperation(id) },
			}
		case km.Matches(msg, keymap.Copy):
			return tea.Batch(tea.SetClipboard(op.ID), m.toast("copied "+termtext.Line(op.ID)))
		}
	case scrQueues:
		q := m.queuesData[i]
		if km.Matches(msg, keymap.Pause) {
			verb := "Pause"
			if q.Paused {
				verb = "Resume"
			}
			name, pause := q.Name, !q.Paused
			what := "workers stop claiming from a paused queue; nothing else changes"
			if q.Paused {
				what = "workers claim from the queue again; its waiting jobs run"
			}
			m.dialog = &confirmDialog{
				title: fmt.Sprintf("%s queue %s?", verb, termtext.Line(q.Name)),
				lines: []string{m.theme.Muted.Render(what)},
				yes:   func() tea.Cmd { return m.pauseQueue(name, pause) },
			}
		}
	case scrErrors:
		g := m.groupsData[i]
		if km.Matches(msg, keymap.Bulk) || km.Matches(msg, keymap.Retry) {
			return m.startBulk(engine.ActionRetry, g.Selector,
				fmt.Sprintf("error group %s / %s — %s", termtext.Line(g.Queue), termtext.Line(g.Kind), termtext.Line(g.Pattern)))
		}
	}
	return nil
}

func (m *Model) released(msg releaseMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("release: " + termtext.Line(msg.err.Error()))
	}
	return tea.Batch(
		m.toast(fmt.Sprintf("released 1 fingerprint: %s back to available", plural(int64(msg.released), "job", "jobs"))),
		m.loadScreen(scrQuarantine), m.loadCounts())
}
