package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// The bulk dialog over every order of the messages it sees.
//
// A bulk retry of an error group, started from the error groups screen
// under a finalized< filter, was reported taking keys while nothing of
// it was on screen for the length of its run. The explorer below drives
// the real model through every order of what the dialog meets on its way
// (its dry run's answer, y, the answer that starts the run, its polls,
// esc, b, stray keys, the list's live refreshes and their answers, stale
// answers, a terminal shrunk and grown, the input line, an editor) and
// checks after each message that what takes the keys is what the frame
// shows on top, and that a run the console holds is on screen. The
// answers are the real store's, read once; each is fed when the order
// says, under the tag its request carried, so stale ones are dropped as
// they are in a running console.

// orderWorld holds the store's answers the orders are made of.
type orderWorld struct {
	f       *fixture
	filter  engine.Filter // the jobs list's filter: finalized<
	groups  []engine.ErrorGroup
	after   []engine.ErrorGroup // the groups once the run is done
	group   engine.ErrorGroup   // the group the run retries
	preview *engine.BulkResult
	started *engine.BulkResult
	running *engine.Operation
	done    *engine.Operation
	counts  *engine.Counts
	rows    []*engine.Job // the jobs list under the filter
	edit    editReadyMsg  // the built-in editor's answer for rows[0]
	builtin bool          // the console edits in its built-in editor
	t0      time.Time     // the console's clock at the start of each order
}

func newOrderWorld(t *testing.T) *orderWorld {
	t.Helper()
	ctx := context.Background()
	f := setup(t, false)
	before := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	w := &orderWorld{f: f, filter: engine.Filter{FinalizedBefore: &before}, builtin: true, t0: time.Now().Add(5 * time.Minute)}
	scope := w.filter
	scope.States = []engine.State{engine.StateArchived}
	var err error
	if w.groups, err = f.eng.ErrorGroups(ctx, scope); err != nil || len(w.groups) == 0 {
		t.Fatalf("error groups: %v %v", w.groups, err)
	}
	w.group = w.groups[0]
	if w.preview, err = f.eng.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: w.group.Selector, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if w.started, err = f.eng.Bulk(ctx, engine.BulkParams{Plan: w.preview.Plan, RatePerSecond: 5}); err != nil {
		t.Fatal(err)
	}
	if w.counts, err = f.eng.Counts(ctx, ""); err != nil {
		t.Fatal(err)
	}
	page, err := f.eng.ListJobs(ctx, engine.ListJobsParams{Filter: scope, Limit: engine.MaxListLimit})
	if err != nil || len(page.Jobs) == 0 {
		t.Fatalf("list: %v %v", page, err)
	}
	w.rows = page.Jobs
	d, err := f.eng.GetJob(ctx, w.rows[0].ID, true)
	if err != nil {
		t.Fatal(err)
	}
	w.edit = editReadyMsg{mode: editPayload, id: d.Job.ID, version: d.Job.Version, orig: []byte(editableJSON(prettyJSON(d.Job.Payload)))}
	// Halfway: the operation as a poll reads it while it runs.
	run := *w.started.Operation
	run.Status, run.StartedAt, run.Processed, run.Succeeded = engine.OperationRunning, &run.CreatedAt, run.Matched/2, run.Matched/2
	w.running = &run
	if _, err := f.eng.RunOperation(ctx); err != nil {
		t.Fatal(err)
	}
	if w.done, err = f.eng.Operation(ctx, w.started.Operation.ID); err != nil || w.done.Status != engine.OperationCompleted {
		t.Fatalf("the run did not complete: %+v %v", w.done, err)
	}
	if w.after, err = f.eng.ErrorGroups(ctx, scope); err != nil {
		t.Fatal(err)
	}
	return w
}

// orderRun is one order being played: the model and the answers its
// requests wait for, each under the tag the request carried (0: none).
type orderRun struct {
	w     *orderWorld
	m     *Model
	clock time.Time // the console's clock: it moves only when an order says

	drySeq, dryLast     uint64
	startSeq, startLast uint64
	pollSeq, tickSeq    uint64
	screens             []uint64 // screen loads on their way, oldest first
	screenLast          uint64
	countsSeq           uint64
	countsLast          uint64
	listSeq, listLast   uint64
	editSeq, editLast   uint64
	startedSeq          uint64 // the dialog whose run an answer started
}

const orderW, orderH = 120, 36

