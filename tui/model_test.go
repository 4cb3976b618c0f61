package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// Unit tests of the model without a program: messages in, frames out.

func TestSmallTerminals(t *testing.T) {
	t.Parallel()
	for _, size := range [][2]int{{40, 10}, {20, 5}, {1, 1}, {0, 0}, {59, 30}, {200, 11}, {60, 12}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			t.Parallel()
			m := loadedModel(t, 50, size[0], size[1])
			// Every screen and overlay at this size.
			for _, k := range []string{"j", "<enter>", "p", "?", "?", ":", "<esc>", "<space>", "r", "<esc>", "A", "<esc>"} {
				m.Update(keyMsg(k))
				_ = m.View()
			}
			for _, s := range []screen{scrQuarantine, scrOperations, scrQueues, scrErrors, scrJobs} {
				m.screen = s
				_ = m.View()
			}
			out := ansi.Strip(m.View().Content)
			lines := strings.Split(out, "\n")
			if size[1] > 0 && len(lines) > size[1] {
				t.Errorf("%d lines for a %d-line terminal", len(lines), size[1])
			}
			for i, l := range lines {
				if w := ansi.StringWidth(l); w > max(size[0], 0) {
					t.Errorf("line %d is %d wide on a %d-wide terminal: %q", i, w, size[0], l)
				}
			}
			small := size[0] < minWidth || size[1] < minHeight
			if small && size[0] >= 20 && !strings.Contains(strings.ReplaceAll(out, "\n", " "), "too small") {
				t.Errorf("small terminal not told so:\n%s", out)
			}
		})
	}
}

func TestFrameFitsTerminal(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 300, 120, 36)
	m.Update(keyMsg("<enter>"))
	for _, k := range []string{"j", "j", "?", "?", "<ctrl+a>", "A"} {
		m.Update(keyMsg(k))
		lines := strings.Split(ansi.Strip(m.View().Content), "\n")
		if len(lines) != 36 {
			t.Fatalf("after %s: %d lines, want 36", k, len(lines))
		}
		for i, l := range lines {
			if w := ansi.StringWidth(l); w > 120 {
				t.Fatalf("after %s: line %d is %d wide", k, i, w)
			}
		}
	}
}

func TestStaleListAnswerDropped(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 10, 120, 36)
	old := m.jobs.listSeq
	m.loadList(listReplace, "", 0) // a newer request is in flight
	now := time.Now()
	m.Update(listMsg{seq: old, mode: listReplace, jobs: syntheticJobs(3, now)})
	if len(m.jobs.rows) != 10 {
		t.Fatalf("a stale answer replaced the rows: %d rows", len(m.jobs.rows))
	}
	m.Update(listMsg{seq: m.jobs.listSeq, mode: listReplace, jobs: syntheticJobs(3, now)})
	if len(m.jobs.rows) != 3 {
		t.Fatalf("the current answer was not taken: %d rows", len(m.jobs.rows))
	}
}

// TestLiveRefreshSaysNewerAbove: rows that a live refresh brings in
// above the screen, which stays put, are announced in the status line
// until the cursor goes up to them; g brings them into view.
func TestLiveRefreshSaysNewerAbove(t *testing.T) {
	t.Parallel()
	m, jobs, refresh, newJob := liveList(t)
	status := func() string { return ansi.Strip(m.statusLine(120)) }
	if s := status(); strings.Contains(s, "newer") {
		t.Fatalf("status %q speaks of newer rows before any arrived", s)
	}
	// Down and back up: the operator has the list in hand, so it no
	// longer follows its top (TestUntouchedListFollowsTheTop).
	m.Update(keyMsg("j"))
	m.Update(keyMsg("k"))
	refresh(newJob(2), newJob(1))
	if got := m.jobs.cursor - m.jobs.offset; got != 0 {
		t.Fatalf("cursor moved on screen to row %d", got)
	}
	if s := status(); !strings.Contains(s, "↑ 2 newer · g top") {
		t.Fatalf("status %q does not announce the 2 rows above the screen", s)
	}
	// A refresh that brings nothing new keeps the count; one more adds.
	*jobs = append([]*engine.Job{newJob(2), newJob(1)}, *jobs...)
	refresh()
	refresh(newJob(3))
	if s := status(); !strings.Contains(s, "↑ 3 newer") {
		t.Fatalf("status %q, want 3 newer", s)
	}
	// Up one row: that row is seen.
	m.Update(keyMsg("k"))
	if s := status(); !strings.Contains(s, "↑ 2 newer") {
		t.Fatalf("after k, status %q, want 2 newer", s)
	}
	m.Update(keyMsg("g"))
	if m.jobs.offset != 0 || m.jobs.current().job.ID != "new-3" {
		t.Fatalf("g left the screen at offset %d on %s", m.jobs.offset, m.jobs.current().job.ID)
	}
	if s := status(); strings.Contains(s, "newer") {
		t.Fatalf("status %q still speaks of newer rows at the top", s)
	}
}

