package backend

import (
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
)

// Trigger is what happens to a job: a worker outcome, a maintenance
// finding, or an operator action.
type Trigger string

const (
	TriggerDue               Trigger = "due"
	TriggerClaim             Trigger = "claim"
	TriggerClaimPastDeadline Trigger = "claim_past_deadline"
	TriggerSuccess           Trigger = "success"
	TriggerError             Trigger = "error" // returned error or attempt timeout
	TriggerSkip              Trigger = "skip"
	TriggerDeadline          Trigger = "deadline"
	TriggerRevoke            Trigger = "revoke"
	TriggerSnooze            Trigger = "snooze"
	TriggerUndecodable       Trigger = "undecodable"
	TriggerCrash             Trigger = "crash" // panic, or the owning process is gone
	TriggerShutdown          Trigger = "shutdown"
	TriggerLeaseLost         Trigger = "lease_lost" // lease expired while the process lives
	TriggerOperatorRetry     Trigger = "operator_retry"
	TriggerOperatorRelease   Trigger = "operator_release"
	TriggerOperatorCancel    Trigger = "operator_cancel"
	TriggerOperatorDelete    Trigger = "operator_delete"
	TriggerRetention         Trigger = "retention"
	// TriggerHold: the job's fingerprint was quarantined while it waited.
	TriggerHold Trigger = "hold"
	// TriggerWait: the handler began a wait (wait.go): a sleep, a signal,
	// its children. No attempt is spent.
	TriggerWait Trigger = "wait"
	// TriggerSignal: the signal a waiting job waits for was sent.
	TriggerSignal Trigger = "signal"
	// TriggerChildren: the last child of a job waiting for them ended.
	TriggerChildren Trigger = "children"
)

// Charge says which counter a transition spends.
type Charge int

const (
	ChargeNone Charge = iota
	ChargeAttempt
	ChargeCrash
)

// Guard decides between two rows of the same trigger.
type Guard int

const (
	GuardAlways Guard = iota
	// GuardAttemptsLeft: attempt+1 < max_attempts.
	GuardAttemptsLeft
	// GuardAttemptsExhausted: attempt+1 >= max_attempts.
	GuardAttemptsExhausted
	// GuardCrashesLeft: crash_attempt+1 < crash_limit.
	GuardCrashesLeft
	// GuardCrashLimit: crash_attempt+1 >= crash_limit.
	GuardCrashLimit
)

func (g Guard) Holds(j *sluicetype.Job, crashLimit int) bool {
	switch g {
	case GuardAttemptsLeft:
		return j.Attempt+1 < j.MaxAttempts
	case GuardAttemptsExhausted:
		return j.Attempt+1 >= j.MaxAttempts
	case GuardCrashesLeft:
		return j.CrashAttempt+1 < crashLimit
	case GuardCrashLimit:
		return j.CrashAttempt+1 >= crashLimit
	}
	return true
}

// Transition is one row of the table.
type Transition struct {
	From    []sluicetype.State
	Trigger Trigger
	Guard   Guard
	To      sluicetype.State
	Reason  sluicetype.TerminalReason
	Charge  Charge
	// Operator marks rows only an operator (or retention) may take; they
	// are the only way out of a terminal state.
	Operator bool
	// Quarantine marks the row that also quarantines the fingerprint.
	Quarantine bool
	// Event is the timeline entry an operator row writes (operator rows
	// only; worker outcomes choose theirs in the finish plan).
	Event sluicetype.EventKind
	// Effects and Refuse are what an operator row does beside the state
	// and what refuses it; the effects that follow from the states alone
	// are added by SpecFor.
	Effects Effect
	Refuse  Refusal
}