// newOrderRun opens the console on the error groups screen under the
// filter, its groups read.
func (w *orderWorld) newOrderRun(t *testing.T) *orderRun {
	r := &orderRun{w: w, clock: w.t0}
	o := testOptions()
	o.NoSubscribe = true
	o.BuiltinEditor = w.builtin
	o.Now = func() time.Time { return r.clock }
	m := New(w.f.eng, o)
	t.Cleanup(m.Close)
	r.m = m
	m.Update(tea.WindowSizeMsg{Width: orderW, Height: orderH})
	m.jobs.setFilter(w.filter.String(), w.filter)
	m.switchScreen(scrErrors)
	r.observe()
	r.answerScreen(len(r.screens) - 1)
	return r
}

// observe notes the requests the last message made.
func (r *orderRun) observe() {
	m := r.m
	if b := m.dlg.bulk; b != nil {
		if b.phase == bulkLoading && b.seq != r.dryLast {
			r.drySeq, r.dryLast = b.seq, b.seq
		}
		if b.phase == bulkStarting && b.seq != r.startLast {
			r.startSeq, r.startLast = b.seq, b.seq
		}
	}
	if m.loads.screenBusy && m.loads.screenSeq != r.screenLast {
		r.screens = append(r.screens, m.loads.screenSeq)
		r.screenLast = m.loads.screenSeq
	}
	if m.loads.countsSeq != r.countsLast {
		r.countsSeq, r.countsLast = m.loads.countsSeq, m.loads.countsSeq
	}
	if m.jobs.listSeq != r.listLast {
		r.listSeq, r.listLast = m.jobs.listSeq, m.jobs.listSeq
	}
	if m.edit.opening && m.edit.seq != r.editLast {
		r.editSeq, r.editLast = m.edit.seq, m.edit.seq
	}
}

func (r *orderRun) feed(msg tea.Msg) {
	r.m.Update(msg)
	r.observe()
}

func (r *orderRun) answerScreen(i int) {
	seq := r.screens[i]
	r.screens = append(r.screens[:i:i], r.screens[i+1:]...)
	groups := r.w.groups
	if r.m.dlg.bulk != nil && r.m.dlg.bulk.op != nil && opDone(r.m.dlg.bulk.op.Status) {
		groups = r.w.after
	}
	r.feed(groupsMsg{seq: seq, groups: groups})
}

// orderEvent is one thing that may happen next.
type orderEvent struct {
	name string
	ok   func(r *orderRun) bool
	do   func(r *orderRun)
}

func always(*orderRun) bool { return true }

func keyEvent(k string) orderEvent {
	return orderEvent{name: k, ok: always, do: func(r *orderRun) { r.feed(keyMsg(k)) }}
}

var orderEvents = []orderEvent{
	keyEvent("b"),
	keyEvent("y"),
	keyEvent("<esc>"),
	keyEvent("j"),
	keyEvent("/"),
	keyEvent("e"),
	{"dry run answers", func(r *orderRun) bool { return r.drySeq != 0 }, func(r *orderRun) {
		res := *r.w.preview
		r.feed(bulkPreviewMsg{seq: r.drySeq, res: &res, at: r.m.now()})
		r.drySeq = 0
	}},
	{"run starts", func(r *orderRun) bool { return r.startSeq != 0 }, func(r *orderRun) {
		seq := r.startSeq
		res := *r.w.started
		op := *res.Operation
		res.Operation = &op
		r.feed(bulkStartedMsg{seq: seq, res: &res})
		r.startSeq = 0
		if b := r.m.dlg.bulk; b != nil && b.seq == seq && b.op != nil {
			r.startedSeq, r.pollSeq = seq, seq
		}
	}},
	{"run fails to start", func(r *orderRun) bool { return r.startSeq != 0 }, func(r *orderRun) {
		r.feed(bulkStartedMsg{seq: r.startSeq, err: fmt.Errorf("POST /jobs/bulk: %w", context.DeadlineExceeded)})
		r.startSeq = 0
	}},
	{"poll: running", func(r *orderRun) bool { return r.pollSeq != 0 }, func(r *orderRun) { r.poll(r.w.running) }},
	{"poll: done", func(r *orderRun) bool { return r.pollSeq != 0 }, func(r *orderRun) { r.poll(r.w.done) }},
	{"poll fails", func(r *orderRun) bool { return r.pollSeq != 0 }, func(r *orderRun) { r.poll(nil) }},
	{"poll tick", func(r *orderRun) bool { return r.tickSeq != 0 }, func(r *orderRun) {
		seq := r.tickSeq
		r.feed(opTickMsg{seq: seq})
		r.tickSeq = 0
		if b := r.m.dlg.bulk; b != nil && b.seq == seq && b.op != nil {
			r.pollSeq = seq
		}
	}},
	// A change heard: the console's live refresh of what it shows.
	{"live refresh", always, func(r *orderRun) { r.feed(refreshTickMsg{}) }},
	{"screen answers", func(r *orderRun) bool { return len(r.screens) > 0 }, func(r *orderRun) { r.answerScreen(len(r.screens) - 1) }},
	{"stale screen answers", func(r *orderRun) bool { return len(r.screens) > 1 }, func(r *orderRun) { r.answerScreen(0) }},
	{"counts answer", func(r *orderRun) bool { return r.countsSeq != 0 }, func(r *orderRun) {
		r.feed(countsMsg{seq: r.countsSeq, counts: r.w.counts})
		r.countsSeq = 0
	}},
	{"list answers", func(r *orderRun) bool { return r.listSeq != 0 }, func(r *orderRun) {
		m := r.m
		r.feed(listMsg{seq: r.listSeq, mode: m.jobs.loadMode, jobs: r.w.rows, filter: m.jobs.effectiveFilter()})
		r.listSeq = 0
	}},
	{"editor ready", func(r *orderRun) bool { return r.editSeq != 0 }, func(r *orderRun) {
		msg := r.w.edit
		msg.seq = r.editSeq
		r.feed(msg)
		r.editSeq = 0
	}},
	// The clock: a slow load paces the next live reload of the screen
	// (reloadScreen), which then waits for a tick.
	{"a second passes", always, func(r *orderRun) { r.clock = r.clock.Add(time.Second) }},
	{"screen tick", func(r *orderRun) bool { return r.m.loads.screenTick }, func(r *orderRun) { r.feed(screenTickMsg{}) }},
	{"terminal shrinks", func(r *orderRun) bool { return !r.m.tooSmall() }, func(r *orderRun) {
		r.feed(tea.WindowSizeMsg{Width: 50, Height: 10})
	}},
	{"terminal grows", func(r *orderRun) bool { return r.m.tooSmall() }, func(r *orderRun) {
		r.feed(tea.WindowSizeMsg{Width: orderW, Height: orderH})
	}},
}

