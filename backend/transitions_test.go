package backend

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// allTriggers lists every trigger, so the tests can try each against each
// state. A new Trigger constant must be added here (TestAllTriggersListed
// checks the table's).
var allTriggers = []Trigger{
	TriggerDue, TriggerClaim, TriggerClaimPastDeadline, TriggerSuccess,
	TriggerError, TriggerSkip, TriggerDeadline, TriggerRevoke, TriggerSnooze,
	TriggerUndecodable, TriggerCrash, TriggerShutdown, TriggerLeaseLost,
	TriggerOperatorRetry, TriggerOperatorRelease, TriggerOperatorCancel,
	TriggerOperatorDelete, TriggerRetention, TriggerHold,
	TriggerWait, TriggerSignal, TriggerChildren,
}

// everyState is AllStates plus deleted, which no trigger leaves.
var everyState = append(slices.Clone(sluicetype.AllStates), sluicetype.StateDeleted)

func TestAllTriggersListed(t *testing.T) {
	t.Parallel()
	for _, row := range Transitions {
		if !slices.Contains(allTriggers, row.Trigger) {
			t.Errorf("trigger %q is in the table but not in allTriggers", row.Trigger)
		}
	}
	for _, tr := range allTriggers {
		found := false
		for _, row := range Transitions {
			found = found || row.Trigger == tr
		}
		if !found {
			t.Errorf("trigger %q has no row", tr)
		}
	}
}

// transitionCase is one (from state, trigger) cell of the table with the
// counters that select its guard, and what must happen.
type transitionCase struct {
	from    sluicetype.State
	trigger Trigger
	// counters before (crash limit 3)
	attempt, maxAttempts, crashAttempt int

	to         sluicetype.State
	reason     sluicetype.TerminalReason
	attemptInc int
	crashInc   int
	operator   bool
	quarantine bool
}

