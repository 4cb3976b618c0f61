package tui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// The workflow parts of the console: the steps section, the dlq chip, and
// the links between a dead job and its dead-letter job that enter follows.
// The fixture writes the checkpoint and the death through the Store
// contract, with fixed durations, so the screens are deterministic.

// workflowFixture is a store with wf-0001, a workflow that died at its
// third step (run twice, crashed once) with its death routed to
// dlq:wf-0001, and wf-0002, running its second step.
func workflowFixture(t *testing.T) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wf-0001", "wf-0002"} {
		if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "orders", Kind: "order.flow",
			Payload: json.RawMessage(`{"order":"` + id + `"}`), MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(id string) *engine.Job {
		t.Helper()
		res, err := store.JobClaim(ctx, &backend.JobClaimParams{Queue: "orders", WorkerID: testWorker, LeaseID: "lease-" + id,
			Limit: 1, Kinds: map[string]int{"order.flow": 1}, LeaseDuration: time.Hour})
		if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != id {
			t.Fatalf("claim %s: %v %v", id, res, err)
		}
		return res.Jobs[0]
	}
	checkpoint := func(j *engine.Job, cp engine.Checkpoint) {
		t.Helper()
		raw, err := cp.Encode()
		if err != nil {
			t.Fatal(err)
		}
		res, err := store.JobCheckpoint(ctx, &backend.JobCheckpointParams{Items: []backend.JobCheckpointItem{{
			JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence}, Checkpoint: raw}}})
		if err != nil || res[0] != nil {
			t.Fatalf("checkpoint %s: %v %v", j.ID, res, err)
		}
	}
	done := func(name string, d time.Duration) engine.StepRecord {
		return engine.StepRecord{Name: name, State: engine.StepCompleted, Result: json.RawMessage(`true`), Attempts: 1, Duration: d}
	}

	j := claim("wf-0001")
	checkpoint(j, engine.Checkpoint{Version: 1, Steps: []engine.StepRecord{done("reserve", 12*time.Millisecond), done("charge", 340*time.Millisecond)}})
	msg := "carrier API timeout"
	p := backendtest.Outcome{
		JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence},
		To:     engine.StateArchived, Reason: engine.ReasonAttemptsExhausted, Charge: backend.ChargeAttempt,
		Event: engine.EventArchived, Actor: testWorker, Message: msg,
		Error: &engine.AttemptError{Message: msg, Worker: testWorker}, ErrorPattern: engine.NormalizeError(msg),
	}.Plan(j)
	cp := engine.Checkpoint{Version: 1, Steps: []engine.StepRecord{done("reserve", 12*time.Millisecond), done("charge", 340*time.Millisecond),
		{Name: "ship", State: engine.StepFailed, Attempts: 2, Crashes: 1, Error: msg, Duration: 2500 * time.Millisecond}}}
	raw, err := cp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p.Checkpoint = &backend.CheckpointWrite{Checkpoint: raw}
	p.DeadLetter = &backend.DeadLetterWrite{Job: &backend.JobInsertParams{ID: "dlq:wf-0001", Queue: "triage", Kind: "order.triage",
		Payload:       json.RawMessage(`{"dead_job_id":"wf-0001","kind":"order.flow","queue":"orders","payload":{"order":"wf-0001"},"error":"carrier API timeout","reason":"attempts_exhausted"}`),
		SchemaVersion: 1, MaxAttempts: 3, Fingerprint: "fp-dlq-wf-0001"}}
	if _, err := store.JobFinish(ctx, p); err != nil {
		t.Fatal(err)
	}
	checkpoint(claim("wf-0002"), engine.Checkpoint{Version: 1, Steps: []engine.StepRecord{done("reserve", 9*time.Millisecond)}})
	return eng
}