// Transitions is the job state machine: one row per (from states,
// trigger, guard) and the state it leads to, transcribed from the design
// table in TestTransitionsCoverDesign. Code consults it through Next and
// SpecFor; nothing else decides a state.
var Transitions = []Transition{
	{From: []sluicetype.State{sluicetype.StateScheduled, sluicetype.StateRetryable}, Trigger: TriggerDue, To: sluicetype.StateAvailable},
	{From: []sluicetype.State{sluicetype.StateAvailable}, Trigger: TriggerClaim, To: sluicetype.StateRunning},
	{From: []sluicetype.State{sluicetype.StateAvailable}, Trigger: TriggerClaimPastDeadline, To: sluicetype.StateArchived, Reason: sluicetype.ReasonDeadlineExceeded},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerSuccess, To: sluicetype.StateCompleted},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerError, Guard: GuardAttemptsLeft, To: sluicetype.StateRetryable, Charge: ChargeAttempt},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerError, Guard: GuardAttemptsExhausted, To: sluicetype.StateArchived, Reason: sluicetype.ReasonAttemptsExhausted, Charge: ChargeAttempt},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerSkip, To: sluicetype.StateArchived, Reason: sluicetype.ReasonSkipped},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerDeadline, To: sluicetype.StateArchived, Reason: sluicetype.ReasonDeadlineExceeded},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerRevoke, To: sluicetype.StateDeleted},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerSnooze, To: sluicetype.StateScheduled},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerUndecodable, To: sluicetype.StateUndecodable, Reason: sluicetype.ReasonUndecodable},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerCrash, Guard: GuardCrashesLeft, To: sluicetype.StateRetryable, Charge: ChargeCrash},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerCrash, Guard: GuardCrashLimit, To: sluicetype.StateQuarantined, Reason: sluicetype.ReasonQuarantined, Charge: ChargeCrash, Quarantine: true},
	{From: []sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable}, Trigger: TriggerHold, To: sluicetype.StateQuarantined, Reason: sluicetype.ReasonQuarantined},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerWait, To: sluicetype.StateScheduled},
	{From: []sluicetype.State{sluicetype.StateScheduled}, Trigger: TriggerSignal, To: sluicetype.StateAvailable},
	{From: []sluicetype.State{sluicetype.StateScheduled}, Trigger: TriggerChildren, To: sluicetype.StateAvailable},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerShutdown, To: sluicetype.StateAvailable},
	{From: []sluicetype.State{sluicetype.StateRunning}, Trigger: TriggerLeaseLost, To: sluicetype.StateAvailable},
	{From: []sluicetype.State{sluicetype.StateArchived, sluicetype.StateCancelled, sluicetype.StateUndecodable}, Trigger: TriggerOperatorRetry, To: sluicetype.StateAvailable, Operator: true,
		Event: sluicetype.EventRetried, Effects: EffectOneMoreAttempt, Refuse: RefuseQuarantined | RefuseSuperseded},
	{From: []sluicetype.State{sluicetype.StateQuarantined}, Trigger: TriggerOperatorRelease, To: sluicetype.StateAvailable, Operator: true,
		Event: sluicetype.EventReleased, Effects: EffectResetCrashes},
	{From: []sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable, sluicetype.StateRunning}, Trigger: TriggerOperatorCancel, To: sluicetype.StateCancelled, Reason: sluicetype.ReasonCancelled, Operator: true,
		Event: sluicetype.EventCancelled},
	{From: []sluicetype.State{sluicetype.StateScheduled, sluicetype.StateAvailable, sluicetype.StateRetryable, sluicetype.StateCompleted, sluicetype.StateArchived, sluicetype.StateQuarantined, sluicetype.StateUndecodable, sluicetype.StateCancelled}, Trigger: TriggerOperatorDelete, To: sluicetype.StateDeleted, Operator: true},
	{From: []sluicetype.State{sluicetype.StateCompleted, sluicetype.StateArchived, sluicetype.StateQuarantined, sluicetype.StateUndecodable, sluicetype.StateCancelled}, Trigger: TriggerRetention, To: sluicetype.StateDeleted, Operator: true},
}

// Next finds the row that applies to j for trigger t. It returns
// ErrInvalidTransition when no row does.
func Next(j *sluicetype.Job, t Trigger, crashLimit int) (Transition, error) {
	if crashLimit <= 0 {
		crashLimit = sluicetype.DefaultCrashLimit
	}
	for _, row := range Transitions {
		if row.Trigger != t || !row.Guard.Holds(j, crashLimit) {
			continue
		}
		for _, s := range row.From {
			if s == j.State {
				return row, nil
			}
		}
	}
	return Transition{}, fmt.Errorf("%w: %s on a %s job", sluicetype.ErrInvalidTransition, t, j.State)
}

// Apply changes j's counters and state as row says. It is the pure model of
// a transition, used by the property test and by backends that want it;
// timestamps, leases and errors are the caller's.
func (row Transition) Apply(j *sluicetype.Job) {
	switch row.Charge {
	case ChargeAttempt:
		j.Attempt++
	case ChargeCrash:
		j.CrashAttempt++
	}
	if row.To == sluicetype.StateRunning {
		j.Fence++
	}
	j.State = row.To
	j.TerminalReason = row.Reason
}

// TransitionFor returns the one row of trigger t (for triggers with a
// single row).
func TransitionFor(t Trigger) (Transition, error) {
	var found []Transition
	for _, row := range Transitions {
		if row.Trigger == t {
			found = append(found, row)
		}
	}
	if len(found) != 1 {
		return Transition{}, fmt.Errorf("%w: %d rows for %s", sluicetype.ErrInvalidTransition, len(found), t)
	}
	return found[0], nil
}
