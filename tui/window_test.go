package tui

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// The windowed list over a real store: a few thousand jobs, small pages
// and a small window, scrolled end to end and back, with jumps.

const (
	winJobs   = 3000
	winBatch  = 500 // one enqueue transaction: 500 rows share a state_changed_at
	winPage   = 50
	winWindow = 300
)

// countingControl counts ListJobs calls, to tell a jump from a walk.
type countingControl struct {
	engine.Control
	lists atomic.Int64
}

func (c *countingControl) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	c.lists.Add(1)
	return c.Control.ListJobs(ctx, p)
}

// windowSetup enqueues winJobs available jobs (no worker takes them) and
// returns the engine with the list in the order ListJobs gives it.
func windowSetup(t *testing.T) (*engine.Engine, []string) {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < winJobs; start += winBatch {
		ps := make([]engine.EnqueueParams, winBatch)
		for i := range ps {
			n := start + i
			ps[i] = engine.EnqueueParams{ID: fmt.Sprintf("w-%05d", n), Queue: []string{"billing", "email"}[n%2],
				Kind: "invoice.generate", Payload: []byte(`{}`)}
		}
		res, err := eng.EnqueueMany(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	return eng, listAll(t, eng, engine.Filter{States: []engine.State{engine.StateAvailable}})
}

// listAll walks the whole list through the engine: the truth the console
// is checked against.
func listAll(t *testing.T, ctl engine.Control, f engine.Filter) []string {
	t.Helper()
	var ids []string
	cur := ""
	for {
		page, err := ctl.ListJobs(context.Background(), engine.ListJobsParams{Filter: f, Cursor: cur, Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == "" {
			return ids
		}
		cur = page.Next
	}
}

// drive runs cmd and every command its messages lead to, feeding each
// message to the model as the program would, until nothing is left.
func drive(m *Model, cmd tea.Cmd) {
	queue := []tea.Cmd{cmd}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		switch msg := c().(type) {
		case nil:
		case tea.BatchMsg:
			queue = append(queue, msg...)
		default:
			_, next := m.Update(msg)
			queue = append(queue, next)
		}
	}
}

// press sends a key and runs what it leads to.
func press(m *Model, k string) {
	_, cmd := m.Update(keyMsg(k))
	drive(m, cmd)
}

// windowModel is a console over ctl on the available tab, loaded and
// counted, at 120×36.
func windowModel(t *testing.T, ctl engine.Control, query string) *Model {
	t.Helper()
	m := New(ctl, Options{NoSubscribe: true, State: engine.StateAvailable, Query: query, PageSize: winPage, Window: winWindow, Theme: "dark"})
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	drive(m, m.loadCounts())
	drive(m, m.loadList(listReplace, "", 0))
	return m
}

// checkWindow checks that the rows held are a run of the list, that the
// window is bounded, and that the cursor is on want (an index in all).
func checkWindow(t *testing.T, m *Model, all []string, want int, step string) {
	t.Helper()
	v := &m.jobs
	if len(v.rows) > m.window() || len(v.index) != len(v.rows) {
		t.Fatalf("%s: window holds %d rows (index %d), bound %d", step, len(v.rows), len(v.index), m.window())
	}
	if got := v.current(); got == nil || got.job.ID != all[want] {
		t.Fatalf("%s: cursor on %v, want %s (row %d)", step, got, all[want], want)
	}
	if v.base < 0 {
		t.Fatalf("%s: position unknown with the counters loaded", step)
	}
	for i, r := range v.rows {
		if v.base+i >= len(all) || r.job.ID != all[v.base+i] {
			t.Fatalf("%s: row %d (absolute %d) is %s, want %s", step, i, v.base+i, r.job.ID, all[min(v.base+i, len(all)-1)])
		}
	}
	if v.base+v.cursor != want {
		t.Fatalf("%s: position %d, want %d", step, v.base+v.cursor, want)
	}
	status := ansi.Strip(m.statusLine(120))
	if pos := fmt.Sprintf("%s of %s", commas(int64(want+1)), commas(int64(len(all)))); !strings.Contains(status, pos) {
		t.Fatalf("%s: status line %q does not say %q", step, status, pos)
	}
}

// TestWindowScrollEndToEnd pages down through the whole list and back up
// over a real store: the cursor is on the right job at every step, the
// rows held are always a run of the list and never more than the window.
func TestWindowScrollEndToEnd(t *testing.T) {
	t.Parallel()
	eng, all := windowSetup(t)
	if len(all) != winJobs {
		t.Fatalf("listed %d jobs, want %d", len(all), winJobs)
	}
	ctl := &countingControl{Control: eng}
	m := windowModel(t, ctl, "")
	h := m.listHeight()
	checkWindow(t, m, all, 0, "start")

	want := 0
	for want < len(all)-1 {
		press(m, "<pgdown>")
		want = min(want+h, len(all)-1)
		checkWindow(t, m, all, want, fmt.Sprintf("page down to %d", want))
	}
	if m.jobs.next != "" || m.jobs.tail != 0 {
		t.Fatalf("at the end with next %q tail %d", m.jobs.next, m.jobs.tail)
	}
	for want > 0 {
		press(m, "<pgup>")
		want = max(want-h, 0)
		checkWindow(t, m, all, want, fmt.Sprintf("page up to %d", want))
	}
	if m.jobs.prev != "" {
		t.Fatalf("back at the top with prev %q", m.jobs.prev)
	}
	// Line by line across a few page boundaries, both ways.
	for i := 1; i <= 3*winPage; i++ {
		press(m, "j")
		checkWindow(t, m, all, i, fmt.Sprintf("down to %d", i))
	}
	for i := 3*winPage - 1; i >= 0; i-- {
		press(m, "k")
		checkWindow(t, m, all, i, fmt.Sprintf("up to %d", i))
	}
	// Every page was read about twice (down and back up), no more.
	if calls, pages := ctl.lists.Load(), int64(winJobs/winPage); calls > 3*pages {
		t.Fatalf("%d ListJobs calls for %d pages", calls, pages)
	}
}

// TestWindowJumps: G and g load from the end and from the start, a
// couple of pages each, whatever the distance.
func TestWindowJumps(t *testing.T) {
	t.Parallel()
	eng, all := windowSetup(t)
	ctl := &countingControl{Control: eng}
	m := windowModel(t, ctl, "")
	last := len(all) - 1

	before := ctl.lists.Load()
	press(m, "G")
	checkWindow(t, m, all, last, "G")
	if n := ctl.lists.Load() - before; n > 3 {
		t.Fatalf("G took %d ListJobs calls: it walked", n)
	}
	for i := 1; i <= 2*winPage; i++ {
		press(m, "k")
		checkWindow(t, m, all, last-i, fmt.Sprintf("up from the end to %d", last-i))
	}
	press(m, "G")
	checkWindow(t, m, all, last, "G again")

	before = ctl.lists.Load()
	press(m, "g")
	checkWindow(t, m, all, 0, "g")
	if n := ctl.lists.Load() - before; n > 3 {
		t.Fatalf("g took %d ListJobs calls: it walked", n)
	}
	// Home and End are the same jumps.
	press(m, "<end>")
	checkWindow(t, m, all, last, "end")
	press(m, "<home>")
	checkWindow(t, m, all, 0, "home")
}

// TestWindowJumpWithoutCounts: under a filter nothing counts (the
// counters cannot, and this backend cannot count filters), the position
// after G is told from the end, and paging back up to the top finds where
// it is again.
func TestWindowJumpWithoutCounts(t *testing.T) {
	t.Parallel()
	eng, _ := windowSetup(t)
	all := listAll(t, eng, engine.Filter{States: []engine.State{engine.StateAvailable}, Kinds: []string{"invoice.generate"}})
	m := windowModel(t, noFilterCounts{eng}, "kind:invoice.generate")
	if _, ok := m.matchCount(); ok {
		t.Fatal("a kind filter is counted on a backend that cannot count it")
	}
	press(m, "G")
	v := &m.jobs
	if v.base != -1 || v.current().job.ID != all[len(all)-1] {
		t.Fatalf("after G: base %d, cursor on %s", v.base, v.current().job.ID)
	}
	if got := m.position(); got != "last" {
		t.Fatalf("position %q at the end, want last", got)
	}
	press(m, "k")
	if got := m.position(); got != "1 before the last" {
		t.Fatalf("position %q, want 1 before the last", got)
	}
	for i := 0; v.base != 0; i++ {
		if i > winJobs {
			t.Fatal("paging up never reached the top")
		}
		press(m, "<pgup>")
		if len(v.rows) > m.window() {
			t.Fatalf("window holds %d rows", len(v.rows))
		}
		for j, r := range v.rows {
			if k := len(all) - len(v.rows) - v.tail + j; r.job.ID != all[k] {
				t.Fatalf("row %d is %s, want %s", j, r.job.ID, all[k])
			}
		}
	}
	if id := v.current().job.ID; id != all[v.cursor] {
		t.Fatalf("at the top the cursor is on %s, want %s", id, all[v.cursor])
	}
}

// TestWindowLiveRefreshDeep: deep in the list a live update reloads the
// rows on screen; rows arriving at the top do not move the screen, a job
// that left disappears, and the cursor stays on its job.
func TestWindowLiveRefreshDeep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eng, all := windowSetup(t)
	m := windowModel(t, eng, "")
	for range 40 {
		press(m, "<pgdown>")
	}
	v := &m.jobs
	if v.prev == "" || v.base == 0 {
		t.Fatalf("not deep: prev %q base %d", v.prev, v.base)
	}
	cur := v.current().job.ID
	screenRow := v.cursor - v.offset
	// A row on screen above the cursor and one below it leave the list;
	// new rows arrive at the top.
	gone := []string{v.rows[v.cursor-2].job.ID, v.rows[v.cursor+3].job.ID}
	for _, id := range gone {
		if _, err := eng.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: "w-new", Queue: "billing", Kind: "invoice.generate", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	drive(m, m.refresh())
	if got := v.current().job.ID; got != cur {
		t.Fatalf("cursor on %s after a live update, want %s", got, cur)
	}
	if got := v.cursor - v.offset; got != screenRow && got != screenRow-1 {
		t.Fatalf("cursor moved on screen from row %d to %d", screenRow, got)
	}
	for _, id := range gone {
		if _, ok := v.index[id]; ok {
			t.Fatalf("%s left the list but is still shown", id)
		}
	}
	if _, ok := v.index["w-new"]; ok {
		t.Fatal("a new top row was put in a window deep in the list")
	}
	// The window is still a run of the list as it is now.
	now := listAll(t, eng, engine.Filter{States: []engine.State{engine.StateAvailable}})
	at := -1
	for i, id := range now {
		if id == v.rows[0].job.ID {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatalf("first row %s is not in the list", v.rows[0].job.ID)
	}
	for i, r := range v.rows {
		if r.job.ID != now[at+i] {
			t.Fatalf("row %d is %s, want %s", i, r.job.ID, now[at+i])
		}
	}
	// The cursor's own job leaves: the cursor goes to the job after it.
	after := v.rows[v.cursor+1].job.ID
	if _, err := eng.Cancel(ctx, cur); err != nil {
		t.Fatal(err)
	}
	drive(m, m.refresh())
	if got := v.current().job.ID; got != after {
		t.Fatalf("cursor on %s after its job left, want %s", got, after)
	}
	_ = all
}

// TestWindowMarksOutOfWindow: a job marked and scrolled out of the
// window is not "hidden by the filter".
func TestWindowMarksOutOfWindow(t *testing.T) {
	t.Parallel()
	eng, _ := windowSetup(t)
	m := windowModel(t, eng, "")
	press(m, "<space>")
	press(m, "G")
	if _, ok := m.jobs.index["w-02999"]; ok || len(m.jobs.marked) != 1 {
		t.Fatalf("the marked job is still in the window (%d marked)", len(m.jobs.marked))
	}
	if n := m.jobs.hiddenMarks(); n != 0 {
		t.Fatalf("%d marks hidden by the filter, want 0", n)
	}
}

// TestRowsAreSlim: a row keeps the last error's text, not the job's
// errors, traces or metadata.
func TestRowsAreSlim(t *testing.T) {
	t.Parallel()
	j := syntheticJobs(1, time.Now())[0]
	j.Metadata = []byte(`{"tenant":"acme"}`)
	j.Errors[0].Trace = strings.Repeat("goroutine 1 [running]\n", 1000)
	j.Errors[0].Message = strings.Repeat("é", 5000)
	r := newRow(j)
	if r.job.Errors != nil || r.job.Metadata != nil || r.errs != 1 {
		t.Fatalf("row keeps %d errors, metadata %q", len(r.job.Errors), r.job.Metadata)
	}
	if len(r.errMsg) > maxErrText || !strings.HasPrefix(r.errMsg, "éé") {
		t.Fatalf("error text %d bytes", len(r.errMsg))
	}
}

// failingLists fails the ListJobs calls made while failing is set.
type failingLists struct {
	engine.Control
	failing atomic.Bool
	failed  atomic.Int64
}

func (c *failingLists) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	if c.failing.Load() {
		c.failed.Add(1)
		return nil, errDown
	}
	return c.Control.ListJobs(ctx, p)
}

// TestWindowRetryKeepsPlace: a page that fails to load deep in the list
// is asked for again where the cursor is, not from the top.
func TestWindowRetryKeepsPlace(t *testing.T) {
	t.Parallel()
	eng, all := windowSetup(t)
	ctl := &failingLists{Control: eng}
	m := windowModel(t, ctl, "")
	h := m.listHeight()
	want := 0
	for range 30 {
		press(m, "<pgdown>")
		want += h
	}
	checkWindow(t, m, all, want, "deep")
	// The next page fails: the cursor stops at the window's end.
	ctl.failing.Store(true)
	var retry tea.Cmd
	for i := 0; ctl.failed.Load() == 0; i++ {
		if i > winWindow {
			t.Fatal("no page was asked for")
		}
		_, cmd := m.Update(keyMsg("<pgdown>"))
		// Run the load; keep the retry timer it leads to.
		retry = runUntilRetry(m, cmd)
	}
	if retry == nil || m.live.banner == "" {
		t.Fatalf("a failed page gave no retry (banner %q)", m.live.banner)
	}
	ctl.failing.Store(false)
	drive(m, retry) // waits the first backoff, a second
	if m.jobs.base == 0 || m.live.banner != "" {
		t.Fatalf("after the retry: base %d, banner %q", m.jobs.base, m.live.banner)
	}
	checkWindow(t, m, all, m.jobs.base+m.jobs.cursor, "after the retry")
	for range 5 {
		press(m, "<pgdown>")
	}
	checkWindow(t, m, all, m.jobs.base+m.jobs.cursor, "scrolling on")
}

// runUntilRetry is drive, except that it returns the retry timer a
// failure leads to instead of waiting for it.
func runUntilRetry(m *Model, cmd tea.Cmd) tea.Cmd {
	var retry tea.Cmd
	queue := []tea.Cmd{cmd}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		if m.live.banner != "" && retry == nil {
			// The command after the failure is the retry timer.
			retry = c
			continue
		}
		switch msg := c().(type) {
		case nil:
		case tea.BatchMsg:
			queue = append(queue, msg...)
		default:
			_, next := m.Update(msg)
			queue = append(queue, next)
		}
	}
	return retry
}

// TestWindowJumpWithFilterCounts: under a filter the counters cannot
// count, the filter's own counts place the window after G, and the
// position reads as in the whole list.
func TestWindowJumpWithFilterCounts(t *testing.T) {
	t.Parallel()
	eng, _ := windowSetup(t)
	all := listAll(t, eng, engine.Filter{States: []engine.State{engine.StateAvailable}, Kinds: []string{"invoice.generate"}})
	m := windowModel(t, eng, "kind:invoice.generate")
	if n, ok := m.matchCount(); !ok || n != int64(len(all)) {
		t.Fatalf("matchCount = %d, %v; the list holds %d", n, ok, len(all))
	}
	press(m, "G")
	if want := commas(int64(len(all))) + " of " + commas(int64(len(all))); m.position() != want {
		t.Fatalf("position %q at the end, want %q", m.position(), want)
	}
}
