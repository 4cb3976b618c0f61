package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Stores write only what the engine gave them: every plan below carries
// sentinel texts and actors no code of a store could make up, and the
// stored events, errors and operations must carry exactly those.

func planChecks() []check {
	return []check{
		{name: "SentinelTextsInEveryPlan", fn: testSentinelTexts},
		{name: "FinishIfBeforeBound", fn: testFinishIfBefore},
		{name: "ErrorRefReachesTheNextClaim", fn: testErrorRef},
	}
}

// testErrorRef: the reference an engine.Interceptor left on a failed
// attempt (AttemptError.Ref) is on the job the next claim hands out,
// after the failure's entry and a later one without a reference, so the
// engine can give the next run the latest failed attempt's reference
// (AttemptInfo.Previous).
func testErrorRef(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	c := running(t, s, "ref-1")
	for i, ref := range []string{sentinel("ref"), ""} {
		p := Outcome{JobRef: refOf(c), To: engine.StateRetryable, Charge: backend.ChargeAttempt,
			Error: &engine.AttemptError{Message: fmt.Sprintf("failure %d", i+1), Ref: ref}, ErrorPattern: "failure",
			Event: engine.EventFailed, Actor: "w-test", Message: "failed"}.Plan(c)
		if _, err := s.JobFinish(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := s.JobScheduleDue(ctx, &backend.JobScheduleDueParams{From: []engine.State{engine.StateRetryable}, To: engine.StateAvailable, Limit: 10}); err != nil {
			t.Fatal(err)
		}
		c = claimOne(t, s, c.Queue, c.ID)
		if len(c.Errors) == 0 {
			t.Fatalf("claim %d: the claimed job carries no error entries", i+2)
		}
		if got := c.Errors[len(c.Errors)-1]; got.Ref != ref || got.Message != fmt.Sprintf("failure %d", i+1) {
			t.Fatalf("claim %d: last error entry %+v, want ref %q", i+2, got, ref)
		}
	}
	if j := getJob(t, s, c.ID); len(j.Errors) != 2 || j.Errors[0].Ref != sentinel("ref") || j.Errors[1].Ref != "" {
		t.Fatalf("error entries %+v, want the first with its ref, the second without", j.Errors)
	}
}

// sentinel is a text no store writes of its own.
func sentinel(what string) string { return "⟦sentinel " + what + "⟧" }

// wantEvent asserts that job id's last stored event of kind k has exactly
// actor and message.
func wantEvent(t testing.TB, s backend.Store, id string, k engine.EventKind, actor, message string) {
	t.Helper()
	var found *engine.Event
	for _, e := range events(t, s, id) {
		if e.Kind == k {
			found = &e
		}
	}
	if found == nil {
		t.Fatalf("job %s: no %s event in %v", id, k, eventKinds(events(t, s, id)))
	}
	if found.Actor != actor || found.Message != message {
		t.Fatalf("job %s: %s event by %q with %q, want by %q with %q", id, k, found.Actor, found.Message, actor, message)
	}
}

func testSentinelTexts(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()

	// A worker outcome: the event, the error entry, the last error and
	// pattern are the plan's.
	c := running(t, s, "sen-fail")
	started := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	p := Outcome{JobRef: refOf(c), To: engine.StateRetryable, Charge: backend.ChargeAttempt, Delay: time.Hour,
		Error: &engine.AttemptError{Message: sentinel("error"), Trace: sentinel("trace"), Ref: sentinel("ref"), Started: &started}, ErrorPattern: sentinel("pattern"),
		Event: engine.EventFailed, Actor: sentinel("worker"), Message: sentinel("event")}.Plan(c)
	if _, err := s.JobFinish(ctx, p); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, s, c.ID, engine.EventFailed, sentinel("worker"), sentinel("event"))
	j := getJob(t, s, c.ID)
	if len(j.Errors) != 1 || j.Errors[0].Message != sentinel("error") || j.Errors[0].Trace != sentinel("trace") ||
		j.Errors[0].Ref != sentinel("ref") || j.Errors[0].Worker != sentinel("worker") || j.Errors[0].Attempt != 1 ||
		j.Errors[0].Started == nil || !j.Errors[0].Started.Equal(started) {
		t.Fatalf("error entry %+v", j.Errors)
	}
	groups, err := s.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: engine.Filter{States: []engine.State{engine.StateRetryable}}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Pattern != sentinel("pattern") {
		t.Fatalf("error groups %+v, want the plan's pattern", groups)
	}

	// A quarantine: the hold events of the fingerprint's waiting jobs and
	// the record's last error are the plan's.
	pill := running(t, s, "sen-pill")
	insert(t, s, &backend.JobInsertParams{ID: "sen-sibling", Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`),
		SchemaVersion: 1, MaxAttempts: 3, Fingerprint: pill.Fingerprint})
	qp := Outcome{JobRef: refOf(pill), To: engine.StateQuarantined, Reason: engine.ReasonQuarantined,
		Charge: backend.ChargeCrash, Quarantine: true, Error: &engine.AttemptError{Crash: true, Message: sentinel("crash")},
		ErrorPattern: sentinel("crash pattern"), Event: engine.EventQuarantined, Actor: sentinel("reaper")}.Plan(pill)
	qp.Fingerprint.LastError = sentinel("record")
	qp.Fingerprint.Hold.Event.Message = sentinel("held")
	if _, err := s.JobFinish(ctx, qp); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, s, pill.ID, engine.EventQuarantined, sentinel("reaper"), sentinel("crash"))
	wantEvent(t, s, "sen-sibling", engine.EventHeld, sentinel("reaper"), sentinel("held"))
	fp, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: pill.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	if fp.LastError != sentinel("record") || fp.Status != engine.FingerprintQuarantined {
		t.Fatalf("fingerprint record %+v", fp)
	}

	// The release of the fingerprint.
	rel := releasePlan(t, pill.Fingerprint, sentinel("operator"))
	rel.Event.Message = sentinel("released")
	if n, err := s.FingerprintRelease(ctx, rel); err != nil || n != 2 {
		t.Fatalf("release: %d %v", n, err)
	}
	wantEvent(t, s, "sen-sibling", engine.EventReleased, sentinel("operator"), sentinel("released"))

	// A claim past the deadline.
	past := time.Now().Add(-time.Hour)
	insert(t, s, &backend.JobInsertParams{ID: "sen-late", Queue: "late", Kind: "k", Payload: json.RawMessage(`{}`),
		SchemaVersion: 1, MaxAttempts: 3, Fingerprint: "fp-sen-late", Deadline: &past})
	res := claimP(t, s, backend.JobClaimParams{Queue: "late", WorkerID: "w", Limit: 5, PastDeadline: backend.ClaimDeadlineWrite{
		To: engine.StateArchived, Reason: engine.ReasonDeadlineExceeded, LastError: sentinel("late error"), Pattern: sentinel("late pattern"),
		Event: backend.EventWrite{Kind: engine.EventArchived, Actor: sentinel("claimer"), From: engine.StateAvailable, To: engine.StateArchived, Message: sentinel("late")},
	}})
	if len(res.Dead) != 1 || len(res.Jobs) != 0 {
		t.Fatalf("claim past deadline: dead %v, jobs %v", ids(res.Dead), ids(res.Jobs))
	}
	wantEvent(t, s, "sen-late", engine.EventArchived, sentinel("claimer"), sentinel("late"))
	if got := listIDs(t, s, engine.Filter{States: []engine.State{engine.StateArchived}, Error: "late error"}); !slices.Equal(got, []string{"sen-late"}) {
		t.Fatalf("error filter on the plan's last error: %v", got)
	}

	// Operator actions: each event is the plan's.
	for _, a := range []engine.Action{engine.ActionRetry, engine.ActionCancel} {
		spec := actionSpec(t, a)
		id := "sen-late"
		if _, err := s.JobAction(ctx, &backend.JobActionParams{ID: id, Spec: spec,
			Event: backend.EventWrite{Kind: spec.Event, Actor: sentinel(string(a) + " actor"), To: spec.To, Message: sentinel(string(a))}}); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		wantEvent(t, s, id, spec.Event, sentinel(string(a)+" actor"), sentinel(string(a)))
	}
	cur := getJob(t, s, "sen-late")
	if _, err := s.JobUpdatePayload(ctx, &backend.JobUpdatePayloadParams{ID: "sen-late", Payload: json.RawMessage(`{"fixed":1}`),
		Fingerprint: "fp-sen-late-2", Version: cur.Version,
		Event: backend.EventWrite{Kind: engine.EventPayloadEdited, Actor: sentinel("editor"), Message: sentinel("edit")}}); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, s, "sen-late", engine.EventPayloadEdited, sentinel("editor"), sentinel("edit"))
	if _, err := s.JobRetryCopy(ctx, &backend.JobRetryCopyParams{ID: "sen-late", NewID: "sen-copy",
		Payload: json.RawMessage(`{"fixed":2}`), Fingerprint: "fp-sen-copy",
		OriginalEvent: backend.EventWrite{Kind: engine.EventRetried, Actor: sentinel("fixer"), Message: sentinel("original")},
		CopyEvent:     backend.EventWrite{Kind: engine.EventRetried, Actor: sentinel("fixer"), To: engine.StateAvailable, Message: sentinel("copy")},
	}); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, s, "sen-late", engine.EventRetried, sentinel("fixer"), sentinel("original"))
	wantEvent(t, s, "sen-copy", engine.EventRetried, sentinel("fixer"), sentinel("copy"))

	// A bulk batch and the operation's texts.
	for i := range 3 {
		x := running(t, s, fmt.Sprintf("sen-bulk-%d", i), func(p *backend.JobInsertParams) { p.Queue = "bulk" })
		finish(t, s, Outcome{JobRef: refOf(x), To: engine.StateArchived, Reason: engine.ReasonSkipped, Event: engine.EventArchived,
			Error: &engine.AttemptError{Message: "x"}})
	}
	time.Sleep(2 * time.Millisecond) // the deaths come before the operation
	op, err := s.OperationInsert(ctx, &backend.OperationInsertParams{ID: "sen-op", Action: engine.ActionRetry,
		Selector: engine.Filter{Queues: []string{"bulk"}}, CreatedBy: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := s.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "h", TTL: time.Minute})
	if err != nil || lease == nil {
		t.Fatalf("claim operation: %v %v", lease, err)
	}
	spec := actionSpec(t, engine.ActionRetry)
	sel, _ := spec.Narrow(op.Selector)
	// A store may end a batch early (Redis bounds a script by the server's
	// time, so a loaded machine gets shorter batches): run batches from
	// the cursor until the store says the selector is exhausted, as the
	// engine does.
	var br *backend.OperationBatchResult
	for after, batches := lease.Cursor, 0; br == nil || !br.Exhausted; batches++ {
		if batches == 20 {
			t.Fatalf("20 batches and not exhausted: %+v", br.Operation)
		}
		br, err = s.OperationProcessBatch(ctx, &backend.OperationProcessBatchParams{ID: op.ID, Holder: lease.Holder, Fence: lease.Fence,
			After: after, Spec: spec, Selector: sel, Cutoff: op.CreatedAt, Limit: 10, Window: 100,
			Event: backend.EventWrite{Kind: spec.Event, Actor: sentinel("bulk actor"), To: spec.To, Message: sentinel("bulk")}, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		after = br.Cursor
	}
	if br.Operation.Succeeded != 3 {
		t.Fatalf("batch: %+v exhausted=%v", br.Operation, br.Exhausted)
	}
	for i := range 3 {
		wantEvent(t, s, fmt.Sprintf("sen-bulk-%d", i), engine.EventRetried, sentinel("bulk actor"), sentinel("bulk"))
	}
	if br.Operation.Status != engine.OperationRunning {
		t.Fatalf("the store ended the operation itself: %s", br.Operation.Status)
	}
	done, err := s.OperationFinish(ctx, &backend.OperationFinishParams{ID: op.ID, Holder: lease.Holder, Fence: lease.Fence,
		Status: engine.OperationCompleted, Error: sentinel("op error")})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != engine.OperationCompleted || done.Error != sentinel("op error") || done.FinishedAt == nil {
		t.Fatalf("finished operation %+v", done)
	}
	op2, err := s.OperationInsert(ctx, &backend.OperationInsertParams{ID: "sen-op2", Action: engine.ActionCancel,
		Selector: engine.Filter{Queues: []string{"bulk"}}, CreatedBy: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := s.OperationCancel(ctx, &backend.OperationCancelParams{ID: op2.ID, Message: sentinel("cancelled")})
	if err != nil || cancelled.Error != sentinel("cancelled") {
		t.Fatalf("cancel operation: %+v %v", cancelled, err)
	}
}

// testFinishIfBefore: a write bounded by IfBefore applies only until that
// store time; past it, nothing changes and the writer hears ErrLeaseLost.
func testFinishIfBefore(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	c := running(t, s, "bound")
	before := getJob(t, s, c.ID)
	late := Outcome{JobRef: refOf(c), To: engine.StateRetryable, Charge: backend.ChargeCrash, Delay: time.Hour,
		Error: &engine.AttemptError{Crash: true, Message: "gone"}, Event: engine.EventCrashed}.Plan(c)
	late.IfBefore = storeNow(t, s).Add(-time.Second)
	if _, err := s.JobFinish(ctx, late); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("a write past its bound: %v, want ErrLeaseLost", err)
	}
	if j := getJob(t, s, c.ID); j.State != engine.StateRunning || j.CrashAttempt != before.CrashAttempt || j.Version != before.Version {
		t.Fatalf("a write past its bound changed the job: %s", describe(j))
	}
	late.IfBefore = storeNow(t, s).Add(time.Minute)
	if _, err := s.JobFinish(ctx, late); err != nil {
		t.Fatalf("a write within its bound: %v", err)
	}
	if j := getJob(t, s, c.ID); j.State != engine.StateRetryable || j.CrashAttempt != before.CrashAttempt+1 {
		t.Fatalf("a write within its bound: %s", describe(j))
	}
}
