package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// outcomeChecks run one handler outcome each through a real engine.
func outcomeChecks() []check {
	return []check{
		{name: "Success", fn: testOutcomeSuccess},
		{name: "ErrorRetried", fn: testOutcomeErrorRetried},
		{name: "AttemptsExhausted", fn: testOutcomeExhausted},
		{name: "Skip", fn: testOutcomeSkip},
		{name: "Revoke", fn: testOutcomeRevoke},
		{name: "Snooze", fn: testOutcomeSnooze},
		{name: "AttemptTimeout", fn: testOutcomeTimeout},
		{name: "DeadlineWhileRunning", fn: testOutcomeDeadlineRunning},
		{name: "DeadlineBeforeClaim", fn: testOutcomeDeadlineAtClaim},
		{name: "Panic", fn: testOutcomePanic},
	}
}

// oneKind runs an engine (worker "w1", queue "q") with kind "k" whose
// handler is fn, called with the 1-based number of the call.
func oneKind(t *testing.T, h Harness, noMaintenance bool, fn func(ctx context.Context, j *engine.Job, call int) error, kindMods ...func(*engine.Kind)) (backend.Store, *engine.Engine, *atomic.Int64) {
	t.Helper()
	s := h.NewStore(t)
	cfg := fast("w1", "q")
	cfg.NoMaintenance = noMaintenance
	calls := new(atomic.Int64)
	k := engine.Kind{Name: "k", Handler: func(ctx context.Context, j *engine.Job) error {
		return fn(ctx, j, int(calls.Add(1)))
	}}
	for _, m := range kindMods {
		m(&k)
	}
	return s, startEngine(t, s, cfg, k), calls
}

// dueUntil makes scheduled and retryable jobs due (the engine runs no
// maintenance) until job id reaches state.
func dueUntil(t *testing.T, s backend.Store, id string, state engine.State) *engine.Job {
	t.Helper()
	var last *engine.Job
	eventually(t, waitLong, func() bool {
		scheduleDue(t, s)
		last = tryJob(s, id)
		return last != nil && last.State == state
	}, "job %s to reach %s (last seen %s)", id, state, describe(last))
	return getJob(t, s, id)
}

func testOutcomeSuccess(t *testing.T, h Harness) {
	var seen atomic.Pointer[engine.Job]
	s, e, calls := oneKind(t, h, false, func(_ context.Context, j *engine.Job, _ int) error {
		seen.Store(j.Clone())
		return nil
	})
	enqueue(t, e, engine.EnqueueParams{ID: "ok", Queue: "q", Kind: "k", Payload: json.RawMessage(`{"n": 1}`)})
	j := waitState(t, s, "ok", engine.StateCompleted)
	if j.Attempt != 0 || j.CrashAttempt != 0 || j.FinalizedAt == nil || len(j.Errors) != 0 || !ranBy(j.AttemptedBy, "w1") || j.AttemptedAt == nil {
		t.Fatalf("completed job: %s finalized %v attempted %v by %q", describe(j), j.FinalizedAt, j.AttemptedAt, j.AttemptedBy)
	}
	checkLease(t, j)
	if calls.Load() != 1 {
		t.Fatalf("handler called %d times", calls.Load())
	}
	hj := seen.Load()
	if hj == nil || hj.ID != "ok" || !jsonEqual(hj.Payload, []byte(`{"n":1}`)) || hj.Kind != "k" || hj.Queue != "q" {
		t.Fatalf("handler saw %+v", hj)
	}
}

func testOutcomeErrorRetried(t *testing.T, h Harness) {
	s, e, calls := oneKind(t, h, true, func(_ context.Context, _ *engine.Job, call int) error {
		if call == 1 {
			return errors.New("first failure")
		}
		return nil
	})
	enqueue(t, e, engine.EnqueueParams{ID: "retry", Queue: "q", Kind: "k", MaxAttempts: 3})
	j := waitState(t, s, "retry", engine.StateRetryable)
	if j.Attempt != 1 || j.CrashAttempt != 0 || len(j.Errors) != 1 || j.Errors[0].Message != "first failure" || j.Errors[0].Crash {
		t.Fatalf("after one error: %s errors %+v", describe(j), j.Errors)
	}
	checkLease(t, j)
	if ev := events(t, s, "retry"); !hasEvent(ev, engine.EventFailed) {
		t.Fatalf("no failed event: %v", eventKinds(ev))
	}
	j = dueUntil(t, s, "retry", engine.StateCompleted)
	if j.Attempt != 1 || len(j.Errors) != 1 || calls.Load() != 2 {
		t.Fatalf("after the retry: %s, %d calls", describe(j), calls.Load())
	}
}

