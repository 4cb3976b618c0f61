package tui

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
)

// Waiting workflows in the console: what a waiting job waits for, the
// children of a parent with their states, and a signal sent from the
// command line. The fixture writes the waits through the Store contract
// with fixed times, so the screens are deterministic.

// waitFixture is a store with par-1, a parent waiting for its three
// children (one completed, one archived, one available), and sig-1,
// waiting for the signal "approved".
func waitFixture(t *testing.T) (*engine.Engine, backend.Store) {
	t.Helper()
	return waitFixtureWith(t, false)
}

// waitFixtureWith is waitFixture, with nap-1 too when sleeper: sleeping
// until 2030-01-02 14:05, its signal name and step name escapes to show.
func waitFixtureWith(t *testing.T, sleeper bool) (*engine.Engine, backend.Store) {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"par-1", "sig-1"}
	if sleeper {
		ids = append(ids, "nap-1")
	}
	for _, id := range ids {
		if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "orders", Kind: "order.flow", Payload: json.RawMessage(`{"order":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	children := []string{engine.ChildID("par-1", 1, 0), engine.ChildID("par-1", 1, 1), engine.ChildID("par-1", 1, 2)}
	for _, id := range children {
		if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "pages", Kind: "page.render", Payload: json.RawMessage(`{"page":1}`), MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(queue, kind, id string) *engine.Job {
		t.Helper()
		res, err := store.JobClaim(ctx, &backend.JobClaimParams{Queue: queue, WorkerID: testWorker, LeaseID: "lease-" + id,
			Limit: 1, Kinds: map[string]int{kind: 1}, LeaseDuration: time.Hour})
		if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != id {
			t.Fatalf("claim %s: %v %v", id, res, err)
		}
		return res.Jobs[0]
	}
	finish := func(j *engine.Job, o backendtest.Outcome, cp *engine.Checkpoint) {
		t.Helper()
		o.JobRef = backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence}
		p := o.Plan(j)
		if cp != nil {
			raw, err := cp.Encode()
			if err != nil {
				t.Fatal(err)
			}
			p.Checkpoint = &backend.CheckpointWrite{Checkpoint: raw}
		}
		if _, err := store.JobFinish(ctx, p); err != nil {
			t.Fatalf("finish %s: %v", j.ID, err)
		}
	}
	until := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	spawn := engine.StepRecord{Name: "spawn", State: engine.StepCompleted, Result: json.RawMessage(`[]`), Attempts: 1, Duration: 8 * time.Millisecond}
	finish(claim("orders", "order.flow", "par-1"), backendtest.Outcome{To: engine.StateScheduled, Delay: time.Hour, Event: engine.EventWaiting, Actor: testWorker, Message: "children 1/3 done"},
		&engine.Checkpoint{Version: 1, Children: children, Steps: []engine.StepRecord{spawn, {Name: "all", State: engine.StepWaiting, Attempts: 1}},
			Wait: &engine.Wait{Kind: engine.WaitKindChildren, Step: 2, Name: "all", Children: children, Done: 1, Until: until}})
	finish(claim("orders", "order.flow", "sig-1"), backendtest.Outcome{To: engine.StateScheduled, Delay: time.Hour, Event: engine.EventWaiting, Actor: testWorker, Message: `signal "approved"`},
		&engine.Checkpoint{Version: 1, Steps: []engine.StepRecord{{Name: "approved", State: engine.StepWaiting, Attempts: 1}},
			Wait: &engine.Wait{Kind: engine.WaitKindSignal, Step: 1, Name: "approved", Signal: "approved", Until: until}})
	if sleeper {
		finish(claim("orders", "order.flow", "nap-1"), backendtest.Outcome{To: engine.StateScheduled, Delay: time.Hour, Event: engine.EventWaiting, Actor: testWorker},
			&engine.Checkpoint{Version: 1, Steps: []engine.StepRecord{{Name: "nap\x1b[31m", State: engine.StepWaiting, Attempts: 1}},
				Wait: &engine.Wait{Kind: engine.WaitKindSleep, Step: 1, Name: "nap\x1b[31m", Until: time.Date(2030, 1, 2, 14, 5, 0, 0, time.UTC)}})
	}
	finish(claim("pages", "page.render", children[0]), backendtest.Outcome{To: engine.StateCompleted}, nil)
	finish(claim("pages", "page.render", children[1]), backendtest.Outcome{To: engine.StateArchived, Reason: engine.ReasonAttemptsExhausted,
		Charge: backend.ChargeAttempt, Event: engine.EventArchived, Error: &engine.AttemptError{Message: "font missing"}}, nil)
	return eng, store
}

// TestWaitingSheetAndChildren: the parent's sheet says it waits for its
// children, done/total, and lists them with their states; enter on the
// links follows the first child.
func TestWaitingSheetAndChildren(t *testing.T) {
	eng, _ := waitFixture(t)
	s := start(t, eng, testOptions())
	s.keys(":")
	s.typeText("scheduled")
	s.keys("<enter>")
	s.waitFor("par-1", "sig-1")
	s.keys(":")
	s.typeText("filter id:par-1")
	s.keys("<enter>")
	// The filtered list loads before enter opens its row: an enter in
	// the reload's gap finds no row, on a loaded machine ("1 of 1" is
	// the loaded list's footer; the list before it said "1 of 2").
	s.waitFor("1 of 1")
	s.keys("<enter>")
	screen := s.waitFor("job par-1", "waits for", "children 1/3 done (step 2 all)", "…  2 all", "par-1~s1.1 · archived")
	for _, want := range []string{"par-1~s1.0 · completed", "par-1~s1.2 · available"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("the sheet does not list %q:\n%s", want, screen)
		}
	}
	s.goldenAs("parent", screen)
	// ] to the links section (no errors section here), and enter
	// follows the first child.
	s.keys("]", "]", "]", "]")
	s.waitFor("enter follows par-1~s1.0")
	s.keys("<enter>")
	s.waitFor("job par-1~s1.0", "completed")
}

// TestSignalFromCommandLine: :signal on the sheet of a job waiting for
// that signal sends it with its payload, and the job is woken.
func TestSignalFromCommandLine(t *testing.T) {
	eng, store := waitFixture(t)
	s := start(t, eng, testOptions())
	s.keys(":")
	s.typeText("filter id:sig-1")
	s.keys("<enter>")
	s.keys(":")
	s.typeText("scheduled")
	s.keys("<enter>")
	s.waitFor("sig-1")
	s.keys("<enter>")
	screen := s.waitFor("job sig-1", "waits for", `signal "approved" (timeout 2030-01-`, "01T00:00:00Z) (step 1 approved)")
	s.goldenAs("waiting", screen)
	s.keys(":")
	s.typeText(`signal approved {"by":"maya"}`)
	s.keys("<enter>")
	s.waitFor("signal approved sent to sig-1")
	j, err := store.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: "sig-1"})
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := store.SignalList(context.Background(), &backend.SignalListParams{JobID: "sig-1"})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != engine.StateAvailable || len(sigs) != 1 || string(sigs[0].Payload) != `{"by":"maya"}` {
		t.Fatalf("after :signal: %s with signals %+v, want available with the payload buffered", j.State, sigs)
	}
	s.keys(":")
	s.typeText(`signal approved {"by":`)
	s.keys("<enter>")
	s.waitFor("the payload is not JSON")
}

// TestWaitingRows: the list says what each waiting job waits for — its
// children done/total, its signal's name, the time its sleep ends — in
// the row's last column, job data escaped.
func TestWaitingRows(t *testing.T) {
	eng, _ := waitFixtureWith(t, true)
	s := start(t, eng, testOptions())
	s.keys(":")
	s.typeText("scheduled")
	s.keys("<enter>")
	screen := s.waitFor("⏸ children 1/3", "⏸ signal approved", "⏸ until 2030-01-02 14:05")
	s.goldenAs("rows", screen)
}

// TestChildrenCursor: with the links in focus, J/K pick a child, enter
// follows the one picked, and esc comes back to the parent's sheet with
// the same child picked; esc again closes the sheet.
func TestChildrenCursor(t *testing.T) {
	eng, _ := waitFixture(t)
	s := start(t, eng, testOptions())
	s.keys(":")
	s.typeText("filter id:par-1")
	s.keys("<enter>")
	s.keys(":")
	s.typeText("scheduled")
	s.keys("<enter>")
	s.waitFor("par-1")
	s.keys("<enter>")
	s.waitFor("job par-1", "par-1~s1.2 · available")
	s.keys("l") // from the top of the sheet, one key
	s.waitFor("› child        par-1~s1.0", "enter follows par-1~s1.0 (1 of 3) · l next")
	s.keys("J")
	screen := s.waitFor("enter follows par-1~s1.1")
	s.goldenAs("picked", screen)
	s.keys("J", "J", "K") // the cursor stops at the last child
	s.waitFor("enter follows par-1~s1.1")
	s.keys("<enter>")
	s.waitFor("job par-1~s1.1", "archived", "font missing", "par-1 · spawned this job")
	// The child links back to its parent.
	s.keys("l")
	s.waitFor("› parent       par-1", "enter follows par-1")
	s.keys("<enter>")
	s.waitFor("job par-1", "children 1/3 done")
	s.keys("<esc>")
	s.keys("<esc>")
	s.waitFor("children 1/3 done", "› child        par-1~s1.1 · archived", "enter follows par-1~s1.1")
	s.keys("<esc>")
	s.waitGone("children 1/3 done")
}

// TestSignalFromEditor: s on the sheet of a job waiting for a signal
// opens the signal's payload in the editor (the built-in one here, as
// over SSH), a payload that is not JSON stays there with the reason, the
// edited one is shown in a confirmation, and y delivers it: the job is
// woken with the edited payload buffered.
func TestSignalFromEditor(t *testing.T) {
	eng, store := waitFixture(t)
	opts := testOptions()
	opts.BuiltinEditor = true
	s := start(t, eng, opts)
	s.keys(":")
	s.typeText("filter id:sig-1")
	s.keys("<enter>")
	s.keys(":")
	s.typeText("scheduled")
	s.keys("<enter>")
	s.waitFor("sig-1")
	s.keys("<enter>")
	s.waitFor("job sig-1", "s sends it (payload in the editor)")
	s.keys("s")
	s.goldenAs("editor", s.waitFor("Payload of the signal approved to sig-1", "ctrl+s save"))
	// Not JSON: the reason, in the editor.
	s.keys("<right>", ",", "<ctrl+s>")
	s.waitFor("not valid JSON", "Payload of the signal approved to sig-1")
	s.keys("<backspace>")
	s.typeText(`"by":"maya"`)
	s.keys("<ctrl+s>")
	s.goldenAs("confirm", s.waitFor("Send the signal approved to sig-1?", `"by": "maya"`))
	sigs, err := store.SignalList(context.Background(), &backend.SignalListParams{JobID: "sig-1"})
	if err != nil || len(sigs) != 0 {
		t.Fatalf("before y: signals %+v (%v), want none sent", sigs, err)
	}
	s.keys("y")
	s.waitFor("signal approved sent to sig-1")
	j, err := store.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: "sig-1"})
	if err != nil {
		t.Fatal(err)
	}
	sigs, err = store.SignalList(context.Background(), &backend.SignalListParams{JobID: "sig-1"})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != engine.StateAvailable || len(sigs) != 1 || string(sigs[0].Payload) != `{"by":"maya"}` {
		t.Fatalf("after y: %s with signals %+v, want available with the edited payload buffered", j.State, sigs)
	}
}

// TestWaitCellEscapes: a row's wait text is job data: a signal name that
// carries escape sequences is shown escaped, and each kind reads as the
// list shows it.
func TestWaitCellEscapes(t *testing.T) {
	now := time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		w    engine.WaitSummary
		want string
	}{
		{engine.WaitSummary{Kind: engine.WaitKindSignal, Signal: "pay\x1b]52;c;aGk=\x07ment"}, "⏸ signal pay" + termtext.Line("\x1b]52;c;aGk=\x07") + "ment"},
		{engine.WaitSummary{Kind: engine.WaitKindSleep, Until: time.Date(2030, 1, 2, 14, 5, 0, 0, time.UTC)}, "⏸ until 14:05:00"},
		{engine.WaitSummary{Kind: engine.WaitKindSleep, Until: time.Date(2030, 1, 3, 14, 5, 0, 0, time.UTC)}, "⏸ until 2030-01-03 14:05"},
		{engine.WaitSummary{Kind: engine.WaitKindChildren, Done: 97, Total: 100}, "⏸ children 97/100"},
	} {
		got := waitCell(&engine.Job{State: engine.StateScheduled, Wait: &c.w}, now)
		if got != c.want || strings.ContainsAny(got, "\x1b\x07") {
			t.Errorf("waitCell(%+v) = %q, want %q", c.w, got, c.want)
		}
	}
	if got := waitCell(&engine.Job{State: engine.StateAvailable, Wait: &engine.WaitSummary{Kind: engine.WaitKindSleep}}, now); got != "" {
		t.Errorf("a job no longer scheduled shows %q, want nothing", got)
	}
}

// TestSignalKeyGoneReadOnly: a read-only console neither offers nor
// opens the signal's editor.
func TestSignalKeyGoneReadOnly(t *testing.T) {
	eng, store := waitFixture(t)
	opts := testOptions()
	opts.ReadOnly = true
	opts.BuiltinEditor = true
	s := start(t, eng, opts)
	s.waitFor("READ-ONLY")
	s.keys(":")
	s.typeText("filter id:sig-1")
	s.keys("<enter>")
	s.keys(":")
	s.typeText("scheduled")
	s.keys("<enter>")
	s.waitFor("sig-1")
	s.keys("<enter>")
	screen := s.waitFor("job sig-1", "waits for")
	if strings.Contains(screen, "sends it") {
		t.Fatalf("the read-only sheet offers the signal:\n%s", screen)
	}
	s.keys("s", "?")
	help := s.waitFor("keys — generated from the key map")
	if strings.Contains(help, "Payload of the signal") || strings.Contains(help, "send signal") {
		t.Fatalf("the signal key acted or is listed read-only:\n%s", help)
	}
	if sigs, err := store.SignalList(context.Background(), &backend.SignalListParams{JobID: "sig-1"}); err != nil || len(sigs) != 0 {
		t.Fatalf("signals %+v (%v), want none", sigs, err)
	}
}

// TestSignalFromExternalEditor: without the built-in editor the signal's
// payload is written in $EDITOR (here a sed script) on a temporary file,
// then confirmed and delivered as edited.
func TestSignalFromExternalEditor(t *testing.T) {
	if _, err := exec.LookPath("sed"); err != nil {
		t.Skip("no sed")
	}
	eng, store := waitFixture(t)
	opts := testOptions()
	opts.Editor = `sed -i s/{}/{"by":"ext"}/`
	opts.TempDir = t.TempDir()
	s := start(t, eng, opts)
	s.keys(":")
	s.typeText("filter id:sig-1")
	s.keys("<enter>")
	s.keys(":")
	s.typeText("scheduled")
	s.keys("<enter>")
	s.waitFor("sig-1")
	s.keys("s") // from the row: its wait names the signal
	s.waitFor("Send the signal approved to sig-1?", `"by": "ext"`)
	s.keys("y")
	s.waitFor("signal approved sent to sig-1")
	sigs, err := store.SignalList(context.Background(), &backend.SignalListParams{JobID: "sig-1"})
	if err != nil || len(sigs) != 1 || string(sigs[0].Payload) != `{"by":"ext"}` {
		t.Fatalf("signals %+v (%v), want the edited payload", sigs, err)
	}
	if left, _ := os.ReadDir(opts.TempDir); len(left) != 0 {
		t.Fatalf("the editor's file was left behind: %v", left)
	}
}

// TestFollowedLinkSurvivesListLoad: a list load (a live update) keeps the
// sheet on the link enter followed from the cursor's job; a cursor on
// another job takes the sheet there and forgets the way back.
func TestFollowedLinkSurvivesListLoad(t *testing.T) {
	m := New(nil, Options{NoSubscribe: true})
	m.jobs.rows = []*jobRow{newRow(&engine.Job{ID: "par"}), newRow(&engine.Job{ID: "other"})}
	m.sheet.open, m.sheet.id = true, "kid"
	m.sheet.trail = []sheetPlace{{id: "par"}}
	if cmd := m.sheetFollow(); cmd != nil || m.sheet.id != "kid" || len(m.sheet.trail) != 1 {
		t.Fatalf("after a load: sheet on %q with %d back, want kid with 1", m.sheet.id, len(m.sheet.trail))
	}
	m.jobs.cursor = 1
	if cmd := m.sheetFollow(); cmd == nil || m.sheet.id != "other" || len(m.sheet.trail) != 0 {
		t.Fatalf("after a move: sheet on %q with %d back, want other with none", m.sheet.id, len(m.sheet.trail))
	}
}

// TestLinksFromAnywhere: following a link took ] pressed exactly enough
// times (three of five changed nothing on screen), a press too many went
// on silently to the payload, and enter then closed the sheet. Now l
// goes to the links from anywhere on the sheet with the › on the first,
// again goes on to the next (round to the first after the last, the ›
// always drawn), and ] past the last section says so.
func TestLinksFromAnywhere(t *testing.T) {
	eng, _ := waitFixture(t)
	s := start(t, eng, testOptions())
	s.keys(":")
	s.typeText("filter id:par-1")
	s.keys("<enter>")
	s.keys(":")
	s.typeText("scheduled")
	s.keys("<enter>")
	s.waitFor("par-1")
	s.keys("<enter>")
	s.waitFor("job par-1", "l links (again: next)")
	s.keys("l")
	screen := s.waitFor("› child        par-1~s1.0", "enter follows par-1~s1.0 (1 of 3) · l next")
	s.golden(screen)
	s.keys("l", "l")
	s.waitFor("› child        par-1~s1.2", "enter follows par-1~s1.2 (3 of 3)")
	s.keys("l") // round to the first, not past the end
	s.waitFor("› child        par-1~s1.0", "(1 of 3)")
	s.keys("]", "]", "]", "]", "]", "]", "]", "]")
	s.waitFor("the last section of the sheet; l goes to its links")
	s.keys("l", "<enter>")
	s.waitFor("job par-1~s1.0")
}