// expectedTransitions spells out, independently of the table, every row of
// it for every state it leaves from.
func expectedTransitions() []transitionCase {
	// Counters that leave budget for both guards.
	const a, m, c = 2, 5, 0
	var cs []transitionCase
	add := func(from []sluicetype.State, trig Trigger, to sluicetype.State, reason sluicetype.TerminalReason, mut func(*transitionCase)) {
		for _, f := range from {
			tc := transitionCase{from: f, trigger: trig, attempt: a, maxAttempts: m, crashAttempt: c, to: to, reason: reason}
			if mut != nil {
				mut(&tc)
			}
			cs = append(cs, tc)
		}
	}
	op := func(tc *transitionCase) { tc.operator = true }
	run := []sluicetype.State{sluicetype.StateRunning}

	add([]sluicetype.State{sluicetype.StateScheduled, sluicetype.StateRetryable}, TriggerDue, sluicetype.StateAvailable, sluicetype.ReasonNone, nil)
	add([]sluicetype.State{sluicetype.StateAvailable}, TriggerClaim, sluicetype.StateRunning, sluicetype.ReasonNone, nil)
	add([]sluicetype.State{sluicetype.StateAvailable}, TriggerClaimPastDeadline, sluicetype.StateArchived, sluicetype.ReasonDeadlineExceeded, nil)
	add(run, TriggerSuccess, sluicetype.StateCompleted, sluicetype.ReasonNone, nil)
	add(run, TriggerError, sluicetype.StateRetryable, sluicetype.ReasonNone, func(tc *transitionCase) { tc.attemptInc = 1 })
	add(run, TriggerError, sluicetype.StateArchived, sluicetype.ReasonAttemptsExhausted, func(tc *transitionCase) {
		tc.attempt, tc.maxAttempts, tc.attemptInc = 4, 5, 1
	})
	add(run, TriggerSkip, sluicetype.StateArchived, sluicetype.ReasonSkipped, nil)
	add(run, TriggerDeadline, sluicetype.StateArchived, sluicetype.ReasonDeadlineExceeded, nil)
	add(run, TriggerRevoke, sluicetype.StateDeleted, sluicetype.ReasonNone, nil)
	add(run, TriggerSnooze, sluicetype.StateScheduled, sluicetype.ReasonNone, nil)
	add(run, TriggerUndecodable, sluicetype.StateUndecodable, sluicetype.ReasonUndecodable, nil)
	add(run, TriggerCrash, sluicetype.StateRetryable, sluicetype.ReasonNone, func(tc *transitionCase) { tc.crashInc = 1 })
	add(run, TriggerCrash, sluicetype.StateQuarantined, sluicetype.ReasonQuarantined, func(tc *transitionCase) {
		tc.crashAttempt, tc.crashInc, tc.quarantine = 2, 1, true
	})
	add([]sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable}, TriggerHold, sluicetype.StateQuarantined, sluicetype.ReasonQuarantined, nil)
	add(run, TriggerWait, sluicetype.StateScheduled, sluicetype.ReasonNone, nil)
	add([]sluicetype.State{sluicetype.StateScheduled}, TriggerSignal, sluicetype.StateAvailable, sluicetype.ReasonNone, nil)
	add([]sluicetype.State{sluicetype.StateScheduled}, TriggerChildren, sluicetype.StateAvailable, sluicetype.ReasonNone, nil)
	add(run, TriggerShutdown, sluicetype.StateAvailable, sluicetype.ReasonNone, nil)
	add(run, TriggerLeaseLost, sluicetype.StateAvailable, sluicetype.ReasonNone, nil)
	add([]sluicetype.State{sluicetype.StateArchived, sluicetype.StateCancelled, sluicetype.StateUndecodable}, TriggerOperatorRetry, sluicetype.StateAvailable, sluicetype.ReasonNone, op)
	add([]sluicetype.State{sluicetype.StateQuarantined}, TriggerOperatorRelease, sluicetype.StateAvailable, sluicetype.ReasonNone, func(tc *transitionCase) {
		tc.operator = true
		tc.crashAttempt = 3 // the store resets it; Apply leaves it
	})
	add([]sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable, sluicetype.StateRunning}, TriggerOperatorCancel, sluicetype.StateCancelled, sluicetype.ReasonCancelled, op)
	add([]sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable, sluicetype.StateCompleted, sluicetype.StateArchived, sluicetype.StateQuarantined, sluicetype.StateUndecodable, sluicetype.StateCancelled},
		TriggerOperatorDelete, sluicetype.StateDeleted, sluicetype.ReasonNone, op)
	add([]sluicetype.State{sluicetype.StateCompleted, sluicetype.StateArchived, sluicetype.StateQuarantined, sluicetype.StateUndecodable, sluicetype.StateCancelled}, TriggerRetention, sluicetype.StateDeleted, sluicetype.ReasonNone, op)
	return cs
}

// modelJob is a job in state s with the given counters, a fence, and a
// lease exactly when running.
func modelJob(s sluicetype.State, attempt, maxAttempts, crashAttempt int) *sluicetype.Job {
	j := &sluicetype.Job{
		ID: "job-1", Queue: "default", Kind: "k", State: s,
		Attempt: attempt, MaxAttempts: maxAttempts, CrashAttempt: crashAttempt,
		Fence: 7,
	}
	switch s {
	case sluicetype.StateRunning:
		j.Lease = &sluicetype.Lease{ID: "lease-7", WorkerID: "w1", Fence: j.Fence}
	case sluicetype.StateArchived:
		j.TerminalReason = sluicetype.ReasonAttemptsExhausted
	case sluicetype.StateQuarantined:
		j.TerminalReason = sluicetype.ReasonQuarantined
	case sluicetype.StateUndecodable:
		j.TerminalReason = sluicetype.ReasonUndecodable
	case sluicetype.StateCancelled:
		j.TerminalReason = sluicetype.ReasonCancelled
	}
	return j
}

func rowIndex(row Transition) int {
	for i, r := range Transitions {
		if reflect.DeepEqual(r, row) {
			return i
		}
	}
	return -1
}