// TestLiveRefreshKeepsCursor: rows arriving above and the cursor's
// neighbours leaving never move the cursor off its job.
func TestLiveRefreshKeepsCursor(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 100, 120, 36)
	for range 10 {
		m.Update(keyMsg("j"))
	}
	cur := m.jobs.current().job.ID
	screenRow := m.jobs.cursor - m.jobs.offset
	now := time.Date(2026, 11, 29, 2, 14, 0, 0, time.UTC)
	jobs := syntheticJobs(100, now)
	fresh := []*engine.Job{
		{ID: "new-1", Queue: "billing", Kind: "k", State: engine.StateArchived, StateChangedAt: now.Add(time.Second)},
		{ID: "new-2", Queue: "billing", Kind: "k", State: engine.StateArchived, StateChangedAt: now.Add(2 * time.Second)},
	}
	// Two new rows on top, rows 3 and 4 gone.
	next := append(append(fresh, jobs[:3]...), jobs[5:]...)
	m.loads.seq++
	m.jobs.listSeq = m.loads.seq
	m.Update(listMsg{seq: m.loads.seq, mode: listRefresh, jobs: next})
	if got := m.jobs.current().job.ID; got != cur {
		t.Fatalf("cursor on %s, want %s", got, cur)
	}
	if got := m.jobs.cursor - m.jobs.offset; got != screenRow {
		t.Fatalf("cursor moved on screen from row %d to %d", screenRow, got)
	}
	// The cursor's job leaves: the cursor goes to the one after it.
	after := m.jobs.rows[m.jobs.cursor+1].job.ID
	var without []*engine.Job
	for _, r := range m.jobs.rows {
		if r.job.ID != cur {
			without = append(without, r.job)
		}
	}
	m.loads.seq++
	m.jobs.listSeq = m.loads.seq
	m.Update(listMsg{seq: m.loads.seq, mode: listRefresh, jobs: without})
	if got := m.jobs.current().job.ID; got != after {
		t.Fatalf("cursor on %s after its job left, want %s", got, after)
	}
}

func TestScrollLoadsMore(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 200, 120, 36)
	m.jobs.next = "cursor-1"
	var cmd tea.Cmd
	for range 170 {
		_, cmd = m.Update(keyMsg("j"))
		if m.jobs.loading {
			break
		}
	}
	if !m.jobs.loading || cmd == nil {
		t.Fatalf("no page asked for near the end (cursor %d of %d)", m.jobs.cursor, len(m.jobs.rows))
	}
	cur := m.jobs.current().job.ID
	more := syntheticJobs(400, time.Date(2026, 11, 29, 2, 14, 0, 0, time.UTC))[200:]
	m.Update(listMsg{seq: m.jobs.listSeq, mode: listAppend, jobs: more})
	if len(m.jobs.rows) != 400 || m.jobs.current().job.ID != cur {
		t.Fatalf("append: %d rows, cursor on %s (want %s)", len(m.jobs.rows), m.jobs.current().job.ID, cur)
	}
}

func TestWindowDropsAndReloads(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 2, 14, 0, 0, time.UTC)
	m := New(nil, Options{NoSubscribe: true, Now: func() time.Time { return now }, Window: 600, PageSize: 200})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	all := syntheticJobs(1000, now)
	m.loads.seq++
	m.jobs.listSeq = m.loads.seq
	m.Update(listMsg{seq: m.loads.seq, mode: listReplace, jobs: all[:200], next: "n1"})
	for page := 1; page < 5; page++ {
		m.jobs.cursor = len(m.jobs.rows) - 1
		m.Update(listMsg{seq: m.jobs.listSeq, mode: listAppend, jobs: all[page*200 : (page+1)*200], next: "n"})
	}
	if len(m.jobs.rows) > 600 {
		t.Fatalf("window holds %d rows, want at most 600", len(m.jobs.rows))
	}
	if m.jobs.prev == "" || m.jobs.base == 0 {
		t.Fatalf("dropped rows left no way back: prev %q base %d", m.jobs.prev, m.jobs.base)
	}
	first := m.jobs.rows[0].job.ID
	if first != all[m.jobs.base].ID {
		t.Fatalf("rows[0] = %s, want %s (base %d)", first, all[m.jobs.base].ID, m.jobs.base)
	}
}

