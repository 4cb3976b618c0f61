package tui

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// jobsView is the Jobs screen: state tabs, the filter and the table. Rows
// are rendered once per data change (and per width, theme or age tick)
// and cached on the row, so a cursor move re-renders two rows at most.
//
// The table is a window onto the list: at most Options.Window rows are
// held, loaded a page at a time by keyset cursor as the cursor nears
// either end, and the far end is dropped as it grows. Scrolling a million
// rows costs what the window costs, in memory and per frame; the jumps to
// the top and the bottom load from that end instead of walking to it.
type jobsView struct {
	// scan is the store's report of the last bounded scan, scanned the
	// jobs its scans examined since the list started over (takeScan).
	scan    *engine.ScanReport
	scanned int64

	tab    int // index in engine.AllStates; -1 when the filter names states
	query  string
	filter engine.Filter
	// queryErr is the inline error of the query being typed.
	queryErr string

	rows   []*jobRow
	index  map[string]int
	cursor int
	offset int
	next   string // older rows past the window; "" when it reaches the end
	prev   string // newer rows before the window; "" when it starts at the top
	// base is how many rows come before the window, -1 when not known
	// (the window was loaded from the end); tail is how many come after
	// it, -1 when not known. Live changes above the window are not
	// followed, so base is a position to show, never a key.
	base int
	tail int
	// pending is the part of a move that went past the loaded rows while
	// more were on the way; it is made when they arrive.
	pending int
	// seek is the job the cursor goes back to when the next full load
	// lands (esc back to this list).
	seek string
	// refreshWanted is a live refresh that waits for a page load.
	refreshWanted bool
	// liveAbove is how many of the rows above the screen arrived by live
	// refreshes: the cursor keeps its job and its place on screen, so
	// they would come in unseen; the status line says so (newerNote).
	liveAbove int
	// touched: the operator has pressed a key or clicked on this list
	// since it loaded. Until then a live refresh keeps the cursor on the
	// newest job at the top: the console opened on a demo still being
	// seeded sat on the first job it saw, "99 of 99 · ↑ 93 newer".
	touched bool

	loading  bool
	loadMode listMode
	loaded   bool
	listSeq  uint64
	err      error

	widths contentWidths
	// shown is the filter the rows were loaded for.
	shown string

	// marked maps each marked id to the filter it was marked under.
	marked    map[string]string
	markOrder []string
	// failNote says why an action failed on a job that stays marked
	// ("✗ state_conflict: …"), shown in its row until it is unmarked.
	failNote map[string]string
	// selectAll turns the filter into a bulk selector: actions go to
	// every matching job through Bulk.
	selectAll bool

	// w and h are the size the table is drawn at, its header included.
	w, h int
}

// SetSize sets the size the table is drawn at, its header included.
func (v *jobsView) SetSize(w, h int) { v.w, v.h = w, h }

// jobRow is one job and its cached rendering.
type jobRow struct {
	// job holds only what the table and the actions read (see slimJob).
	job *engine.Job
	// Sanitized cell text.
	id, queue, kind, att, crash, errMsg string
	// errs is how many errors the job had when loaded.
	errs int
	// note replaces the last error in the row: why an action failed on it.
	note string
	// waitText replaces it for a waiting job: what it waits for (set
	// when drawn, as its times are shown against the clock), or for an
	// available job a limit holds back, that limit (holdCell).
	waitText string

	gen        uint64
	line       string
	lineMarked bool
	cgen       uint64
	cline      string
	clineMark  bool
}

// maxErrText is the most of a job's last error a row keeps: more than
// any terminal is wide, and no row pins a long message in memory.
const maxErrText = 1024

func newRow(j *engine.Job) *jobRow {
	r := &jobRow{
		job:   slimJob(j),
		id:    termtext.Line(j.ID),
		queue: termtext.Line(j.Queue),
		kind:  kindCell(j),
		att:   strconv.Itoa(j.AttemptShown()) + "/" + strconv.Itoa(j.MaxAttempts),
		crash: strconv.Itoa(j.CrashAttempt),
		errs:  len(j.Errors),
	}
	// A completed job's errors are behind it: its row shows none.
	if msg := j.LastErrorText(); msg != "" && j.State != engine.StateCompleted {
		if len(msg) > maxErrText {
			cut := maxErrText
			for cut > 0 && !utf8.RuneStart(msg[cut]) {
				cut--
			}
			msg = msg[:cut]
		}
		r.errMsg = strings.Clone(termtext.Line(msg))
	}
	return r
}