func TestTransitionsEveryRow(t *testing.T) {
	t.Parallel()
	cases := expectedTransitions()
	covered := make(map[string]bool)
	for _, tc := range cases {
		name := fmt.Sprintf("%s/%s/attempt=%d,max=%d,crash=%d", tc.from, tc.trigger, tc.attempt, tc.maxAttempts, tc.crashAttempt)
		t.Run(name, func(t *testing.T) {
			j := modelJob(tc.from, tc.attempt, tc.maxAttempts, tc.crashAttempt)
			before := j.Clone()
			row, err := Next(j, tc.trigger, 3)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if !reflect.DeepEqual(j, before) {
				t.Fatal("Next changed the job")
			}
			if i := rowIndex(row); i < 0 {
				t.Fatalf("Next returned a row not in the table: %+v", row)
			} else {
				covered[fmt.Sprintf("%d/%s", i, tc.from)] = true
			}
			if row.To != tc.to || row.Reason != tc.reason || row.Operator != tc.operator || row.Quarantine != tc.quarantine {
				t.Fatalf("row = to %s reason %q operator %v quarantine %v; want to %s reason %q operator %v quarantine %v",
					row.To, row.Reason, row.Operator, row.Quarantine, tc.to, tc.reason, tc.operator, tc.quarantine)
			}
			wantCharge := ChargeNone
			if tc.attemptInc > 0 {
				wantCharge = ChargeAttempt
			} else if tc.crashInc > 0 {
				wantCharge = ChargeCrash
			}
			if row.Charge != wantCharge {
				t.Fatalf("row.Charge = %v, want %v", row.Charge, wantCharge)
			}

			row.Apply(j)
			if j.State != tc.to {
				t.Errorf("state = %s, want %s", j.State, tc.to)
			}
			if j.TerminalReason != tc.reason {
				t.Errorf("terminal reason = %q, want %q", j.TerminalReason, tc.reason)
			}
			if got := j.Attempt - before.Attempt; got != tc.attemptInc {
				t.Errorf("attempt grew by %d, want %d", got, tc.attemptInc)
			}
			if got := j.CrashAttempt - before.CrashAttempt; got != tc.crashInc {
				t.Errorf("crash_attempt grew by %d, want %d", got, tc.crashInc)
			}
			wantFence := before.Fence
			if tc.to == sluicetype.StateRunning {
				wantFence++
			}
			if j.Fence != wantFence {
				t.Errorf("fence = %d, want %d", j.Fence, wantFence)
			}
			if j.MaxAttempts != before.MaxAttempts {
				t.Errorf("max_attempts changed: %d -> %d", before.MaxAttempts, j.MaxAttempts)
			}
			// Apply leaves everything else (leases, times, errors) to the
			// caller.
			after := j.Clone()
			after.State, after.TerminalReason = before.State, before.TerminalReason
			after.Attempt, after.CrashAttempt, after.Fence = before.Attempt, before.CrashAttempt, before.Fence
			if !reflect.DeepEqual(after, before) {
				t.Errorf("Apply changed more than state, reason and counters:\n before %+v\n after  %+v", before, j)
			}
		})
	}
	t.Run("every row and from-state covered", func(t *testing.T) {
		for i, row := range Transitions {
			for _, from := range row.From {
				if !covered[fmt.Sprintf("%d/%s", i, from)] {
					t.Errorf("row %d (%s on %s -> %s) has no case in expectedTransitions", i, row.Trigger, from, row.To)
				}
			}
		}
	})
}

func TestTransitionsInvalidPairs(t *testing.T) {
	t.Parallel()
	valid := make(map[[2]string]bool)
	for _, tc := range expectedTransitions() {
		valid[[2]string{string(tc.from), string(tc.trigger)}] = true
	}
	// Counter settings that exercise every guard on both sides.
	counters := [][3]int{ // attempt, max, crash
		{0, 25, 0}, {4, 5, 0}, {5, 5, 0}, {0, 1, 2}, {2, 5, 2}, {0, 0, 3}, {9, 3, 9},
	}
	invalid := 0
	for _, s := range everyState {
		for _, tr := range append(slices.Clone(allTriggers), Trigger("bogus"), Trigger("")) {
			for _, c := range counters {
				j := modelJob(s, c[0], c[1], c[2])
				before := j.Clone()
				row, err := Next(j, tr, 3)
				if !reflect.DeepEqual(j, before) {
					t.Fatalf("Next(%s, %s) changed the job", s, tr)
				}
				if valid[[2]string{string(s), string(tr)}] {
					if err != nil {
						t.Errorf("Next(%s, %s, counters %v): %v, want a row", s, tr, c, err)
					}
					continue
				}
				invalid++
				if !errors.Is(err, sluicetype.ErrInvalidTransition) {
					t.Errorf("Next(%s, %s, counters %v) = %+v, %v; want ErrInvalidTransition", s, tr, c, row, err)
				}
				if !reflect.DeepEqual(row, Transition{}) {
					t.Errorf("Next(%s, %s) returned row %+v with its error", s, tr, row)
				}
			}
		}
	}
	if invalid == 0 {
		t.Fatal("no invalid pairs tried")
	}
}

