package tui

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
)

func isErr(err, target error) bool { return errors.Is(err, target) }

// jobCols is the table's column widths at one list width; 0 hides a
// column.
type jobCols struct {
	id, queue, kind, att, crash, age, err int
	width                                 int
}

// maxIDCol is the widest the id column grows; a longer id keeps its end.
const maxIDCol = 48

// layoutJobCols fits the columns into w cells: the error column takes
// what is left, and columns are dropped when space runs out (crashes,
// kind, queue, age, attempt). The id is the operator's handle: it stays
// whole while anything else can give way, and when even that is not
// enough it keeps its end, where ids differ.
func layoutJobCols(w int, fitTo contentWidths) jobCols {
	c := jobCols{width: w, id: 36, queue: 10, kind: 20, att: 7, crash: 7, age: 5}
	if fitTo.id > 0 {
		c.id = min(max(fitTo.id, 8), maxIDCol)
		c.queue = min(max(fitTo.queue, 5), 16)
		c.kind = min(max(fitTo.kind, 4), 28)
	}
	fixed := func() int {
		n := 2 // mark
		for _, x := range []int{c.id, c.queue, c.kind, c.att, c.crash, c.age} {
			if x > 0 {
				n += x + 1
			}
		}
		return n
	}
	for _, step := range []func() bool{
		func() bool { return c.kind > 16 && shrink(&c.kind, 16) },
		func() bool { return c.queue > 8 && shrink(&c.queue, 8) },
	} {
		if w-fixed() >= 24 {
			break
		}
		step()
	}
	for _, drop := range []*int{&c.crash, &c.kind, &c.queue, &c.age, &c.att} {
		if w-fixed() >= 10 {
			break
		}
		*drop = 0
	}
	if over := fixed() - w; over > 0 {
		c.id = max(c.id-over, 4)
	}
	c.err = max(w-fixed(), 0)
	return c
}

func shrink(x *int, to int) bool { *x = to; return true }

// header is the table's header line.
func (c jobCols) header(t *themes.Theme) string {
	var b strings.Builder
	b.WriteString("  ")
	cell := func(w int, s string, right bool) {
		if w == 0 {
			return
		}
		if right {
			b.WriteString(fitRight(s, w))
		} else {
			b.WriteString(fit(s, w))
		}
		b.WriteByte(' ')
	}
	cell(c.id, "ID", false)
	cell(c.queue, "QUEUE", false)
	cell(c.kind, "KIND", false)
	cell(c.att, "ATTEMPT", true)
	cell(c.crash, "CRASHES", true)
	cell(c.age, "AGE", true)
	if c.err > 0 {
		b.WriteString(fit("LAST ERROR", c.err))
	}
	return t.TableHeader.Render(fit(b.String(), c.width))
}

// plain renders the row's cells without colour, padded to the width.
func (r *jobRow) plain(c jobCols, marked bool, ageText string) string {
	var b strings.Builder
	b.Grow(c.width + 8)
	// The cursor row is drawn with a marker too, so it shows without
	// colour (NO_COLOR, screen readers, golden files).
	if marked {
		b.WriteString("›●")
	} else {
		b.WriteString("› ")
	}
	if c.id > 0 {
		b.WriteString(fitEnd(r.id, c.id))
		b.WriteByte(' ')
	}
	for _, cell := range []struct {
		w     int
		s     string
		right bool
	}{{c.queue, r.queue, false}, {c.kind, r.kind, false}, {c.att, r.att, true}, {c.crash, r.crash, true}, {c.age, ageText, true}} {
		if cell.w == 0 {
			continue
		}
		if cell.right {
			b.WriteString(fitRight(cell.s, cell.w))
		} else {
			b.WriteString(fit(cell.s, cell.w))
		}
		b.WriteByte(' ')
	}
	if c.err > 0 {
		b.WriteString(fit(r.errText(), c.err))
	}
	return b.String()
}