// slimJob copies the fields a row needs. A listed job still carries its
// latest error with its trace, metadata and tags; a window of thousands
// of rows must not hold all that for a one-line table.
func slimJob(j *engine.Job) *engine.Job {
	return &engine.Job{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, State: j.State,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CrashAttempt: j.CrashAttempt,
		StateChangedAt: j.StateChangedAt, Version: j.Version, Wait: j.Wait,
		SupersededBy: j.SupersededBy, // r on it asks to force the retry
		UniqueKey:    j.UniqueKey,    // r on it looks for the key's holder
		HeldBy:       j.HeldBy,       // the row says which limit holds it back
	}
}

func (v *jobsView) init(opts Options) {
	v.tab = slices.Index(engine.AllStates, engine.StateArchived)
	if opts.State != "" {
		if i := slices.Index(engine.AllStates, opts.State); i >= 0 {
			v.tab = i
		}
	}
	v.marked = map[string]string{}
	v.failNote = map[string]string{}
	v.index = map[string]int{}
	v.tail = -1
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
		v.rows = nil
		v.index = map[string]int{}
		v.cursor, v.offset, v.base, v.tail = 0, 0, 0, -1
		v.next, v.prev = "", ""
		v.loaded = false
		v.selectAll = false
	}
	v.pending, v.refreshWanted = 0, false
	return m.loadList(listReplace, "", 0)
}

// retry redoes the load that failed. A page or a refresh failing deep
// in the list does not send the cursor back to the top: the window stays
// and the loads start again from where it is.
func (v *jobsView) retry(m *Model) tea.Cmd {
	if !v.loaded || len(v.rows) == 0 || v.effectiveFilter().String() != v.shown {
		return v.reload(m)
	}
	switch v.loadMode {
	case listAppend, listPrepend, listRefresh, listSegment:
		return tea.Batch(v.refresh(m), m.maybeLoadMore())
	case listBottom:
		return m.jumpBottom()
	}
	return v.reload(m)
}

// refresh reloads the rows on screen for a live update and keeps the
// cursor on its job. At the top of the list it reloads from the top down
// to a little past the screen, so new rows show above; deeper, it reloads
// the screen and a little past it, after the row above the screen, and
// leaves the rest of the window as it is.
func (v *jobsView) refresh(m *Model) tea.Cmd {
	if v.loading && !v.loaded {
		return nil
	}
	if v.loading {
		// A page is on its way: refresh once it has landed, so the two
		// answers do not race.
		v.refreshWanted = true
		return nil
	}
	h := m.listHeight()
	page := m.opts.PageSize
	if v.prev == "" {
		want := max(v.offset+h+page/2, page)
		want = min(want, max(len(v.rows), page))
		return m.loadList(listRefresh, "", want)
	}
	if len(v.rows) == 0 {
		return nil
	}
	anchor := v.rows[min(max(v.offset-1, 0), len(v.rows)-1)].job
	return m.loadSegment(cursorAfter(anchor), h+page/2, anchor.ID)
}

// cursorAfter pages on from j towards older rows; cursorBefore pages back
// from j towards newer ones.
func cursorAfter(j *engine.Job) string {
	return engine.Cursor{At: j.StateChangedAt, ID: j.ID, Dir: engine.CursorNext}.Encode()
}

func cursorBefore(j *engine.Job) string {
	return engine.Cursor{At: j.StateChangedAt, ID: j.ID, Dir: engine.CursorPrev}.Encode()
}

// endCursor pages back from before the oldest possible row: its page is
// the end of the list. No job changed state before 1970.
var endCursor = engine.Cursor{At: time.Unix(0, 0).UTC(), ID: "0", Dir: engine.CursorPrev}.Encode()