func testOutcomeExhausted(t *testing.T, h Harness) {
	s, e, calls := oneKind(t, h, false, func(_ context.Context, _ *engine.Job, call int) error {
		return fmt.Errorf("boom %d", call)
	})
	enqueue(t, e, engine.EnqueueParams{ID: "ex", Queue: "q", Kind: "k", MaxAttempts: 3})
	j := waitState(t, s, "ex", engine.StateArchived)
	if j.TerminalReason != engine.ReasonAttemptsExhausted || j.Attempt != 3 || j.CrashAttempt != 0 || j.FinalizedAt == nil {
		t.Fatalf("exhausted: %s", describe(j))
	}
	if len(j.Errors) != 3 {
		t.Fatalf("errors %+v, want all 3 kept", j.Errors)
	}
	for i, er := range j.Errors {
		if er.Message != fmt.Sprintf("boom %d", i+1) || er.Attempt != i+1 || er.Crash {
			t.Fatalf("error %d: %+v, want boom %d of attempt %d", i, er, i+1, i+1)
		}
	}
	if calls.Load() != 3 {
		t.Fatalf("handler called %d times, want 3", calls.Load())
	}
	ev := events(t, s, "ex")
	if n := countEvents(ev, engine.EventFailed); n != 2 || ev[len(ev)-1].Kind != engine.EventArchived {
		t.Fatalf("events %v, want 2 failed then archived", eventKinds(ev))
	}
}

func countEvents(ev []engine.Event, k engine.EventKind) int {
	n := 0
	for _, e := range ev {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func testOutcomeSkip(t *testing.T, h Harness) {
	s, e, calls := oneKind(t, h, false, func(context.Context, *engine.Job, int) error {
		return fmt.Errorf("wrapped: %w", engine.Skip("customer gone"))
	})
	enqueue(t, e, engine.EnqueueParams{ID: "skip", Queue: "q", Kind: "k", MaxAttempts: 5})
	j := waitState(t, s, "skip", engine.StateArchived)
	if j.TerminalReason != engine.ReasonSkipped || j.Attempt != 0 || j.FinalizedAt == nil || calls.Load() != 1 {
		t.Fatalf("skipped: %s, %d calls", describe(j), calls.Load())
	}
	if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Message, "customer gone") {
		t.Fatalf("skip reason not kept: %+v", j.Errors)
	}
}

func testOutcomeRevoke(t *testing.T, h Harness) {
	var fences [4]atomic.Int64
	s, e, calls := oneKind(t, h, false, func(_ context.Context, j *engine.Job, call int) error {
		if call <= len(fences) {
			fences[call-1].Store(j.Fence)
		}
		return engine.Revoke()
	})
	enqueue(t, e, engine.EnqueueParams{ID: "rev", Queue: "q", Kind: "k"})
	eventually(t, waitLong, func() bool { return gone(s, "rev") }, "revoked job to be deleted")
	if calls.Load() != 1 {
		t.Fatalf("handler called %d times (fences %d %d %d)", calls.Load(), fences[0].Load(), fences[1].Load(), fences[2].Load())
	}
}

func testOutcomeSnooze(t *testing.T, h Harness) {
	s, e, calls := oneKind(t, h, true, func(_ context.Context, _ *engine.Job, call int) error {
		if call == 1 {
			return engine.Snooze(time.Millisecond)
		}
		return nil
	})
	enqueue(t, e, engine.EnqueueParams{ID: "sn", Queue: "q", Kind: "k", MaxAttempts: 1})
	j := waitState(t, s, "sn", engine.StateScheduled)
	if j.Attempt != 0 || j.CrashAttempt != 0 || len(j.Errors) != 0 || j.FinalizedAt != nil {
		t.Fatalf("snoozed: %s", describe(j))
	}
	checkLease(t, j)
	if ev := events(t, s, "sn"); !hasEvent(ev, engine.EventSnoozed) {
		t.Fatalf("no snoozed event: %v", eventKinds(ev))
	}
	// MaxAttempts 1: a snooze that spent the attempt would leave none.
	j = dueUntil(t, s, "sn", engine.StateCompleted)
	if j.Attempt != 0 || calls.Load() != 2 {
		t.Fatalf("after the snooze: %s, %d calls", describe(j), calls.Load())
	}
}

func testOutcomeTimeout(t *testing.T, h Harness) {
	s, e, calls := oneKind(t, h, false, func(ctx context.Context, _ *engine.Job, _ int) error {
		<-ctx.Done()
		return ctx.Err()
	}, func(k *engine.Kind) { k.Timeout = 100 * time.Millisecond })
	enqueue(t, e, engine.EnqueueParams{ID: "to", Queue: "q", Kind: "k", MaxAttempts: 2})
	j := waitState(t, s, "to", engine.StateArchived)
	if j.TerminalReason != engine.ReasonAttemptsExhausted || j.Attempt != 2 || j.CrashAttempt != 0 || len(j.Errors) != 2 || calls.Load() != 2 {
		t.Fatalf("timed out twice: %s, %d calls", describe(j), calls.Load())
	}
	for _, er := range j.Errors {
		if !containsFold(er.Message, "timed out") && !containsFold(er.Message, "timeout") {
			t.Fatalf("a timeout's error does not say so: %q", er.Message)
		}
	}
}

func testOutcomeDeadlineRunning(t *testing.T, h Harness) {
	s, e, calls := oneKind(t, h, false, func(ctx context.Context, _ *engine.Job, _ int) error {
		<-ctx.Done()
		return ctx.Err()
	})
	// The deadline must pass while the handler runs, not before the claim:
	// on a loaded machine a short one may pass first, so lengthen it until
	// the handler ran. What is checked is the same either way.
	for i, d := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second} {
		id := fmt.Sprintf("dl-%d", i)
		before := calls.Load()
		deadline := storeNow(t, s).Add(d)
		enqueue(t, e, engine.EnqueueParams{ID: id, Queue: "q", Kind: "k", MaxAttempts: 5, Deadline: &deadline})
		j := waitState(t, s, id, engine.StateArchived)
		if j.TerminalReason != engine.ReasonDeadlineExceeded || j.Attempt != 0 || j.CrashAttempt != 0 {
			t.Fatalf("deadline passed: %s", describe(j))
		}
		ran := calls.Load() - before
		if ran == 0 {
			// Archived at claim, or claimed with the deadline passing
			// before the handler started: too short for this machine.
			continue
		}
		if ran != 1 || j.Fence != 1 {
			t.Fatalf("deadline passed while running: %s, handler ran %d times, want once", describe(j), ran)
		}
		if len(j.Errors) != 1 || !containsFold(j.Errors[0].Message, "deadline") {
			t.Fatalf("errors %+v: want one naming the deadline", j.Errors)
		}
		return
	}
	t.Fatal("every deadline passed before the job was claimed")
}