func TestTransitionsGuardBoundaries(t *testing.T) {
	t.Parallel()
	errCases := []struct {
		attempt, max int
		to           sluicetype.State
		reason       sluicetype.TerminalReason
	}{
		{0, 1, sluicetype.StateArchived, sluicetype.ReasonAttemptsExhausted}, // attempt+1 == max
		{0, 2, sluicetype.StateRetryable, sluicetype.ReasonNone},
		{3, 5, sluicetype.StateRetryable, sluicetype.ReasonNone}, // attempt+1 == max-1
		{4, 5, sluicetype.StateArchived, sluicetype.ReasonAttemptsExhausted},
		{5, 5, sluicetype.StateArchived, sluicetype.ReasonAttemptsExhausted}, // already over (retried past budget)
		{24, 25, sluicetype.StateArchived, sluicetype.ReasonAttemptsExhausted},
		{23, 25, sluicetype.StateRetryable, sluicetype.ReasonNone},
		{0, 0, sluicetype.StateArchived, sluicetype.ReasonAttemptsExhausted}, // a zero budget archives at once
	}
	for _, tc := range errCases {
		j := modelJob(sluicetype.StateRunning, tc.attempt, tc.max, 0)
		row, err := Next(j, TriggerError, 3)
		if err != nil {
			t.Fatalf("error with attempt %d of %d: %v", tc.attempt, tc.max, err)
		}
		if row.To != tc.to || row.Reason != tc.reason || row.Charge != ChargeAttempt {
			t.Errorf("error with attempt %d of %d -> %s %q (charge %v), want %s %q (attempt charged)",
				tc.attempt, tc.max, row.To, row.Reason, row.Charge, tc.to, tc.reason)
		}
		row.Apply(j)
		if j.Attempt != tc.attempt+1 {
			t.Errorf("attempt after error = %d, want %d", j.Attempt, tc.attempt+1)
		}
	}

	crashCases := []struct {
		crash, limit int
		to           sluicetype.State
	}{
		{0, 3, sluicetype.StateRetryable},
		{1, 3, sluicetype.StateRetryable},
		{2, 3, sluicetype.StateQuarantined}, // crash_attempt+1 == crash_limit
		{3, 3, sluicetype.StateQuarantined},
		{0, 1, sluicetype.StateQuarantined},
		{0, 2, sluicetype.StateRetryable},
		{1, 2, sluicetype.StateQuarantined},
		{1, 0, sluicetype.StateRetryable}, // limit <= 0 means DefaultCrashLimit (3)
		{2, 0, sluicetype.StateQuarantined},
		{1, -1, sluicetype.StateRetryable},
		{2, -1, sluicetype.StateQuarantined},
		{8, 10, sluicetype.StateRetryable},
		{9, 10, sluicetype.StateQuarantined},
	}
	for _, tc := range crashCases {
		// Crashes never depend on the attempt budget, even an exhausted one.
		for _, a := range [][2]int{{0, 25}, {24, 25}, {7, 5}} {
			j := modelJob(sluicetype.StateRunning, a[0], a[1], tc.crash)
			row, err := Next(j, TriggerCrash, tc.limit)
			if err != nil {
				t.Fatalf("crash %d of limit %d: %v", tc.crash, tc.limit, err)
			}
			if row.To != tc.to || row.Charge != ChargeCrash || row.Quarantine != (tc.to == sluicetype.StateQuarantined) {
				t.Errorf("crash with crash_attempt %d, limit %d (attempt %d/%d) -> %s charge %v quarantine %v, want %s",
					tc.crash, tc.limit, a[0], a[1], row.To, row.Charge, row.Quarantine, tc.to)
			}
			row.Apply(j)
			if j.CrashAttempt != tc.crash+1 || j.Attempt != a[0] {
				t.Errorf("after crash: crash_attempt %d attempt %d, want %d %d", j.CrashAttempt, j.Attempt, tc.crash+1, a[0])
			}
		}
	}
	if sluicetype.DefaultCrashLimit != 3 {
		t.Errorf("DefaultCrashLimit = %d, the design says 3", sluicetype.DefaultCrashLimit)
	}

	// The attempt guard does not apply to crashes' rows and vice versa:
	// an exhausted crash budget does not archive an error.
	j := modelJob(sluicetype.StateRunning, 0, 5, 9)
	if row, _ := Next(j, TriggerError, 3); row.To != sluicetype.StateRetryable {
		t.Errorf("error with crash budget spent -> %s, want retryable", row.To)
	}
}