// olderThan reports whether a comes after b in the list (newest first by
// state_changed_at, then id).
func olderThan(a, b *engine.Job) bool {
	if !a.StateChangedAt.Equal(b.StateChangedAt) {
		return a.StateChangedAt.Before(b.StateChangedAt)
	}
	return a.ID < b.ID
}

// window is how many rows the list holds at most: the configured window,
// but never so few that the loads at either end would chase each other.
func (m *Model) window() int {
	page := m.opts.PageSize
	return max(m.opts.Window, 2*m.loadMargin()+2*page)
}

// loadMargin is how near an end of the window the cursor comes before
// the next page is asked for: two screens, or half a page.
func (m *Model) loadMargin() int {
	return max(2*max(m.listHeight(), 1), m.opts.PageSize/2)
}

// take takes a page of rows.
func (v *jobsView) take(m *Model, msg listMsg) tea.Cmd {
	if msg.seq != v.listSeq {
		return nil
	}
	v.loading = false
	if msg.err != nil {
		v.err = msg.err
		v.pending = 0
		if isInputErr(msg.err) {
			// A filter the backend cannot serve or a bad one: say so
			// inline, do not retry.
			v.loaded = true
			return nil
		}
		return m.failed(retryList, "job list", msg.err)
	}
	ok := m.succeeded(retryList)
	v.err = nil
	v.loaded = true
	v.takeScan(msg)
	h := m.listHeight()
	switch msg.mode {
	case listReplace, listTop:
		v.shown = msg.filter.String()
		v.setRows(msg.jobs)
		v.cursor, v.offset, v.base, v.tail = 0, 0, 0, endIf(msg.next)
		v.next, v.prev = msg.next, ""
		v.pending = 0
		if i, ok := v.index[v.seek]; ok && v.seek != "" {
			v.cursor = i
		}
		v.seek = ""
	case listBottom:
		v.setRows(msg.jobs)
		// Nothing is older than this page, whatever its cursor says.
		v.next, v.prev = "", msg.prev
		v.tail, v.base = 0, -1
		if msg.prev == "" {
			v.base = 0
		}
		v.cursor, v.offset = len(v.rows)-1, len(v.rows)
		v.pending = 0
	case listAppend:
		v.appendRows(msg.jobs, msg.next, h)
	case listPrepend:
		v.prependRows(msg.jobs, msg.prev, h)
	case listRefresh:
		v.refreshRows(msg.jobs, msg.next, h)
	case listSegment:
		v.segmentRows(msg.anchor, msg.jobs, msg.next, h)
	}
	v.trim(m.window(), h)
	v.placeFromEnd(m)
	v.measure()
	v.keepCursorVisible(h)
	var refresh tea.Cmd
	if v.refreshWanted {
		v.refreshWanted = false
		refresh = v.refresh(m)
	}
	return tea.Batch(ok, m.sheetFollow(), refresh, m.maybeLoadMore())
}

// placeFromEnd works out the window's position from the counters when
// it was loaded from the end (and has not met the top since).
func (v *jobsView) placeFromEnd(m *Model) {
	if v.base >= 0 || v.tail < 0 {
		return
	}
	if n, ok := m.matchCount(); ok {
		v.base = max(int(n)-v.tail-len(v.rows), 0)
	}
}

// endIf is 0 (no rows after the window) when there is no next cursor,
// else -1 (not known).
func endIf(next string) int {
	if next == "" {
		return 0
	}
	return -1
}