// styled renders the row in colour: ids and ages muted, the state's
// colour on the attempt, the last error in the error colour.
func (r *jobRow) styled(c jobCols, marked bool, ageText string, t *themes.Theme) string {
	var b strings.Builder
	b.Grow(c.width * 2)
	if marked {
		b.WriteString(t.RowMarked.Render("●"))
		b.WriteByte(' ')
	} else {
		b.WriteString("  ")
	}
	if c.id > 0 {
		b.WriteString(t.Cell.Render(fitEnd(r.id, c.id)))
		b.WriteByte(' ')
	}
	if c.queue > 0 {
		b.WriteString(t.Row.Render(fit(r.queue, c.queue)))
		b.WriteByte(' ')
	}
	if c.kind > 0 {
		b.WriteString(t.Row.Render(fit(r.kind, c.kind)))
		b.WriteByte(' ')
	}
	if c.att > 0 {
		b.WriteString(t.State(string(r.job.State)).Render(fitRight(r.att, c.att)))
		b.WriteByte(' ')
	}
	if c.crash > 0 {
		st := t.Cell
		if r.job.CrashAttempt > 0 {
			st = t.WarnText
		}
		b.WriteString(st.Render(fitRight(r.crash, c.crash)))
		b.WriteByte(' ')
	}
	if c.age > 0 {
		b.WriteString(t.Cell.Render(fitRight(ageText, c.age)))
		b.WriteByte(' ')
	}
	if c.err > 0 {
		st := t.CellError
		if r.note == "" && r.waitText != "" {
			st = t.CellWait
		}
		b.WriteString(st.Render(fit(r.errText(), c.err)))
	}
	return b.String()
}

// errText is the row's last column: why the last action failed on it,
// else what it waits for (a waiting job's errors are behind it), else
// its last error.
func (r *jobRow) errText() string {
	if r.note != "" {
		return r.note
	}
	if r.waitText != "" {
		return r.waitText
	}
	return r.errMsg
}

// rowLine returns the cached rendering of row i, rendering it when the
// data, the mark, the width, the theme or the age tick changed.
func (m *Model) rowLine(i int, c jobCols, cursor bool) string {
	v := &m.jobs
	r := v.rows[i]
	_, marked := v.marked[r.job.ID]
	r.note = v.failNote[r.job.ID]         // a change of note bumps rowGen
	r.waitText = waitCell(r.job, m.now()) // the age tick bumps rowGen too
	if r.waitText == "" {
		r.waitText = holdCell(r.job)
	}
	if cursor {
		if r.cgen != m.cache.rowGen || r.clineMark != marked {
			r.cline = m.wrapCursor(r.plain(c, marked, age(m.now(), r.job.StateChangedAt)))
			r.cgen, r.clineMark = m.cache.rowGen, marked
		}
		return r.cline
	}
	if r.gen != m.cache.rowGen || r.lineMarked != marked {
		r.line = r.styled(c, marked, age(m.now(), r.job.StateChangedAt), m.theme)
		r.gen, r.lineMarked = m.cache.rowGen, marked
	}
	return r.line
}

// View renders the table into the lines of its size (SetSize).
func (v *jobsView) View(m *Model) []string {
	w, h := v.w, v.h
	c := m.cols(w)
	lines := make([]string, 0, h)
	if !m.cache.head.ok || m.cache.head.key != m.cache.rowGen {
		m.cache.head.key, m.cache.head.s, m.cache.head.ok = m.cache.rowGen, c.header(m.theme), true
	}
	lines = append(lines, m.cache.head.s)
	rows := h - 1
	switch {
	case v.err != nil && len(v.rows) == 0:
		lines = append(lines, m.theme.ErrorText.Render(fit("  "+termtext.Line(v.err.Error()), w)))
	case !v.loaded:
		lines = append(lines, m.theme.Muted.Render(fit("  loading…", w)))
	case len(v.rows) == 0:
		msg := "no jobs"
		if s := v.state(); s != "" {
			msg = "no " + string(s) + " jobs"
		}
		if v.query != "" {
			msg += " match the filter"
		}
		lines = append(lines, m.theme.Muted.Render(fit("  "+msg, w)))
	default:
		end := min(v.offset+rows, len(v.rows))
		for i := v.offset; i < end; i++ {
			lines = append(lines, m.rowLine(i, c, i == v.cursor))
		}
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", w))
	}
	return lines[:h]
}