// designRow is one line of the design's transition table (as written
// down here), expanded to one
// from-state, with the guard that picks it.
type designRow struct {
	from    sluicetype.State
	trigger Trigger
	guard   Guard
	to      sluicetype.State
}

// TestTransitionsCoverDesign checks the table against the design's, line by
// line, both ways: every design line has its row and every row (per
// from-state) is a design line.
func TestTransitionsCoverDesign(t *testing.T) {
	t.Parallel()
	var design []designRow
	line := func(from []sluicetype.State, trig Trigger, g Guard, to sluicetype.State) {
		for _, f := range from {
			design = append(design, designRow{f, trig, g, to})
		}
	}
	notRunning := []sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable, sluicetype.StateCompleted, sluicetype.StateArchived, sluicetype.StateQuarantined, sluicetype.StateUndecodable, sluicetype.StateCancelled}
	terminal := []sluicetype.State{sluicetype.StateCompleted, sluicetype.StateArchived, sluicetype.StateQuarantined, sluicetype.StateUndecodable, sluicetype.StateCancelled}
	R := []sluicetype.State{sluicetype.StateRunning}

	// | scheduled, retryable | due | available |
	line([]sluicetype.State{sluicetype.StateScheduled, sluicetype.StateRetryable}, TriggerDue, GuardAlways, sluicetype.StateAvailable)
	// | available | claim | running (fence +1, lease set) |
	line([]sluicetype.State{sluicetype.StateAvailable}, TriggerClaim, GuardAlways, sluicetype.StateRunning)
	// | running | success | completed (deleted when retention is 0) |
	line(R, TriggerSuccess, GuardAlways, sluicetype.StateCompleted)
	// | running | error, attempt+1 < max_attempts | retryable (backoff) |
	// | running | attempt timeout | as an error |
	line(R, TriggerError, GuardAttemptsLeft, sluicetype.StateRetryable)
	// | running | error, attempt+1 >= max_attempts | archived: attempts_exhausted |
	line(R, TriggerError, GuardAttemptsExhausted, sluicetype.StateArchived)
	// | running | skip | archived: skipped |
	line(R, TriggerSkip, GuardAlways, sluicetype.StateArchived)
	// | running | deadline passed | archived: deadline_exceeded |
	line(R, TriggerDeadline, GuardAlways, sluicetype.StateArchived)
	// | running | revoke | deleted |
	line(R, TriggerRevoke, GuardAlways, sluicetype.StateDeleted)
	// | running | snooze(d) | scheduled (no attempt used) |
	line(R, TriggerSnooze, GuardAlways, sluicetype.StateScheduled)
	// | running | no upcast path / malformed / step set changed | undecodable |
	line(R, TriggerUndecodable, GuardAlways, sluicetype.StateUndecodable)
	// | running | panic, or process gone, crash_attempt+1 < crash_limit | retryable |
	line(R, TriggerCrash, GuardCrashesLeft, sluicetype.StateRetryable)
	// | running | the same, crash_attempt+1 >= crash_limit | quarantined |
	line(R, TriggerCrash, GuardCrashLimit, sluicetype.StateQuarantined)
	// | available | claim after the deadline passed | archived: deadline_exceeded |
	line([]sluicetype.State{sluicetype.StateAvailable}, TriggerClaimPastDeadline, GuardAlways, sluicetype.StateArchived)
	// | available | claim of a job whose schema version or step set is newer
	// than this worker knows | skipped by this worker | — no state change,
	// so no row.
	// Quarantine section: "its waiting jobs become quarantined" — held
	// when their fingerprint is quarantined.
	line([]sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable}, TriggerHold, GuardAlways, sluicetype.StateQuarantined)
	// Workflows that wait: "it is scheduled until its time, its signal
	// or its last child, with those transitions as rows of the table".
	// | running | a wait begins (sleep, signal, children) | scheduled (no attempt used) |
	line(R, TriggerWait, GuardAlways, sluicetype.StateScheduled)
	// | scheduled | the signal it waits for is sent | available |
	line([]sluicetype.State{sluicetype.StateScheduled}, TriggerSignal, GuardAlways, sluicetype.StateAvailable)
	// | scheduled | its last child ended | available |
	line([]sluicetype.State{sluicetype.StateScheduled}, TriggerChildren, GuardAlways, sluicetype.StateAvailable)
	// (its time: the due row, scheduled → available.)
	// | running | graceful shutdown, work unfinished | available |
	line(R, TriggerShutdown, GuardAlways, sluicetype.StateAvailable)
	// | running | lease lost while its process still lives | available |
	line(R, TriggerLeaseLost, GuardAlways, sluicetype.StateAvailable)
	// | archived, cancelled, undecodable | operator retry | available |
	line([]sluicetype.State{sluicetype.StateArchived, sluicetype.StateCancelled, sluicetype.StateUndecodable}, TriggerOperatorRetry, GuardAlways, sluicetype.StateAvailable)
	// | quarantined | operator release | available, crash_attempt reset |
	line([]sluicetype.State{sluicetype.StateQuarantined}, TriggerOperatorRelease, GuardAlways, sluicetype.StateAvailable)
	// | scheduled, available, retryable | operator cancel | cancelled |
	line([]sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable}, TriggerOperatorCancel, GuardAlways, sluicetype.StateCancelled)
	// | running | operator cancel | cancelled (lease cleared in the same write) |
	line(R, TriggerOperatorCancel, GuardAlways, sluicetype.StateCancelled)
	// | any but running | operator delete | deleted |
	line(notRunning, TriggerOperatorDelete, GuardAlways, sluicetype.StateDeleted)
	// | terminal | retention elapsed | deleted |
	line(terminal, TriggerRetention, GuardAlways, sluicetype.StateDeleted)

	inTable := func(d designRow) bool {
		for _, row := range Transitions {
			if row.Trigger == d.trigger && row.Guard == d.guard && row.To == d.to && slices.Contains(row.From, d.from) {
				return true
			}
		}
		return false
	}
	for _, d := range design {
		if !inTable(d) {
			t.Errorf("design line (%s, %s, guard %d) -> %s has no row", d.from, d.trigger, d.guard, d.to)
		}
	}
	for i, row := range Transitions {
		for _, f := range row.From {
			d := designRow{f, row.Trigger, row.Guard, row.To}
			if !slices.Contains(design, d) {
				t.Errorf("row %d (%s, %s, guard %d) -> %s is not in the design table", i, f, row.Trigger, row.Guard, row.To)
			}
		}
	}

	// Terminal states as the design lists them.
	for _, s := range everyState {
		if got, want := s.Terminal(), slices.Contains(terminal, s); got != want {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want)
		}
	}
	// Only operator rows (and retention) leave a terminal state.
	for i, row := range Transitions {
		for _, f := range row.From {
			if f.Terminal() && !row.Operator {
				t.Errorf("row %d leaves terminal %s on %s without Operator", i, f, row.Trigger)
			}
		}
	}
}