func TestSelectAllTurnsActionIntoBulk(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 20, 120, 36)
	m.Update(keyMsg("A"))
	if !m.jobs.selectAll {
		t.Fatal("A did not select all matching")
	}
	_, cmd := m.Update(keyMsg("r"))
	if m.dlg.bulk == nil || m.dlg.bulk.phase != bulkLoading || cmd == nil {
		t.Fatalf("r after A did not start a bulk dry run: %+v", m.dlg.bulk)
	}
	if got := m.dlg.bulk.selector.States; len(got) != 1 || got[0] != engine.StateArchived {
		t.Fatalf("bulk selector states = %v", got)
	}
}

func TestConfirmOnlyWithY(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 5, 120, 36)
	m.Update(keyMsg("d"))
	if m.dlg.confirm == nil {
		t.Fatal("d did not ask")
	}
	for _, k := range []string{"j", "<enter>", "Y", "<space>", "r"} {
		if _, cmd := m.Update(keyMsg(k)); m.dlg.confirm == nil || cmd != nil {
			t.Fatalf("%q answered the confirmation", k)
		}
	}
	if _, cmd := m.Update(keyMsg("y")); m.dlg.confirm != nil || cmd == nil {
		t.Fatal("y did not confirm")
	}
}

func TestApplyChunks(t *testing.T) {
	t.Parallel()
	ctl := &applyRecorder{}
	m := New(ctl, Options{NoSubscribe: true})
	ids := make([]string, 2500)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%04d", i)
	}
	msg := m.applyCmd(engine.ActionRetry, ids)().(actionMsg)
	if msg.err != nil || len(msg.results) != 2500 {
		t.Fatalf("results %d, err %v", len(msg.results), msg.err)
	}
	if fmt.Sprint(ctl.sizes) != "[1000 1000 500]" {
		t.Fatalf("chunks %v, want [1000 1000 500]", ctl.sizes)
	}
}

type applyRecorder struct {
	engine.Control
	sizes []int
}

func (a *applyRecorder) Apply(_ context.Context, _ engine.Action, ids []string) ([]engine.ActionResult, error) {
	a.sizes = append(a.sizes, len(ids))
	out := make([]engine.ActionResult, len(ids))
	for i, id := range ids {
		out[i] = engine.ActionResult{ID: id, OK: true}
	}
	return out, nil
}