// TestWorkflowSheetStepsAndLinks: the dead workflow's sheet shows its
// steps (the failed one with its runs, crash and error) and a link to its
// dead-letter job; enter on the link opens that job, whose sheet links
// back, and enter there comes back. The running workflow marks the step
// it is on; the dead-letter job carries the dlq chip in the list.
func TestWorkflowSheetStepsAndLinks(t *testing.T) {
	eng := workflowFixture(t)
	s := start(t, eng, testOptions())
	s.waitFor("wf-0001")
	s.keys("<enter>")
	screen := s.waitFor("job wf-0001", "steps (3)")
	for _, want := range []string{"✓  1 reserve", "12ms · 1 run", "✗  3 ship", "2.5s · 2 runs · 1 crash", "carrier API timeout"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("the sheet does not show %q:\n%s", want, screen)
		}
	}
	s.goldenAs("dead", screen)

	// ] to the links section (the last before the payload), and enter
	// follows the link.
	s.keys("]", "]", "]", "]", "]")
	screen = s.waitFor("dlq:wf-0001 · handles its death", "enter follows dlq:wf-0001")
	s.goldenAs("links", screen)
	s.keys("<enter>")
	screen = s.waitFor("job dlq:wf-0001", "dead job     wf-0001 · whose death this triages")
	s.goldenAs("dlq", screen)
	s.keys("]", "]", "]")
	s.waitFor("enter follows wf-0001")
	s.keys("<enter>")
	s.waitFor("job wf-0001", "steps (3)")

	// esc walks the links back (a stack), then closes the sheet.
	s.keys("<esc>")
	s.waitFor("job dlq:wf-0001", "enter follows wf-0001")
	s.keys("<esc>")
	s.waitFor("dlq:wf-0001 · handles its death", "enter follows dlq:wf-0001")
	// The running workflow and the dlq chip, on their state tabs.
	s.keys("<esc>") // closes the sheet
	s.waitGone("steps (3)")
	// From archived back to available: the dead-letter job.
	s.keys("<shift+tab>", "<shift+tab>", "<shift+tab>", "<shift+tab>")
	screen = s.waitFor("[dlq] order.triage")
	s.goldenAs("chip", screen)
	// The running tab's list loads after tab: enter waits for its row, or
	// on a loaded machine it opens nothing.
	s.keys("<tab>")
	s.waitFor("▸running 1", "› wf-0002")
	s.keys("<enter>")
	screen = s.waitFor("job wf-0002", "steps (1)", "next step, running")
	if !strings.Contains(screen, "▶  2") {
		t.Fatalf("the running step is not marked:\n%s", screen)
	}
}

// TestWorkflowReplayPreview: :replay 3 on the dead workflow shows what the
// replay keeps and runs again before it asks; n changes nothing, y
// creates the new job, linked from the original's sheet.
func TestWorkflowReplayPreview(t *testing.T) {
	eng := workflowFixture(t)
	s := start(t, eng, testOptions())
	s.waitFor("wf-0001")
	s.keys("<enter>")
	s.waitFor("job wf-0001", "steps (3)")
	s.keys(":")
	s.typeText("replay 3")
	s.keys("<enter>")
	screen := s.waitFor("Replay wf-0001 from step 3 as a new job?", "keep   1 reserve", "run    3 ship · was failed")
	s.golden(screen)
	s.keys("n")
	s.waitGone("Replay wf-0001 from step 3")
	page, err := eng.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{Kinds: []string{"order.flow"}}, Limit: 10})
	if err != nil || len(page.Jobs) != 2 {
		t.Fatalf("after n: %d order.flow jobs (%v), want the 2 of the fixture", len(page.Jobs), err)
	}
	s.keys(":")
	s.typeText("replay 3")
	s.keys("<enter>")
	s.waitFor("Replay wf-0001 from step 3 as a new job?")
	s.keys("y")
	s.waitFor("forked", "replayed from step 3 as wf-")
	s.keys("]", "]", "]", "]", "]")
	screen = s.waitFor("replayed as")
	if !strings.Contains(screen, "~replay~") || !strings.Contains(screen, "· from step 3") {
		t.Fatalf("the original's links do not name its fork:\n%s", screen)
	}
	page, err = eng.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{Kinds: []string{"order.flow"}}, Limit: 10})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("after y: %d order.flow jobs (%v), want 3", len(page.Jobs), err)
	}
}