// wrapCursor styles a plain line as the cursor row. The style's escape
// sequences are taken once per theme, so a cursor move costs a string
// concatenation, not a lipgloss render.
func (m *Model) wrapCursor(plain string) string {
	if m.cache.cursorSGR.theme != m.theme {
		out := m.theme.RowCursor.Render("\x00")
		pre, post, ok := strings.Cut(out, "\x00")
		if !ok {
			pre, post = "", ""
		}
		m.cache.cursorSGR.theme, m.cache.cursorSGR.pre, m.cache.cursorSGR.post = m.theme, pre, post
	}
	return m.cache.cursorSGR.pre + plain + m.cache.cursorSGR.post
}

// contentWidths is the widest id, queue and kind among the loaded rows:
// columns are as wide as their content needs, the error takes the rest.
type contentWidths struct{ id, queue, kind int }

func (v *jobsView) measure() {
	var cw contentWidths
	for _, r := range v.rows {
		cw.id = max(cw.id, wOf(r.id))
		cw.queue = max(cw.queue, wOf(r.queue))
		cw.kind = max(cw.kind, wOf(r.kind))
	}
	v.widths = cw
}

// cols caches the column layout per width and content; a new layout
// renders the rows again.
func (m *Model) cols(w int) jobCols {
	key := colsKey{w: w, cw: m.jobs.widths}
	if m.cache.colsKey != key {
		m.cache.colsKey = key
		m.cache.cols = layoutJobCols(w, key.cw)
		m.cache.rowGen++
	}
	return m.cache.cols
}

type colsKey struct {
	w  int
	cw contentWidths
}

// tabsKey is what the tabs line depends on; it is redrawn when it changes.
type tabsKey struct {
	w       int
	tab     int
	scr     screen
	counts  *engine.Counts
	fcounts *engine.JobCounts
	theme   *themes.Theme
	queue   string
	totals  bool
	exact   exactCount
	// expiring is tally.expiringSeq: the expiring counts drawn, and
	// unfiltered whether they are (a filter's tabs leave them out).
	expiring   uint64
	unfiltered bool
}

// exactCount is one state's count under a filter, taken whole at a time
// by a dry run or by the idle recount (recount.go) (zero: none). basis is
// what the tabs knew of that state then: once it changes, the count has
// changed and the tab is capped again until the next whole count.
type exactCount struct {
	filter string
	state  engine.State
	n      int64
	at     time.Time
	basis  countBasis
	// idle: the idle recount took it, not a dry run.
	idle bool
}

// countBasis is what the console knows of a state's count under the
// filter without counting it whole: the state's counter (of the filter's
// one queue, or of all) and the capped count with how far its scan got.
// Any change of these means jobs entered or left the state.
type countBasis struct {
	total           int64
	capped          int64
	scanned, scanOf int64
}

// countBasis is the basis of state s now.
func (m *Model) countBasis(s engine.State) countBasis {
	var b countBasis
	if c := m.tally.counts; c != nil {
		b.total = c.Total[s]
		if qs := m.jobs.filter.Queues; len(qs) == 1 {
			b.total = c.Queues[qs[0]][s]
		}
	}
	if fc, _ := m.filterCounts(); fc != nil {
		b.capped = fc.States[s]
		if sc := fc.Scans[s]; sc != nil {
			b.scanned, b.scanOf = sc.Scanned, sc.Total
		}
	}
	return b
}

// exactFor returns the whole count of state s under the current filter,
// when one was taken and nothing has changed since.
func (m *Model) exactFor(s engine.State) (exactCount, bool) {
	e := m.tally.exact
	if e.at.IsZero() || e.state != s || e.filter != m.jobs.filter.String() || e.basis != m.countBasis(s) {
		return exactCount{}, false
	}
	return e, true
}