// TestLargePayloadIsLazy opens a 16 MiB payload (the store's limit raised
// to it): it is pretty-printed once in a command, and a frame draws only
// the lines on screen.
func TestLargePayloadIsLazy(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.New(t)
	const limit = 16 << 20
	eng, err := engine.New(store, engine.Config{PayloadLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	for i := 0; b.Len() < limit-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"n":%d,"s":"row \u001b[2J %d"}`, i, i)
	}
	b.WriteString(`]}`)
	if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: "big", Queue: "reports", Kind: "report.render", Payload: json.RawMessage(b.String())}); err != nil {
		t.Fatal(err)
	}
	m := New(eng, Options{NoSubscribe: true, State: engine.StateAvailable})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 48})
	runCmd(m, m.loadList(listReplace, "", 0))
	m.Update(keyMsg("<enter>"))
	runCmd(m, m.loadDetail("big", false))
	_, cmd := m.Update(keyMsg("p"))
	if cmd == nil || !m.sheet.payloadLoading {
		t.Fatal("p did not fetch the payload")
	}
	runCmd(m, m.loadDetail("big", true))
	if len(m.sheet.payload) < 100_000 {
		t.Fatalf("payload has %d lines", len(m.sheet.payload))
	}
	// Bytes allocated per frame, not time: a frame that renders (or
	// sanitizes, or copies) the whole payload allocates megabytes; one that
	// renders what fits in the window, a few hundred kilobytes at most.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		m.Update(keyMsg("<ctrl+d>"))
		out := m.View().Content
		if strings.Contains(out, "\x1b[2J") {
			t.Fatal("a payload escape reached the frame")
		}
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / 20
	t.Logf("%d bytes allocated per frame of a %d-byte payload", per, limit)
	if per > 1<<20 {
		t.Fatalf("a frame of a 16 MiB payload allocates %d bytes", per)
	}
}

// runCmd runs a command and the commands its messages lead to, feeding
// every message to the model (batches included), without a program.
func runCmd(m *Model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	msg := cmd()
	switch msg := msg.(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			runCmd(m, c)
		}
	default:
		_, next := m.Update(msg)
		_ = next // follow-ups (sheet, paging) are not needed here
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line    string
		check   func(m *Model) bool
		wantErr string
	}{
		{"quarantine", func(m *Model) bool { return m.screen == scrQuarantine }, ""},
		{"operations", func(m *Model) bool { return m.screen == scrOperations }, ""},
		{"queues", func(m *Model) bool { return m.screen == scrQueues }, ""},
		{"errors", func(m *Model) bool { return m.screen == scrErrors }, ""},
		{"completed", func(m *Model) bool { return m.screen == scrJobs && m.jobs.state() == engine.StateCompleted }, ""},
		{"queue billing", func(m *Model) bool {
			return len(m.jobs.filter.Queues) == 1 && m.jobs.filter.Queues[0] == "billing" && m.jobs.query == "queue:billing"
		}, ""},
		{"filter kind:x error:\"boom\"", func(m *Model) bool { return m.jobs.filter.Error == "boom" }, ""},
		{"theme light", func(m *Model) bool { return m.theme.Palette.Name == "light" }, ""},
		{"theme high-contrast", func(m *Model) bool { return m.theme.Palette.Name == "high-contrast" }, ""},
		{"theme neon", nil, "unknown theme"},
		{"frobnicate", nil, "unknown command"},
		{"queue bad name!", nil, "does not match"},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			t.Parallel()
			m := loadedModel(t, 5, 120, 36)
			_, err := m.runCommand(tc.line)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(m) {
				t.Fatalf("after :%s: err %v, screen %d, filter %+v, theme %s", tc.line, err, m.screen, m.jobs.filter, m.theme.Palette.Name)
			}
		})
	}
}

func TestNoColor(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 2, 14, 0, 0, time.UTC)
	env := func(k string) string {
		if k == "NO_COLOR" {
			return "1"
		}
		return ""
	}
	m := New(nil, Options{NoSubscribe: true, Now: func() time.Time { return now }, Theme: "dark", Getenv: env})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	m.loads.seq++
	m.jobs.listSeq = m.loads.seq
	m.Update(listMsg{seq: m.loads.seq, mode: listReplace, jobs: syntheticJobs(20, now)})
	m.Update(tea.BackgroundColorMsg{}) // a light or dark answer must not bring colour back
	m.Update(keyMsg("<enter>"))
	out := m.View().Content
	if m.theme.Palette.Name != "mono" {
		t.Fatalf("NO_COLOR theme = %s", m.theme.Palette.Name)
	}
	for _, sgr := range []string{"38;", "48;", "[3", "[9"} {
		if i := strings.Index(out, "\x1b"+sgr); i >= 0 {
			t.Fatalf("NO_COLOR frame holds a colour sequence at %d: %q", i, out[i:min(i+20, len(out))])
		}
	}
	if !strings.Contains(out, "\x1b[7m") && !strings.Contains(out, ";7m") {
		t.Fatal("the cursor row is not in reverse video")
	}
}

// On a narrow terminal the header cuts the backend, source and caller
// before the READ-ONLY badge.
func TestHeaderKeepsReadOnlyBadge(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 5, 100, 30)
	m.opts.Source = "sqlite:///var/lib/a/very/long/path/to/the/store/of/this/server/sluice.db"
	m.sess.meta = &engine.Meta{Backend: "sqlite", Role: engine.RoleViewer, Actor: "sam@desk"}
	m.sess.readOnly = true
	title := strings.TrimSpace(ansi.Strip(m.renderTitle(100)))
	if w := ansi.StringWidth(title); w > 100 {
		t.Fatalf("title %d wide: %q", w, title)
	}
	if !strings.HasSuffix(title, "READ-ONLY") || !strings.Contains(title, "sqlite · sqlite:///var") || !strings.Contains(title, "…") {
		t.Fatalf("title %q: want the info cut and the badge kept", title)
	}
}

func TestMouse(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 50, 160, 40)
	wheel := func(b tea.MouseButton, x int) { m.Update(tea.MouseWheelMsg{X: x, Y: 10, Button: b}) }
	click := func(x, y int) { m.Update(tea.MouseClickMsg{X: x, Y: y, Button: tea.MouseLeft}) }

	// Off by default: the terminal keeps the mouse.
	wheel(tea.MouseWheelDown, 10)
	if m.jobs.cursor != 0 || m.View().MouseMode != tea.MouseModeNone {
		t.Fatalf("mouse off: cursor %d, mode %v", m.jobs.cursor, m.View().MouseMode)
	}

	m.opts.Mouse = true
	if m.View().MouseMode != tea.MouseModeCellMotion {
		t.Fatal("mouse on, but the view does not ask for it")
	}
	wheel(tea.MouseWheelDown, 10)
	wheel(tea.MouseWheelDown, 10)
	wheel(tea.MouseWheelUp, 10)
	if m.jobs.cursor != wheelStep {
		t.Fatalf("after two notches down and one up: cursor %d, want %d", m.jobs.cursor, wheelStep)
	}

	// A click on the row drawn on screen line y picks it; find the line
	// of job 7 in the frame itself.
	lines := strings.Split(ansi.Strip(m.View().Content), "\n")
	id := m.jobs.rows[7].job.ID
	y := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, id) })
	if y < 0 {
		t.Fatalf("job %s not on screen", id)
	}
	click(20, y)
	if m.jobs.cursor != 7 || m.sheet.open {
		t.Fatalf("after a click on %s: cursor %d, sheet open %v", id, m.jobs.cursor, m.sheet.open)
	}
	click(20, y)
	if !m.sheet.open {
		t.Fatal("a second click on the picked row did not open it")
	}
	// The wheel over the sheet scrolls it, not the list.
	wheel(tea.MouseWheelDown, 159)
	if m.jobs.cursor != 7 || m.sheet.scroll != wheelStep {
		t.Fatalf("wheel over the sheet: cursor %d, sheet scroll %d", m.jobs.cursor, m.sheet.scroll)
	}
	// A click below the rows, or on the header, picks nothing.
	click(20, 39)
	click(20, m.bodyTop())
	if m.jobs.cursor != 7 {
		t.Fatalf("clicks off the rows moved the cursor to %d", m.jobs.cursor)
	}

	// A click on a state tab switches to it.
	tabs := ansi.Strip(lines[1])
	x := ansi.StringWidth(tabs[:strings.Index(tabs, "completed")]) + 2
	click(x, 1)
	if got := engine.AllStates[m.jobs.tab]; got != engine.StateCompleted {
		t.Fatalf("clicked the completed tab (x=%d in %q): tab %s", x, tabs, got)
	}
}

// TestSlowLoadsShownUnderLiveChanges: a load slower than the refresh
// delay (error groups of a million dead jobs on PostgreSQL take a second)
// is not made stale by the live refreshes that come in meanwhile: they
// wait for it, its answer is shown, and the reload that follows waits as
// long as the load took, so the store is kept at most half busy.
func TestSlowLoadsShownUnderLiveChanges(t *testing.T) {
	t.Parallel()
	m := loadedModel(t, 10, 120, 36)
	clock := time.Date(2026, 11, 29, 2, 14, 0, 0, time.UTC)
	m.opts.Now = func() time.Time { return clock }
	m.switchScreen(scrErrors)
	first := m.loads.screenSeq
	m.loadCounts()
	firstCounts := m.loads.countsSeq
	// Three live refreshes while both loads are on their way.
	for range 3 {
		m.Update(refreshTickMsg{})
	}
	if m.loads.screenSeq != first || m.loads.countsSeq != firstCounts {
		t.Fatalf("live refreshes sent new loads over the ones on their way (screen seq %d → %d, counts %d → %d)",
			first, m.loads.screenSeq, firstCounts, m.loads.countsSeq)
	}
	clock = clock.Add(time.Second) // the groups took a second
	gs := []engine.ErrorGroup{{Queue: "billing", Kind: "invoice.generate", Pattern: "dial tcp <addr>: connect: connection refused", Count: 1_000_000}}
	_, cmd := m.Update(groupsMsg{seq: first, groups: gs})
	if len(m.lists.groups.data) != 1 || m.lists.groups.data[0].Count != 1_000_000 {
		t.Fatalf("the slow answer was not shown: %+v", m.lists.groups.data)
	}
	if cmd == nil || !m.loads.screenAgain || !m.loads.screenTick {
		t.Fatal("no reload was set up, though changes came in while the load ran")
	}
	if m.loads.screenSeq != first {
		t.Fatal("the reload after a one-second load was sent at once")
	}
	// More changes during the pause send nothing either.
	clock = clock.Add(500 * time.Millisecond)
	m.Update(refreshTickMsg{})
	if m.loads.screenSeq != first {
		t.Fatal("a live refresh during the pause sent a load")
	}
	clock = clock.Add(500 * time.Millisecond)
	m.Update(screenTickMsg{})
	if m.loads.screenSeq == first || !m.loads.screenBusy || m.loads.screenAgain {
		t.Fatal("the end of the pause sent no load")
	}
	c := &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: 1_000_000}}
	m.Update(countsMsg{seq: firstCounts, counts: c})
	if m.tally.counts != c {
		t.Fatal("the slow counts answer was not taken")
	}
	if m.loads.countsSeq == firstCounts || !m.loads.countsBusy {
		t.Fatal("no counts load followed the answer")
	}
	// The follow-up answers, with no changes meanwhile, end the chain.
	m.Update(groupsMsg{seq: m.loads.screenSeq, groups: gs})
	m.Update(countsMsg{seq: m.loads.countsSeq, counts: c})
	if m.loads.screenBusy || m.loads.countsBusy || m.loads.screenAgain {
		t.Fatal("a load is still marked on its way after every answer came")
	}
	// A fast answer (no time passed) leaves no pause.
	seq := m.loads.screenSeq
	m.Update(refreshTickMsg{})
	if m.loads.screenSeq == seq {
		t.Fatal("a live refresh with nothing on its way and no pause sent no load")
	}
}

// TestUntouchedListFollowsTheTop: until the operator presses a key on a
// freshly loaded list, live refreshes keep the cursor on the newest job
// at the top; the console opened on a demo still being seeded sat on the
// first job it saw, "99 of 99 · ↑ 93 newer" (found walking the console).
func TestUntouchedListFollowsTheTop(t *testing.T) {
	t.Parallel()
	m, jobs, refresh, newJob := liveList(t)
	refresh(newJob(2), newJob(1))
	if m.jobs.cursor != 0 || m.jobs.offset != 0 || m.jobs.current().job.ID != "new-2" {
		t.Fatalf("untouched list: cursor %d offset %d on %s, want the newest at the top", m.jobs.cursor, m.jobs.offset, m.jobs.current().job.ID)
	}
	if s := ansi.Strip(m.statusLine(120)); strings.Contains(s, "newer") {
		t.Fatalf("status %q: nothing arrived above the cursor", s)
	}
	m.Update(keyMsg("j"))
	m.Update(keyMsg("k"))
	*jobs = append([]*engine.Job{newJob(2), newJob(1)}, *jobs...)
	refresh(newJob(3))
	if m.jobs.current().job.ID != "new-2" || !strings.Contains(ansi.Strip(m.statusLine(120)), "↑ 1 newer") {
		t.Fatalf("touched list: cursor on %s, status %q; want it kept on new-2", m.jobs.current().job.ID, ansi.Strip(m.statusLine(120)))
	}
}

// liveList is a loaded list of 100 jobs with what a live refresh test
// needs: the jobs the store holds, a refresh that lands fresh ones above
// them, and a job newer than them all for each i.
func liveList(t *testing.T) (*Model, *[]*engine.Job, func(...*engine.Job), func(int) *engine.Job) {
	m := loadedModel(t, 100, 120, 36)
	now := time.Date(2026, 11, 29, 2, 14, 0, 0, time.UTC)
	jobs := syntheticJobs(100, now)
	refresh := func(fresh ...*engine.Job) {
		t.Helper()
		m.loads.seq++
		m.jobs.listSeq = m.loads.seq
		m.Update(listMsg{seq: m.loads.seq, mode: listRefresh, jobs: append(fresh, jobs...)})
	}
	newJob := func(i int) *engine.Job {
		return &engine.Job{ID: fmt.Sprintf("new-%d", i), Queue: "billing", Kind: "k", State: engine.StateArchived,
			StateChangedAt: now.Add(time.Duration(i) * time.Second)}
	}
	return m, &jobs, refresh, newJob
}