func testOutcomeDeadlineAtClaim(t *testing.T, h Harness) {
	s, e, calls := oneKind(t, h, false, func(_ context.Context, j *engine.Job, _ int) error {
		if j.ID == "late" {
			return errors.New("must not run")
		}
		return nil
	})
	past := storeNow(t, s).Add(-time.Second)
	enqueue(t, e, engine.EnqueueParams{ID: "late", Queue: "q", Kind: "k", MaxAttempts: 5, Deadline: &past})
	j := waitState(t, s, "late", engine.StateArchived)
	if j.TerminalReason != engine.ReasonDeadlineExceeded || j.Attempt != 0 || j.FinalizedAt == nil {
		t.Fatalf("deadline passed before the claim: %s", describe(j))
	}
	checkLease(t, j)
	enqueue(t, e, engine.EnqueueParams{ID: "after", Queue: "q", Kind: "k"})
	waitState(t, s, "after", engine.StateCompleted)
	if calls.Load() != 1 {
		t.Fatalf("handler called %d times, want once (only for the later job)", calls.Load())
	}
}

func testOutcomePanic(t *testing.T, h Harness) {
	s, e, calls := oneKind(t, h, true, func(_ context.Context, _ *engine.Job, call int) error {
		if call == 1 {
			panic("kaboom")
		}
		return nil
	})
	enqueue(t, e, engine.EnqueueParams{ID: "p", Queue: "q", Kind: "k", MaxAttempts: 1})
	j := waitState(t, s, "p", engine.StateRetryable)
	if j.CrashAttempt != 1 || j.Attempt != 0 || len(j.Errors) != 1 {
		t.Fatalf("after a panic: %s", describe(j))
	}
	er := j.Errors[0]
	if !er.Crash || !strings.Contains(er.Message, "kaboom") || !strings.Contains(er.Trace, "panic") {
		t.Fatalf("crash error %+v: want Crash, the panic value and a trace", er)
	}
	if ev := events(t, s, "p"); !hasEvent(ev, engine.EventCrashed) {
		t.Fatalf("no crashed event: %v", eventKinds(ev))
	}
	// MaxAttempts 1: a panic that spent the attempt would archive the job.
	j = dueUntil(t, s, "p", engine.StateCompleted)
	if j.CrashAttempt != 1 || j.Attempt != 0 || calls.Load() != 2 {
		t.Fatalf("after the rerun: %s, %d calls", describe(j), calls.Load())
	}
}