func (r *orderRun) poll(op *engine.Operation) {
	seq := r.pollSeq
	msg := opPollMsg{seq: seq, at: r.m.now()}
	if op == nil {
		msg.err = fmt.Errorf("GET /operations: %w", errors.New("connection refused"))
	} else {
		c := *op
		msg.op = &c
	}
	r.feed(msg)
	r.pollSeq = 0
	if b := r.m.dlg.bulk; b != nil && b.seq == seq && b.op != nil && !opDone(b.op.Status) {
		r.tickSeq = seq
	}
}

// state abstracts what the checks and the next events depend on: two
// orders that reach the same state need not both be followed on.
func (r *orderRun) state() string {
	m := r.m
	s := fmt.Sprintf("top%d scr%d small%v in%v ed%v eo%v dlg%v help%v groups%d rows%d ok%v | dry%v start%v poll%v tick%v screens%d counts%v list%v edit%v",
		m.top(), m.screen, m.tooSmall(), m.dlg.input != nil, m.edit.editor != nil, m.edit.opening, m.dlg.confirm != nil, m.dlg.help.open,
		len(m.lists.groups.data), len(m.jobs.rows), m.dlg.bulk != nil && m.dlg.bulk.seq == r.startedSeq,
		r.drySeq != 0, r.startSeq != 0, r.pollSeq != 0, r.tickSeq != 0, len(r.screens), r.countsSeq != 0, r.listSeq != 0, r.editSeq != 0)
	if b := m.dlg.bulk; b != nil {
		s += fmt.Sprintf(" | bulk phase%d visible%v cancelling%v stale%v", b.phase, b.visible, b.cancelling, b.stale)
		if b.op != nil {
			s += " op " + string(b.op.Status)
		}
	}
	return s
}

// check holds the model to what the screen must show.
func (r *orderRun) check() error {
	m := r.m
	frame := ansi.Strip(m.Render())
	title := "Bulk " + string(engine.ActionRetry) + " — "
	drawn := strings.Contains(frame, title)
	top := m.top()
	switch {
	case top == layerBulk && !drawn:
		return fmt.Errorf("keys go to the bulk dialog, and the frame does not show it")
	case top != layerBulk && drawn:
		return fmt.Errorf("the frame shows the bulk dialog, and keys go to layer %d", top)
	}
	// A run the console holds, hidden, is said: in the status line, or
	// by the too-small notice.
	if b := m.dlg.bulk; b != nil && !b.visible && (b.phase == bulkStarting || (b.op != nil && !opDone(b.op.Status))) {
		lines := strings.Split(frame, "\n")
		where := lines[len(lines)-1]
		if top == layerSmall {
			where = strings.Join(strings.Fields(frame), " ")
		}
		if !strings.Contains(strings.ToLower(where), "bulk retry") {
			return fmt.Errorf("a hidden run (phase %d) is not said on screen:\n%s", b.phase, frame)
		}
	}
	if b := m.dlg.bulk; b != nil && b.seq == r.startedSeq && strings.Contains(frame, "starting…") {
		return fmt.Errorf("the run started, and the dialog still says starting…")
	}
	return nil
}