// TestTransitionsNoAmbiguity checks that for any job at most one row
// applies: the guards of a trigger's rows are complementary.
func TestTransitionsNoAmbiguity(t *testing.T) {
	t.Parallel()
	for _, s := range everyState {
		for _, tr := range allTriggers {
			for a := 0; a <= 3; a++ {
				for c := 0; c <= 3; c++ {
					j := modelJob(s, a, 3, c)
					n := 0
					for _, row := range Transitions {
						if row.Trigger == tr && row.Guard.Holds(j, 3) && slices.Contains(row.From, s) {
							n++
						}
					}
					if n > 1 {
						t.Errorf("%d rows apply to %s on %s (attempt %d/3, crash %d/3)", n, tr, s, a, c)
					}
				}
			}
		}
	}
}

// TestTransitionsProperty drives a model job through random trigger
// sequences, taking each trigger only when Next allows it, and checks
// the invariants after every step. Set SLUICE_PROPERTY_SEED to
// replay a logged seed.
func TestTransitionsProperty(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_PROPERTY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SLUICE_PROPERTY_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with SLUICE_PROPERTY_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	const (
		sequences = 2000
		steps     = 300
	)
	taken := make([]int, len(Transitions))
	for seq := range sequences {
		crashLimit := 1 + rng.IntN(4)
		maxAttempts := 1 + rng.IntN(5)
		start := []sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable}[rng.IntN(2)]
		j := &sluicetype.Job{ID: fmt.Sprintf("seq-%d", seq), State: start, MaxAttempts: maxAttempts}
		var history []string
		for step := range steps {
			tr := allTriggers[rng.IntN(len(allTriggers))]
			row, err := Next(j, tr, crashLimit)
			if err != nil {
				if !errors.Is(err, sluicetype.ErrInvalidTransition) {
					t.Fatalf("seed %d seq %d: Next(%s, %s): %v", seed, seq, j.State, tr, err)
				}
				continue
			}
			taken[rowIndex(row)]++
			before := j.Clone()
			history = append(history, fmt.Sprintf("%s-[%s]->%s", before.State, tr, row.To))
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d seq %d step %d: %s\n before %+v\n after  %+v\n history %v",
					seed, seq, step, fmt.Sprintf(format, args...), before, j, history)
			}

			row.Apply(j)
			// What the store does around the table's pure model.
			switch {
			case j.State == sluicetype.StateRunning:
				j.Lease = &sluicetype.Lease{ID: fmt.Sprintf("lease-%d", j.Fence), WorkerID: "w", Fence: j.Fence}
			case before.State == sluicetype.StateRunning:
				j.Lease = nil
			}
			switch tr {
			case TriggerOperatorRelease:
				j.CrashAttempt = 0
			case TriggerOperatorRetry:
				j.MaxAttempts = max(j.MaxAttempts, j.Attempt+1)
			}

			// Fence grows by exactly 1 on each entry to running and
			// never otherwise.
			entered := j.State == sluicetype.StateRunning && before.State != sluicetype.StateRunning
			switch {
			case entered && j.Fence != before.Fence+1:
				fail("entered running with fence %d -> %d", before.Fence, j.Fence)
			case !entered && j.Fence != before.Fence:
				fail("fence changed %d -> %d without entering running", before.Fence, j.Fence)
			}
			// A lease exists iff running, and carries the job's fence.
			if (j.Lease != nil) != (j.State == sluicetype.StateRunning) {
				fail("lease %v in state %s", j.Lease, j.State)
			}
			if j.Lease != nil && j.Lease.Fence != j.Fence {
				fail("lease fence %d, job fence %d", j.Lease.Fence, j.Fence)
			}
			// A terminal state is left only by an operator row.
			if before.State.Terminal() && j.State != before.State && !row.Operator {
				fail("left terminal %s by %s without an operator", before.State, tr)
			}
			// Counters never decrease, except release resets crashes.
			if j.Attempt < before.Attempt {
				fail("attempt decreased")
			}
			if tr == TriggerOperatorRelease {
				if j.CrashAttempt != 0 {
					fail("release left crash_attempt %d", j.CrashAttempt)
				}
			} else if j.CrashAttempt < before.CrashAttempt {
				fail("crash_attempt decreased")
			}
			if j.Attempt-before.Attempt > 1 || j.CrashAttempt-before.CrashAttempt > 1 {
				fail("a counter grew by more than one")
			}
			// Budgets: the job is never past its attempt budget, and only
			// a quarantined job has spent its crash budget.
			if j.Attempt > j.MaxAttempts {
				fail("attempt %d past max_attempts %d", j.Attempt, j.MaxAttempts)
			}
			if j.State == sluicetype.StateRetryable && j.Attempt >= j.MaxAttempts {
				fail("retryable with its budget spent")
			}
			if j.CrashAttempt >= crashLimit && j.State != sluicetype.StateQuarantined && j.State != sluicetype.StateDeleted {
				fail("crash_attempt %d of limit %d in state %s", j.CrashAttempt, crashLimit, j.State)
			}
			// A terminal reason exactly on the dead states.
			switch j.State {
			case sluicetype.StateArchived, sluicetype.StateQuarantined, sluicetype.StateUndecodable, sluicetype.StateCancelled:
				if j.TerminalReason == sluicetype.ReasonNone {
					fail("%s without a terminal reason", j.State)
				}
			default:
				if j.TerminalReason != sluicetype.ReasonNone {
					fail("%s with terminal reason %q", j.State, j.TerminalReason)
				}
			}
			// Quarantined only by the crash that quarantines the fingerprint,
			// or by the hold of a waiting job of that fingerprint.
			if j.State == sluicetype.StateQuarantined && (j.TerminalReason != sluicetype.ReasonQuarantined || !(row.Quarantine || row.Trigger == TriggerHold)) {
				fail("quarantined by a row that does not quarantine, or reason %q", j.TerminalReason)
			}

			if j.State == sluicetype.StateDeleted {
				break // the row is gone: nothing may happen to it
			}
		}
		if j.State == sluicetype.StateDeleted {
			for _, tr := range allTriggers {
				if _, err := Next(j, tr, crashLimit); !errors.Is(err, sluicetype.ErrInvalidTransition) {
					t.Fatalf("seed %d: a deleted job took %s", seed, tr)
				}
			}
		}
	}
	for i, n := range taken {
		if n == 0 {
			t.Errorf("seed %d: row %d (%s -> %s) was never taken", seed, i, Transitions[i].Trigger, Transitions[i].To)
		}
	}
}