func (v *jobsView) setRows(jobs []*engine.Job) {
	v.liveAbove = 0
	v.touched = false
	// Fresh slice and map: the old window is let go whole.
	v.rows = make([]*jobRow, 0, len(jobs))
	v.index = make(map[string]int, len(jobs))
	for _, j := range jobs {
		if _, dup := v.index[j.ID]; dup {
			continue
		}
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

// appendRows adds older rows at the end of the window and makes a move
// that was waiting for them.
func (v *jobsView) appendRows(jobs []*engine.Job, next string, h int) {
	for _, j := range jobs {
		if _, dup := v.index[j.ID]; dup {
			continue
		}
		v.index[j.ID] = len(v.rows)
		v.rows = append(v.rows, newRow(j))
	}
	v.next = next
	if next == "" {
		v.tail = 0
	}
	if v.pending > 0 {
		v.cursor += v.pending
	}
	v.pending = 0
	v.keepCursorVisible(h)
}

// prependRows adds newer rows before the window and makes a move that
// was waiting for them.
func (v *jobsView) prependRows(jobs []*engine.Job, prev string, h int) {
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
	if v.base >= 0 {
		v.base = max(v.base-n, 0)
	}
	v.prev = prev
	if prev == "" {
		v.base = 0
	}
	if v.pending < 0 {
		v.cursor = max(v.cursor+v.pending, 0)
	}
	v.pending = 0
	v.reindex()
	v.keepCursorVisible(h)
}

// trim bounds the window: past window rows, the end farther from the
// screen is dropped (never a row on screen) and remembered by a cursor,
// to be loaded again when the cursor comes back to it.
func (v *jobsView) trim(window, h int) {
	h = max(h, 1)
	for pass := 0; pass < 2 && len(v.rows) > window; pass++ {
		over := len(v.rows) - window
		above, below := v.offset, len(v.rows)-(v.offset+h)
		if above >= below {
			drop := min(over, above)
			if drop <= 0 {
				continue
			}
			v.prev = cursorBefore(v.rows[drop].job)
			// A new backing array, so the dropped rows are freed.
			v.rows = slices.Clone(v.rows[drop:])
			if v.base >= 0 {
				v.base += drop
			}
			v.cursor -= drop
			v.offset -= drop
		} else {
			keep := len(v.rows) - min(over, below)
			if keep >= len(v.rows) {
				continue
			}
			v.next = cursorAfter(v.rows[keep-1].job)
			if v.tail >= 0 {
				v.tail += len(v.rows) - keep
			}
			v.rows = slices.Clone(v.rows[:keep])
		}
		v.reindex()
	}
}

// cursorSpot is where the cursor is, to put it back after the rows were
// reloaded: its job, the jobs that followed it, and its row on screen.
type cursorSpot struct {
	id        string
	after     []string
	screenRow int
}

func (v *jobsView) spot() cursorSpot {
	s := cursorSpot{screenRow: v.cursor - v.offset}
	if r := v.current(); r != nil {
		s.id = r.job.ID
		for i := v.cursor + 1; i < len(v.rows) && len(s.after) < 64; i++ {
			s.after = append(s.after, v.rows[i].job.ID)
		}
	}
	return s
}

// restore puts the cursor back on its job at the same place on screen;
// when its job left the list, on the job that followed it.
func (v *jobsView) restore(s cursorSpot, h int) {
	cur := -1
	if i, ok := v.index[s.id]; ok {
		cur = i
	} else {
		for _, id := range s.after {
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
	v.offset = max(v.cursor-s.screenRow, 0)
	v.keepCursorVisible(h)
}

// refreshRows replaces the top of the list with fresh rows, keeping the
// cursor on the same job and at the same place on screen. When its job
// left the list, the cursor goes to the job that followed it.
func (v *jobsView) refreshRows(jobs []*engine.Job, next string, height int) {
	s := v.spot()
	atTop := !v.touched && v.cursor == 0 && v.offset == 0
	old := v.rows
	oldIdx := v.index
	v.index = make(map[string]int, len(jobs))
	v.rows = make([]*jobRow, 0, len(jobs))
	for _, j := range jobs {
		if _, dup := v.index[j.ID]; dup {
			continue
		}
		if i, ok := oldIdx[j.ID]; ok && sameRow(old[i], j) {
			v.rows = append(v.rows, old[i]) // keep its rendering
		} else {
			v.rows = append(v.rows, newRow(j))
		}
		v.index[j.ID] = len(v.rows) - 1
	}
	v.next = next
	v.prev = ""
	v.base, v.tail = 0, endIf(next)
	v.restore(s, height)
	if atTop {
		v.cursor, v.offset, v.liveAbove = 0, 0, 0
		return
	}
	for i := 0; i < v.offset; i++ {
		if _, seen := oldIdx[v.rows[i].job.ID]; !seen {
			v.liveAbove++
		}
	}
	v.liveAbove = min(v.liveAbove, v.offset)
}

// segmentRows replaces the rows after the anchor, down to the last fresh
// row, with the fresh rows; the rest of the window stays. The cursor keeps
// its job and its place on screen, as in refreshRows.
func (v *jobsView) segmentRows(anchorID string, jobs []*engine.Job, next string, height int) {
	a, ok := v.index[anchorID]
	if !ok {
		return
	}
	s := v.spot()
	fresh := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		fresh[j.ID] = true
	}
	old := v.rows
	// end is the first old row past the fresh ones; with no next cursor
	// the list ends with them.
	end := len(old)
	if next != "" && len(jobs) > 0 {
		last := jobs[len(jobs)-1]
		end = a + 1
		for end < len(old) && !olderThan(old[end].job, last) {
			end++
		}
	}
	rows := make([]*jobRow, 0, a+1+len(jobs)+len(old)-end)
	for _, r := range old[:a+1] {
		if !fresh[r.job.ID] {
			rows = append(rows, r)
		}
	}
	for _, j := range jobs {
		if i, ok := v.index[j.ID]; ok && sameRow(old[i], j) {
			rows = append(rows, old[i])
		} else {
			rows = append(rows, newRow(j))
		}
	}
	for _, r := range old[end:] {
		if !fresh[r.job.ID] {
			rows = append(rows, r)
		}
	}
	if end >= len(old) {
		v.next = next
		if next == "" {
			v.tail = 0
		}
	}
	v.rows = rows
	v.reindex()
	v.restore(s, height)
}

// sameRow reports whether a row's rendering can be kept for j.
func sameRow(r *jobRow, j *engine.Job) bool {
	a := r.job
	// A hold comes and goes with other jobs' runs and the limits, not with
	// a write to this job: its version stays, so it is compared itself.
	return a.Version == j.Version && a.State == j.State && a.Attempt == j.Attempt &&
		a.CrashAttempt == j.CrashAttempt && r.errs == len(j.Errors) && a.StateChangedAt.Equal(j.StateChangedAt) &&
		a.HeldBy == j.HeldBy
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
	// Rows the cursor moved up past have been seen.
	v.liveAbove = min(v.liveAbove, v.offset)
}

// move moves the cursor by d rows. The part of a move past the loaded
// rows, when more are on the way, is kept (up to a screen) and made when
// they arrive, so holding a key does not stall at the window's edge.
func (v *jobsView) move(d, h int) {
	v.pending = 0
	target := v.cursor + d
	switch {
	case target > len(v.rows)-1 && v.next != "":
		v.pending = min(target-max(len(v.rows)-1, 0), max(h, 1))
	case target < 0 && v.prev != "":
		v.pending = max(target, -max(h, 1))
	}
	v.cursor = target
	v.keepCursorVisible(h)
}

// maybeLoadMore asks for the next (or previous) page when the cursor
// nears an end of the window.
func (m *Model) maybeLoadMore() tea.Cmd {
	v := &m.jobs
	if m.screen != scrJobs || v.loading || !v.loaded {
		return nil
	}
	margin := m.loadMargin()
	if v.next != "" && (v.cursor >= len(v.rows)-margin || v.pending > 0) {
		return m.loadList(listAppend, v.next, 0)
	}
	if v.prev != "" && (v.cursor < margin || v.pending < 0) {
		return m.loadList(listPrepend, v.prev, 0)
	}
	return nil
}

// jumpTop puts the cursor on the newest row: in the window when it holds
// the top of the list, else by loading the first page.
func (m *Model) jumpTop() tea.Cmd {
	v := &m.jobs
	v.pending = 0
	if v.prev == "" || !v.loaded {
		v.move(-v.cursor, max(m.listHeight(), 1))
		return tea.Batch(m.sheetFollow(), m.maybeLoadMore())
	}
	return m.loadList(listTop, "", 0)
}

// jumpBottom puts the cursor on the oldest row: in the window when it
// holds the end of the list, else by loading the last page.
func (m *Model) jumpBottom() tea.Cmd {
	v := &m.jobs
	v.pending = 0
	if v.next == "" || !v.loaded {
		v.cursor = len(v.rows) - 1
		v.keepCursorVisible(max(m.listHeight(), 1))
		return tea.Batch(m.sheetFollow(), m.maybeLoadMore())
	}
	return m.loadList(listBottom, endCursor, 0)
}

// newerNote tells, for the status line, of rows that arrived above the
// screen while it stayed put ("↑ 3 newer · g top"); "" when there are none.
func (m *Model) newerNote() string {
	n := m.jobs.liveAbove
	if n <= 0 {
		return ""
	}
	return "↑ " + commas(int64(n)) + " newer · " + m.km.B(keymap.Top).Help().Key + " top"
}

// position is where the cursor is in the list, for the status line:
// "1,234 of 1,000,000" when the counters or the window can tell, "of
// 2,000+" when only a lower bound is known, counted from the end after a
// jump there when the counters cannot say.
func (m *Model) position() string {
	v := &m.jobs
	n, counted := m.matchCount()
	abs := -1
	if v.base >= 0 {
		abs = v.base + v.cursor
	}
	switch {
	case abs >= 0 && counted:
		return commas(int64(abs+1)) + " of " + commas(max(n, int64(abs+1)))
	case abs >= 0:
		total, more := int64(abs-v.cursor+len(v.rows)), v.next != ""
		if lb, ok := m.matchLowerBound(); ok && lb >= total {
			// The tab reads "500+": the position says no fewer beside it.
			total, more = lb, true
		}
		s := commas(int64(abs+1)) + " of " + commas(total)
		if more {
			s += "+"
		}
		return s
	}
	after := len(v.rows) - 1 - v.cursor + max(v.tail, 0)
	if after == 0 {
		return "last"
	}
	return commas(int64(after)) + " before the last"
}

// Marks.

func (v *jobsView) toggleMark(r *jobRow) {
	id := r.job.ID
	if _, ok := v.marked[id]; ok {
		delete(v.marked, id)
		delete(v.failNote, id)
		v.markOrder = slices.DeleteFunc(v.markOrder, func(s string) bool { return s == id })
		return
	}
	v.marked[id] = v.shown
	v.markOrder = append(v.markOrder, id)
}

func (v *jobsView) markVisible(h int) int {
	n := 0
	for i := v.offset; i < min(v.offset+h, len(v.rows)); i++ {
		r := v.rows[i]
		if _, ok := v.marked[r.job.ID]; !ok {
			v.marked[r.job.ID] = v.shown
			v.markOrder = append(v.markOrder, r.job.ID)
			n++
		}
	}
	return n
}

func (v *jobsView) clearMarks() {
	clear(v.marked)
	clear(v.failNote)
	v.markOrder = v.markOrder[:0]
}

// markedIDs lists the marked ids in the order they were marked.
func (v *jobsView) markedIDs() []string { return slices.Clone(v.markOrder) }

// hiddenMarks counts marked jobs the current filter does not show: those
// marked under another filter and not among the loaded rows. A job
// marked under this filter and scrolled out of the window is not hidden.
func (v *jobsView) hiddenMarks() int {
	n := 0
	for id, under := range v.marked {
		if _, ok := v.index[id]; !ok && under != v.shown {
			n++
		}
	}
	return n
}

func isInputErr(err error) bool {
	return isErr(err, engine.ErrInvalid) || isErr(err, engine.ErrUnsupported)
}

// takeScan keeps what the store said of its bounded scans: the last
// answer's report (nil once a page reached the end unbounded) and the
// jobs examined since the list started over.
func (v *jobsView) takeScan(msg listMsg) {
	switch msg.mode {
	case listReplace, listTop, listBottom, listRefresh:
		v.scanned = 0
	}
	v.scan = msg.scan
	if msg.scan != nil {
		v.scanned += msg.scan.Scanned
	}
}

// scanNote says the list is partial, how far the scan got, and how to
// scan further; "" when the list is complete.
func (v *jobsView) scanNote() string {
	if v.scan == nil {
		return ""
	}
	return "scanned " + commas(v.scanned) + " of " + commas(v.scan.Total) + " jobs — partial; scroll on to scan further"
}