// explore plays the orders of the events breadth first from first, up
// to depth events, going on from each abstract state (state) once: the
// orders that reach a state already gone on from are checked, not
// extended. It returns how many orders it played and the first that
// breaks a check.
func (w *orderWorld) explore(t *testing.T, first []string, depth int) (int, []string, error) {
	t.Helper()
	seen := map[string]bool{}
	queue := [][]string{first}
	played := 0
	for len(queue) > 0 {
		order := queue[0]
		queue = queue[1:]
		r := w.play(t, order...)
		played++
		if err := r.check(); err != nil {
			return played, order, err
		}
		st := r.state()
		if seen[st] || len(order) >= depth {
			continue
		}
		seen[st] = true
		for _, e := range orderEvents {
			if e.ok(r) {
				queue = append(queue, append(append([]string{}, order...), e.name))
			}
		}
	}
	return played, nil, nil
}

// TestBulkDialogDrawnWheneverItTakesKeys: over every order of what the
// bulk dialog meets, from the error groups screen under a finalized<
// filter, what takes the keys is what is drawn on top, and a run the
// console holds is on screen. An answer that made a hidden dialog
// visible again (a run that failed to start) while the input line or the
// built-in editor had the keys drew it over them: keys typed at what
// looked like the dialog went to the editor beneath it.
func TestBulkDialogDrawnWheneverItTakesKeys(t *testing.T) {
	t.Parallel()
	w := newOrderWorld(t)
	// Orders of up to 11 events: some 16,000 played in seconds. Under the
	// race detector, ten times slower, up to 9 (some 6,800), which still
	// take the dialog through starting, hidden, failed, running and done
	// beside the refreshes, the resizes, the input line and the editor.
	depth := 11
	if raceDetector {
		depth = 9
	}
	played, order, err := w.explore(t, []string{"b"}, depth)
	if err != nil {
		r := w.play(t, order...)
		t.Fatalf("after %s: %v\n%s", strings.Join(order, ", "), err, ansi.Strip(r.m.Render()))
	}
	t.Logf("%d orders played", played)
}

// play runs an order by its events' names.
func (w *orderWorld) play(t *testing.T, order ...string) *orderRun {
	t.Helper()
	r := w.newOrderRun(t)
	for i, name := range order {
		found := false
		for _, e := range orderEvents {
			if e.name == name {
				if !e.ok(r) {
					t.Fatalf("event %q is not possible at step %d", name, i)
				}
				e.do(r)
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("no event %q", name)
		}
	}
	return r
}

// TestFailedStartWaitsForWhatHasTheKeys: a run hidden while it starts
// that then fails to start shows its failure even hidden, but not over
// the input line or the built-in editor that has the keys (it was drawn
// over them, and what was typed at it went beneath): it waits for them
// to close, and is on screen with the keys once they have.
func TestFailedStartWaitsForWhatHasTheKeys(t *testing.T) {
	t.Parallel()
	w := newOrderWorld(t)
	for _, tc := range []struct {
		name  string
		order []string
		over  func(*Model) bool
	}{
		{"input line", []string{"b", "dry run answers", "y", "<esc>", "/", "run fails to start"},
			func(m *Model) bool { return m.dlg.input != nil }},
		{"editor", []string{"b", "dry run answers", "y", "<esc>", "<esc>", "list answers", "e", "editor ready", "run fails to start"},
			func(m *Model) bool { return m.edit.editor != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := w.play(t, tc.order...)
			if !tc.over(r.m) || r.m.dlg.bulk == nil || r.m.dlg.bulk.phase != bulkFailed || !r.m.dlg.bulk.visible {
				t.Fatalf("the order did not end with a failed start behind the %s: %s", tc.name, r.state())
			}
			if err := r.check(); err != nil {
				t.Fatalf("%v\n%s", err, ansi.Strip(r.m.Render()))
			}
			r.feed(keyMsg("<esc>")) // closes the input line, or the editor that holds no change
			if r.m.top() != layerBulk || !strings.Contains(ansi.Strip(r.m.Render()), "Bulk retry — failed") {
				t.Fatalf("the failed start is not on screen with the keys once the %s closed:\n%s", tc.name, ansi.Strip(r.m.Render()))
			}
		})
	}
}