// The operator specs come from the table: change a row and the spec
// follows.
func TestActionSpecsFollowTheTable(t *testing.T) {
	t.Parallel()
	for _, a := range sluicetype.Actions {
		spec, err := SpecFor(a)
		if err != nil {
			t.Fatal(err)
		}
		row, err := TransitionFor(spec.Trigger)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(spec.From, row.From) || spec.To != row.To || spec.Reason != row.Reason || spec.Event != row.Event {
			t.Fatalf("%s: spec %+v does not match its row %+v", a, spec, row)
		}
	}
	retry, _ := SpecFor(sluicetype.ActionRetry)
	if !retry.Has(EffectOneMoreAttempt) || !retry.Has(EffectScheduleNow) || !retry.Has(EffectReopen) ||
		!retry.Refuses(RefuseQuarantined) || !retry.Refuses(RefuseSuperseded) || retry.Has(EffectClearLease) {
		t.Fatalf("retry spec %+v", retry)
	}
	cancel, _ := SpecFor(sluicetype.ActionCancel)
	if !cancel.Has(EffectClearLease) || !cancel.Has(EffectFinalize) || cancel.Has(EffectScheduleNow) {
		t.Fatalf("cancel spec %+v", cancel)
	}
	del, _ := SpecFor(sluicetype.ActionDelete)
	if !del.Has(EffectDelete) || del.Event != "" {
		t.Fatalf("delete spec %+v", del)
	}

	// A changed table: retry also takes completed jobs, and cancel no
	// longer takes running ones.
	table := slices.Clone(Transitions)
	for i := range table {
		switch table[i].Trigger {
		case TriggerOperatorRetry:
			table[i].From = append(slices.Clone(table[i].From), sluicetype.StateCompleted)
		case TriggerOperatorCancel:
			table[i].From = []sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable}
		}
	}
	r2, err := specFrom(table, sluicetype.ActionRetry)
	if err != nil {
		t.Fatal(err)
	}
	if !r2.Allows(sluicetype.StateCompleted) || retry.Allows(sluicetype.StateCompleted) {
		t.Fatalf("retry from completed: changed table %v, real table %v", r2.From, retry.From)
	}
	if sel, ok := r2.Narrow(sluicetype.Filter{States: []sluicetype.State{sluicetype.StateCompleted, sluicetype.StateRunning}}); !ok || !slices.Equal(sel.States, []sluicetype.State{sluicetype.StateCompleted}) {
		t.Fatalf("narrowed by the changed table: %v %v", sel.States, ok)
	}
	c2, err := specFrom(table, sluicetype.ActionCancel)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Allows(sluicetype.StateRunning) || c2.Has(EffectClearLease) {
		t.Fatalf("cancel without running still clears leases: %+v", c2)
	}
	if _, err := specFrom(table, sluicetype.Action("explode")); !errors.Is(err, sluicetype.ErrInvalid) {
		t.Fatalf("unknown action: %v", err)
	}
}