// takeExact keeps the count of a dry run over the current filter and one
// state: the tab shows it where the filter's counts were capped.
func (m *Model) takeExact(sel engine.Filter, res *engine.BulkResult, at time.Time) {
	if res == nil || res.Estimated || len(sel.States) != 1 {
		return
	}
	f := sel
	f.States = nil
	if f.String() != m.jobs.filter.String() {
		return
	}
	s := sel.States[0]
	m.tally.exact = exactCount{filter: f.String(), state: s, n: res.Matched, at: at, basis: m.countBasis(s)}
}

// capNote says, for the tab's state, what capped its count and, once a
// dry run or the idle recount has it, the whole figure ("" when the
// count is not capped).
func (m *Model) capNote() string {
	v := &m.jobs
	if v.tab < 0 {
		return ""
	}
	s := engine.AllStates[v.tab]
	fc, _ := m.filterCounts()
	if fc == nil || !fc.IsCapped(s) {
		return ""
	}
	if e, ok := m.exactFor(s); ok {
		if e.idle {
			return fmt.Sprintf("%s %s as counted whole at %s, while idle", s, commas(e.n), e.at.Format("15:04:05"))
		}
		return fmt.Sprintf("%s %s as the dry run counted at %s", s, commas(e.n), e.at.Format("15:04:05"))
	}
	bulk := ""
	if k := m.km.B(keymap.Bulk).Help().Key; m.km.Enabled(keymap.Bulk) && k != "" {
		bulk = "; " + k + " counts them all"
	}
	if sc := fc.Scans[s]; sc != nil {
		of := ""
		if sc.Total >= 0 {
			of = " of " + commas(sc.Total)
		}
		return fmt.Sprintf("%s %s+: the store's scan budget stopped the count (%s%s jobs scanned)%s%s", s, commas(fc.States[s]), commas(sc.Scanned), of, bulk, m.recountNote())
	}
	return fmt.Sprintf("%s %s+: counted to the bound of %s%s%s", s, commas(fc.States[s]), commas(fc.Max), bulk, m.recountNote())
}

// tabsLine renders the state tabs with live counts (cached).
func (m *Model) tabsLine(w int) string {
	fc, totals := m.filterCounts()
	k := tabsKey{w: w, tab: m.jobs.tab, scr: m.screen, counts: m.tally.counts, fcounts: fc, theme: m.theme, totals: totals, exact: m.tally.exact,
		expiring: m.tally.expiringSeq, unfiltered: m.jobs.filter.IsEmpty()}
	if qs := m.jobs.filter.Queues; len(qs) == 1 {
		k.queue = qs[0]
	}
	if m.cache.tabs.ok && m.cache.tabs.key == k {
		return m.cache.tabs.s
	}
	s := m.renderTabs(w)
	m.cache.tabs.key, m.cache.tabs.s, m.cache.tabs.ok = k, s, true
	return s
}

