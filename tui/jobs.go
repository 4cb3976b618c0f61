package tui

import (
	"slices"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// jobsView is the Jobs screen: state tabs, the filter and the table. Rows
// are rendered once per data change (and per width, theme or age tick)
// and cached on the row, so a cursor move re-renders two rows at most.
type jobsView struct {
	tab    int // index in engine.AllStates; -1 when the filter names states
	query  string
	filter engine.Filter
	// queryErr is the inline error of the query being typed.
	queryErr string

	rows   []*jobRow
	index  map[string]int
	cursor int
	offset int
	next   string // older rows past the window
	prev   string // newer rows before the window
	base   int    // absolute position of rows[0]

	loading  bool
	loadMode listMode
	loaded   bool
	listSeq  uint64
	err      error

	widths contentWidths
	// shown is the filter the rows were loaded for.
	shown string

	marked    map[string]*engine.Job
	markOrder []string
	// selectAll turns the filter into a bulk selector: actions go to
	// every matching job through Bulk.
	selectAll bool
}

// jobRow is one job and its cached rendering.
type jobRow struct {
	job *engine.Job
	// Sanitized cell text.
	id, queue, kind, att, crash, errMsg string

	gen        uint64
	line       string
	lineMarked bool
	cgen       uint64
	cline      string
	clineMark  bool
}

func newRow(j *engine.Job) *jobRow {
	r := &jobRow{
		job:   j,
		id:    Sanitize(j.ID),
		queue: Sanitize(j.Queue),
		kind:  Sanitize(j.Kind),
		att:   strconv.Itoa(j.Attempt) + "/" + strconv.Itoa(j.MaxAttempts),
		crash: strconv.Itoa(j.CrashAttempt),
	}
	if n := len(j.Errors); n > 0 {
		r.errMsg = Sanitize(j.Errors[n-1].Message)
	}
	return r
}

func (v *jobsView) init(opts Options) {
	v.tab = slices.Index(engine.AllStates, engine.StateArchived)
	if opts.State != "" {
		if i := slices.Index(engine.AllStates, opts.State); i >= 0 {
			v.tab = i
		}
	}
	v.marked = map[string]*engine.Job{}
	v.index = map[string]int{}
	if opts.Query != "" {
		if f, err := engine.ParseQuery(opts.Query); err == nil {
			v.setFilter(opts.Query, f)
		} else {
			v.queryErr = err.Error()
		}
	}
}

// setFilter applies a parsed query. A query naming one state moves the
// tabs there; one naming several takes the tabs out of play.
func (v *jobsView) setFilter(q string, f engine.Filter) {
	v.query = strings.TrimSpace(q)
	v.queryErr = ""
	switch len(f.States) {
	case 0:
		if v.tab < 0 {
			v.tab = slices.Index(engine.AllStates, engine.StateArchived)
		}
	case 1:
		v.tab = slices.Index(engine.AllStates, f.States[0])
		f.States = nil
	default:
		v.tab = -1
	}
	v.filter = f
	v.selectAll = false
}

// state is the tab's state ("" when the filter names several).
func (v *jobsView) state() engine.State {
	if v.tab < 0 {
		return ""
	}
	return engine.AllStates[v.tab]
}

// effectiveFilter is the filter with the tab's state.
func (v *jobsView) effectiveFilter() engine.Filter {
	f := v.filter
	if len(f.States) == 0 && v.tab >= 0 {
		f.States = []engine.State{engine.AllStates[v.tab]}
	} else {
		f.States = slices.Clone(f.States)
	}
	return f
}

// filterText is the effective filter in the q grammar, for the screen.
func (v *jobsView) filterText() string { return v.effectiveFilter().String() }

func (v *jobsView) current() *jobRow {
	if v.cursor < 0 || v.cursor >= len(v.rows) {
		return nil
	}
	return v.rows[v.cursor]
}

// reload starts the list over (new tab, filter, or screen entry). Rows
// of another filter are taken off at once: an action must never land on
// a row the new filter does not match.
func (v *jobsView) reload(m *Model) tea.Cmd {
	if f := v.effectiveFilter().String(); f != v.shown {
		v.rows = v.rows[:0]
		clear(v.index)
		v.cursor, v.offset, v.base = 0, 0, 0
		v.next, v.prev = "", ""
		v.loaded = false
		v.selectAll = false
	}
	return m.loadList(listReplace, "", 0)
}

// refresh reloads the rows from the top down to a little past the screen
// and keeps the cursor on its job (live updates).
func (v *jobsView) refresh(m *Model) tea.Cmd {
	if v.loading && !v.loaded {
		return nil
	}
	if v.base > 0 {
		// Scrolled deep: reloading from the top would move the window;
		// refresh only what the counts show.
		return nil
	}
	want := max(v.offset+m.listHeight()+m.opts.PageSize/2, m.opts.PageSize)
	want = min(want, max(len(v.rows), m.opts.PageSize))
	return m.loadList(listRefresh, "", want)
}

// loaded takes a page of rows.
func (v *jobsView) take(m *Model, msg listMsg) tea.Cmd {
	if msg.seq != v.listSeq {
		return nil
	}
	v.loading = false
	if msg.err != nil {
		v.err = msg.err
		if isInputErr(msg.err) {
			// A filter the backend cannot serve or a bad one: say so
			// inline, do not retry.
			v.loaded = true
			return nil
		}
		return m.failed(retryList, "job list", msg.err)
	}
	m.succeeded(retryList)
	v.err = nil
	v.loaded = true
	switch msg.mode {
	case listReplace:
		v.shown = msg.filter.String()
		v.setRows(msg.jobs)
		v.cursor, v.offset, v.base = 0, 0, 0
		v.next, v.prev = msg.next, ""
	case listAppend:
		v.appendRows(msg.jobs, m.opts.Window, m.opts.PageSize)
		v.next = msg.next
	case listPrepend:
		v.prependRows(msg.jobs, msg.prev, m.opts.Window, m.opts.PageSize)
	case listRefresh:
		v.refreshRows(msg.jobs, msg.next, m.listHeight())
	}
	v.measure()
	v.keepCursorVisible(m.listHeight())
	return tea.Batch(m.sheetFollow(), m.maybeLoadMore())
}

func (v *jobsView) setRows(jobs []*engine.Job) {
	v.rows = v.rows[:0]
	clear(v.index)
	for _, j := range jobs {
		v.index[j.ID] = len(v.rows)
		v.rows = append(v.rows, newRow(j))
	}
}

func (v *jobsView) reindex() {
	clear(v.index)
	for i, r := range v.rows {
		v.index[r.job.ID] = i
	}
}

// appendRows adds older rows; past the window the newest are dropped and
// remembered by a cursor.
func (v *jobsView) appendRows(jobs []*engine.Job, window, page int) {
	for _, j := range jobs {
		if _, dup := v.index[j.ID]; dup {
			continue
		}
		v.index[j.ID] = len(v.rows)
		v.rows = append(v.rows, newRow(j))
	}
	if len(v.rows) > window {
		drop := len(v.rows) - window + page
		first := v.rows[drop]
		v.prev = engine.Cursor{At: first.job.StateChangedAt, ID: first.job.ID, Dir: engine.CursorPrev}.Encode()
		v.rows = append(v.rows[:0:0], v.rows[drop:]...)
		v.base += drop
		v.cursor = max(v.cursor-drop, 0)
		v.offset = max(v.offset-drop, 0)
		v.reindex()
	}
}

// prependRows adds newer rows before the window; past the window the
// oldest are dropped.
func (v *jobsView) prependRows(jobs []*engine.Job, prev string, window, page int) {
	fresh := make([]*jobRow, 0, len(jobs)+len(v.rows))
	for _, j := range jobs {
		if _, dup := v.index[j.ID]; !dup {
			fresh = append(fresh, newRow(j))
		}
	}
	n := len(fresh)
	v.rows = append(fresh, v.rows...)
	v.cursor += n
	v.offset += n
	v.base = max(v.base-n, 0)
	v.prev = prev
	if prev == "" {
		v.base = 0
	}
	if len(v.rows) > window {
		keep := window - page
		last := v.rows[keep-1]
		v.next = engine.Cursor{At: last.job.StateChangedAt, ID: last.job.ID, Dir: engine.CursorNext}.Encode()
		v.rows = v.rows[:keep]
		v.cursor = min(v.cursor, keep-1)
	}
	v.reindex()
}

// refreshRows replaces the top of the list with fresh rows, keeping the
// cursor on the same job and at the same place on screen. When its job
// left the list, the cursor goes to the job that followed it.
func (v *jobsView) refreshRows(jobs []*engine.Job, next string, height int) {
	var curID string
	var after []string
	if r := v.current(); r != nil {
		curID = r.job.ID
		for i := v.cursor + 1; i < len(v.rows) && len(after) < 64; i++ {
			after = append(after, v.rows[i].job.ID)
		}
	}
	screenRow := v.cursor - v.offset
	old := v.rows
	oldIdx := v.index
	v.index = make(map[string]int, len(jobs))
	v.rows = make([]*jobRow, 0, len(jobs))
	for _, j := range jobs {
		if _, dup := v.index[j.ID]; dup {
			continue
		}
		if i, ok := oldIdx[j.ID]; ok && sameRow(old[i].job, j) {
			v.rows = append(v.rows, old[i]) // keep its rendering
		} else {
			v.rows = append(v.rows, newRow(j))
		}
		v.index[j.ID] = len(v.rows) - 1
	}
	v.next = next
	v.prev = ""
	v.base = 0
	cur := -1
	if i, ok := v.index[curID]; ok {
		cur = i
	} else {
		for _, id := range after {
			if i, ok := v.index[id]; ok {
				cur = i
				break
			}
		}
		if cur < 0 {
			cur = min(v.cursor, len(v.rows)-1)
		}
	}
	v.cursor = max(cur, 0)
	v.offset = max(v.cursor-screenRow, 0)
	v.keepCursorVisible(height)
}

// sameRow reports whether a row's rendering can be kept.
func sameRow(a, b *engine.Job) bool {
	return a.Version == b.Version && a.State == b.State && a.Attempt == b.Attempt &&
		a.CrashAttempt == b.CrashAttempt && len(a.Errors) == len(b.Errors) && a.StateChangedAt.Equal(b.StateChangedAt)
}

func (v *jobsView) keepCursorVisible(h int) {
	if len(v.rows) == 0 {
		v.cursor, v.offset = 0, 0
		return
	}
	v.cursor = min(max(v.cursor, 0), len(v.rows)-1)
	if h <= 0 {
		return
	}
	if v.cursor < v.offset {
		v.offset = v.cursor
	}
	if v.cursor >= v.offset+h {
		v.offset = v.cursor - h + 1
	}
	v.offset = min(v.offset, max(len(v.rows)-h, 0))
	v.offset = max(v.offset, 0)
}

// move moves the cursor by d rows.
func (v *jobsView) move(d, h int) {
	v.cursor += d
	v.keepCursorVisible(h)
}

// maybeLoadMore asks for the next (or previous) page when the cursor
// nears an end of the window.
func (m *Model) maybeLoadMore() tea.Cmd {
	v := &m.jobs
	if m.screen != scrJobs || v.loading || !v.loaded {
		return nil
	}
	h := max(m.listHeight(), 1)
	if v.next != "" && v.cursor >= len(v.rows)-h-1 {
		return m.loadList(listAppend, v.next, 0)
	}
	if v.prev != "" && v.cursor <= h {
		return m.loadList(listPrepend, v.prev, 0)
	}
	return nil
}

// Marks.

func (v *jobsView) toggleMark(r *jobRow) {
	id := r.job.ID
	if _, ok := v.marked[id]; ok {
		delete(v.marked, id)
		v.markOrder = slices.DeleteFunc(v.markOrder, func(s string) bool { return s == id })
		return
	}
	v.marked[id] = r.job
	v.markOrder = append(v.markOrder, id)
}

func (v *jobsView) markVisible(h int) int {
	n := 0
	for i := v.offset; i < min(v.offset+h, len(v.rows)); i++ {
		r := v.rows[i]
		if _, ok := v.marked[r.job.ID]; !ok {
			v.marked[r.job.ID] = r.job
			v.markOrder = append(v.markOrder, r.job.ID)
			n++
		}
	}
	return n
}

func (v *jobsView) clearMarks() {
	clear(v.marked)
	v.markOrder = v.markOrder[:0]
}

// markedIDs lists the marked ids in the order they were marked.
func (v *jobsView) markedIDs() []string { return slices.Clone(v.markOrder) }

// hiddenMarks counts marked jobs the current list does not show.
func (v *jobsView) hiddenMarks() int {
	n := 0
	for id := range v.marked {
		if _, ok := v.index[id]; !ok {
			n++
		}
	}
	return n
}

func isInputErr(err error) bool {
	return isErr(err, engine.ErrInvalid) || isErr(err, engine.ErrUnsupported)
}