// TestQuarantineStepCrashes: the quarantine screen leads a fingerprint's
// last crash with the crashes per workflow step.
func TestQuarantineStepCrashes(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: "rep-0001", Queue: "reports", Kind: "report.flow",
		Payload: json.RawMessage(`{"report":"q3"}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := store.JobClaim(ctx, &backend.JobClaimParams{Queue: "reports", WorkerID: testWorker, LeaseID: "lease-r",
		Limit: 1, Kinds: map[string]int{"report.flow": 1}, LeaseDuration: time.Hour})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("claim: %v %v", res, err)
	}
	j := res.Jobs[0]
	cp, err := engine.Checkpoint{Version: 1, Steps: []engine.StepRecord{
		{Name: "fetch", State: engine.StepCompleted, Result: json.RawMessage(`1`), Attempts: 1},
		{Name: "render", State: engine.StepCrashed, Attempts: 1, Crashes: 1, Error: errOOM},
	}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p := backendtest.Outcome{
		JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence},
		To:     engine.StateQuarantined, Reason: engine.ReasonQuarantined, Charge: backend.ChargeCrash, Quarantine: true,
		Event: engine.EventQuarantined, Actor: testWorker, Message: errOOM,
		Error: &engine.AttemptError{Crash: true, Message: errOOM, Worker: testWorker}, ErrorPattern: engine.NormalizeError(errOOM),
	}.Plan(j)
	p.Checkpoint = &backend.CheckpointWrite{Checkpoint: cp}
	p.Fingerprint.StepCrash = "render" // the crash's write counts it, as the engine's plan says
	if _, err := store.JobFinish(ctx, p); err != nil {
		t.Fatal(err)
	}
	s := start(t, eng, testOptions())
	s.waitFor("quarantined 1")
	s.keys(":")
	s.typeText("quarantine")
	s.keys("<enter>")
	screen := s.waitFor("in render ×1: runtime: out of memory")
	s.golden(screen)
}

// TestWorkflowReplayFromStepCursor: in the dead workflow's sheet J and K
// move a step cursor over the steps section, and F opens the replay
// preview for the step under it (what is kept, what runs again) before
// y/n; n changes nothing, y replays from the picked step.
func TestWorkflowReplayFromStepCursor(t *testing.T) {
	eng := workflowFixture(t)
	s := start(t, eng, testOptions())
	s.waitFor("wf-0001")
	s.keys("<enter>")
	screen := s.waitFor("job wf-0001", "steps (3)", "J picks a step, then F replays from it")
	for _, want := range []string{"J next step", "F replay from step"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("the status line does not offer %q:\n%s", want, screen)
		}
	}
	s.keys("J")
	s.waitFor("› ✓  1 reserve", "F previews a replay from step 1")
	s.keys("J", "J", "J") // stops at the last step
	screen = s.waitFor("› ✗  3 ship", "F previews a replay from step 3")
	if strings.Contains(screen, "› ✓") {
		t.Fatalf("two steps under the cursor:\n%s", screen)
	}
	s.goldenAs("cursor", screen)
	s.keys("F")
	screen = s.waitFor("Replay wf-0001 from step 3 as a new job?", "keep   1 reserve", "keep   2 charge", "run    3 ship · was failed")
	s.goldenAs("preview", screen)
	s.keys("n")
	s.waitGone("Replay wf-0001 from step 3")
	count := func() int {
		t.Helper()
		page, err := eng.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{Kinds: []string{"order.flow"}}, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Jobs)
	}
	if n := count(); n != 2 {
		t.Fatalf("after n: %d order.flow jobs, want the 2 of the fixture", n)
	}

	// K back to step 2: the preview keeps one step and runs two again.
	s.keys("K")
	s.waitFor("› ✓  2 charge", "F previews a replay from step 2")
	s.keys("F")
	screen = s.waitFor("Replay wf-0001 from step 2 as a new job?", "keep   1 reserve", "run    2 charge · was completed", "run    3 ship · was failed")
	if strings.Contains(screen, "keep   2") {
		t.Fatalf("the preview from step 2 keeps step 2:\n%s", screen)
	}
	s.keys("y")
	s.waitFor("replaying wf-0001 from step 2 as wf-")
	if n := count(); n != 3 {
		t.Fatalf("after y: %d order.flow jobs, want 3", n)
	}
	s.keys("]", "]", "]", "]", "]")
	screen = s.waitFor("replayed as")
	if !strings.Contains(screen, "· from step 2") {
		t.Fatalf("the original's links do not name the fork from step 2:\n%s", screen)
	}
}

// TestWorkflowReplayKeyGone: a read-only console and a viewer's get no
// replay key: not in the status line, the steps section or the help, and
// pressing it (or the step keys) opens nothing.
func TestWorkflowReplayKeyGone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		viewer bool
	}{{"read-only", false}, {"viewer", true}} {
		t.Run(tc.name, func(t *testing.T) {
			eng := workflowFixture(t)
			opts := testOptions()
			var ctl engine.Control = eng
			if tc.viewer {
				ctl = &viewerControl{Control: eng}
			} else {
				opts.ReadOnly = true
			}
			s := start(t, ctl, opts)
			s.waitFor("READ-ONLY", "wf-0001")
			s.keys("<enter>")
			screen := s.waitFor("job wf-0001", "steps (3)", "carrier API timeout")
			for _, not := range []string{"F replay", "J next step", "picks a step", "replays from"} {
				if strings.Contains(screen, not) {
					t.Fatalf("the %s sheet offers %q:\n%s", tc.name, not, screen)
				}
			}
			s.keys("J", "F", "K", "F")
			s.keys("?")
			help := s.waitFor("keys — generated from the key map", "read-only")
			if strings.Contains(help, "Replay wf-0001") || strings.Contains(help, "›") {
				t.Fatalf("the step keys acted in a %s console:\n%s", tc.name, help)
			}
			help = help[strings.Index(help, "keys — generated"):]
			if strings.Contains(help, "replay from step") {
				t.Errorf("the %s help lists %q", tc.name, "replay from step")
			}
			// The step keys stay for the links they pick (enter
			// follows), which change nothing.
			for _, want := range []string{"next step or link", "previous step or link"} {
				if !strings.Contains(help, want) {
					t.Errorf("the %s help does not list %q", tc.name, want)
				}
			}
		})
	}
}

// TestWorkflowStepCursorScrollsIntoView: on a short terminal the steps
// section is below the sheet's first screen; picking a step scrolls it
// (and the hint under the steps) into view.
func TestWorkflowStepCursorScrollsIntoView(t *testing.T) {
	eng := workflowFixture(t)
	s := start(t, eng, testOptions())
	s.waitFor("wf-0001")
	s.tm.Send(tea.WindowSizeMsg{Width: goldenW, Height: 24})
	s.keys("<enter>")
	top := func(screen string) string {
		lines := strings.Split(screen, "\n")
		return strings.Join(lines[:min(len(lines), 24)], "\n")
	}
	screen := top(s.waitFor("job wf-0001", "lifecycle"))
	if strings.Contains(screen, "steps (3)") {
		t.Fatalf("the steps fit the first screen; the test needs them below it:\n%s", screen)
	}
	s.keys("K") // the last step first
	screen = top(s.waitFor("› ✗  3 ship", "F previews a replay from step 3"))
	if !strings.Contains(screen, "› ✗  3 ship") || !strings.Contains(screen, "F previews a replay from step 3") {
		t.Fatalf("the picked step is not in view:\n%s", screen)
	}
	s.keys("K", "K")
	screen = top(s.waitFor("› ✓  1 reserve", "F previews a replay from step 1"))
	if !strings.Contains(screen, "› ✓  1 reserve") {
		t.Fatalf("the picked step is not in view:\n%s", screen)
	}
}

// TestWorkflowReplayWithResult: the replay preview offers to replace the
// result of step N−1; e opens it in the editor (the built-in one here, as
// over SSH), what is not JSON is refused there, and the saved text shows
// in the preview, escaped, before y replays with it: the new job's step
// N−1 holds the replacement.
func TestWorkflowReplayWithResult(t *testing.T) {
	eng := workflowFixture(t)
	opts := testOptions()
	opts.BuiltinEditor = true
	s := start(t, eng, opts)
	s.waitFor("wf-0001")
	s.keys("<enter>")
	s.waitFor("job wf-0001", "steps (3)")
	s.keys(":")
	s.typeText("replay 3")
	s.keys("<enter>")
	s.waitFor("Replay wf-0001 from step 3 as a new job?", "e replace step 2's result")
	s.keys("e")
	s.goldenAs("editor", s.waitFor("Result of step 2 (charge) for the replay of wf-0001 from step 3", "ctrl+s save"))
	// "true" becomes "tru" (not JSON: refused, the text stays), then a
	// string with an escape sequence in it, which the preview must not
	// send to the terminal.
	s.keys("<end>", "<backspace>", "<ctrl+s>")
	s.waitFor("not valid JSON", "Result of step 2 (charge)")
	s.keys("<backspace>", "<backspace>", "<backspace>")
	s.typeText(`{"card":"\u001b[31mred","retry":true}`)
	s.keys("<ctrl+s>")
	screen := s.waitFor("Replay wf-0001 from step 3 as a new job?", "2 charge · result replaced:", `"retry": true`)
	if strings.Contains(screen, "\x1b[31m") {
		t.Fatalf("the replacement reached the terminal unescaped:\n%q", screen)
	}
	s.goldenAs("preview", screen)
	s.keys("y")
	s.waitFor("replaying wf-0001 from step 3 as wf-")
	page, err := eng.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{Kinds: []string{"order.flow"}}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var fork *engine.Job
	for _, r := range page.Jobs {
		if strings.Contains(r.ID, "~replay~") {
			if d, err := eng.GetJob(context.Background(), r.ID, false); err == nil {
				fork = d.Job
			}
		}
	}
	if fork == nil {
		t.Fatal("no replay job")
	}
	cp, err := engine.ParseCheckpoint(fork.Checkpoint)
	if err != nil || len(cp.Steps) != 2 {
		t.Fatalf("the replay's checkpoint %s (%v), want steps 1 and 2", fork.Checkpoint, err)
	}
	var got map[string]any
	if err := json.Unmarshal(cp.Steps[1].Result, &got); err != nil || got["card"] != "\x1b[31mred" || got["retry"] != true {
		t.Fatalf("step 2's result in the replay: %s (%v)", cp.Steps[1].Result, err)
	}
	if string(cp.Steps[0].Result) != "true" {
		t.Fatalf("step 1's result in the replay: %s, want the original's", cp.Steps[0].Result)
	}
}