func (m *Model) renderTabs(w int) string {
	t := m.theme
	var total map[engine.State]int64
	known := m.tally.counts != nil
	if known {
		total = m.tally.counts.Total
		if qs := m.jobs.filter.Queues; len(qs) == 1 {
			total = m.tally.counts.Queues[qs[0]]
		}
	}
	fc, totals := m.filterCounts()
	if !countsServe(m.jobs.filter) && !totals {
		// The filter's own counts: what the list shows under it, state
		// by state; "…" until they come for this filter.
		known = fc != nil
		if known {
			total = fc.States
		}
	}
	// shortNote writes the expiring note short beside long names.
	shortNote := false
	// render writes the tabs, short names or long, leaving out the states
	// in hide and, with note, saying how many it left out.
	render := func(short bool, hide map[engine.State]bool, note bool) string {
		var b strings.Builder
		empty := 0
		for i, s := range engine.AllStates {
			selected := m.screen == scrJobs && i == m.jobs.tab
			if hide[s] {
				empty++
				continue
			}
			name := string(s)
			if short {
				name = shortState[s]
			}
			n := "…"
			if known {
				n = commas(total[s])
				if fc != nil && fc.IsCapped(s) {
					if e, ok := m.exactFor(s); ok {
						n = commas(e.n) // a dry run counted them all
					} else {
						n += "+" // at least that many: the status line says why
					}
				}
			}
			label := name + " " + n
			if x := m.tally.expiring[s]; x > 0 && m.jobs.filter.IsEmpty() {
				// Retention deletes these within the warning window:
				// expires<… lists them. Of every job: beside a filter's
				// counts it would read as the filter's.
				if short || shortNote {
					label += fmt.Sprintf(" (%s exp)", commas(x))
				} else {
					label += fmt.Sprintf(" (%s expiring)", commas(x))
				}
			}
			if b.Len() > 0 {
				b.WriteString("  ")
			}
			st := t.Tab
			if total[s] > 0 {
				st = t.State(string(s))
			}
			if selected {
				st = t.State(string(s)).Bold(true).Underline(true)
				if t.Palette.Mono {
					st = t.TabActive
				}
				label = "▸" + label
			}
			b.WriteString(st.Render(label))
		}
		if empty > 0 && note {
			b.WriteString(t.Muted.Render(fmt.Sprintf("  %d empty", empty)))
		}
		return b.String()
	}
	// fitting leaves out empty states, the rightmost first (never the
	// selected one), until the tabs fit in w: at 60 columns the short
	// names still ran past the edge, and a quarantined tab turned yellow
	// out of sight.
	fitting := func(w int) string {
		hide := map[engine.State]bool{}
		line := render(true, hide, true)
		for i := len(engine.AllStates) - 1; i >= 0 && wOf(line) > w && known; i-- {
			s := engine.AllStates[i]
			if total[s] == 0 && !(m.screen == scrJobs && i == m.jobs.tab) {
				hide[s] = true
				line = render(true, hide, true)
			}
		}
		if wOf(line) > w && len(hide) > 0 {
			// The states with jobs before the note about those without.
			line = render(true, hide, false)
		}
		return line
	}
	line := render(false, nil, false)
	if wOf(line) > w {
		shortNote = true
		line = render(false, nil, false)
	}
	if wOf(line) > w {
		line = fitting(w)
	}
	if m.screen == scrJobs && totals {
		// The backend cannot count this filter: the tabs are the
		// counters' totals, and say so rather than pass for the
		// filter's counts.
		for _, note := range []string{"  totals, not the filter's", "  totals"} {
			if wOf(line)+wOf(note) <= w {
				return line + t.Muted.Render(note)
			}
		}
		short := fitting(w - wOf("  totals"))
		if wOf(short)+wOf("  totals") <= w {
			return short + t.Muted.Render("  totals")
		}
	}
	return clip(line, w)
}

// countsServe reports whether the maintained counters count what the
// filter matches: they know states and queues (one at a time), nothing
// else.
func countsServe(f engine.Filter) bool {
	g := f
	g.States, g.Queues = nil, nil
	return len(f.Queues) <= 1 && g.IsEmpty() && !f.IncludeSuperseded
}

// filterCounts returns the filter's own counts when they are for the
// current filter (nil while they are on their way or when the counters
// answer it), and whether the tabs are totals instead: the backend
// cannot count the filter.
func (m *Model) filterCounts() (*engine.JobCounts, bool) {
	f := m.jobs.filter
	if countsServe(f) {
		return nil, false
	}
	if m.tally.fcountsFor != f.String() {
		return nil, false
	}
	return m.tally.fcounts, m.tally.fcountsOff
}

var shortState = map[engine.State]string{
	engine.StateScheduled:   "sched",
	engine.StateAvailable:   "avail",
	engine.StateRunning:     "run",
	engine.StateRetryable:   "retry",
	engine.StateCompleted:   "done",
	engine.StateArchived:    "arch",
	engine.StateQuarantined: "quar",
	engine.StateUndecodable: "undec",
	engine.StateCancelled:   "canc",
}
