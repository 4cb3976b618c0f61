package engine

import "fmt"

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

func (g Guard) holds(j *Job, crashLimit int) bool {
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
	From    []State
	Trigger Trigger
	Guard   Guard
	To      State
	Reason  TerminalReason
	Charge  Charge
	// Operator marks rows only an operator (or retention) may take; they
	// are the only way out of a terminal state.
	Operator bool
	// Quarantine marks the row that also quarantines the fingerprint.
	Quarantine bool
	// Event is the timeline entry an operator row writes (operator rows
	// only; worker outcomes choose theirs in the finish plan).
	Event EventKind
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
	{From: []State{StateScheduled, StateRetryable}, Trigger: TriggerDue, To: StateAvailable},
	{From: []State{StateAvailable}, Trigger: TriggerClaim, To: StateRunning},
	{From: []State{StateAvailable}, Trigger: TriggerClaimPastDeadline, To: StateArchived, Reason: ReasonDeadlineExceeded},
	{From: []State{StateRunning}, Trigger: TriggerSuccess, To: StateCompleted},
	{From: []State{StateRunning}, Trigger: TriggerError, Guard: GuardAttemptsLeft, To: StateRetryable, Charge: ChargeAttempt},
	{From: []State{StateRunning}, Trigger: TriggerError, Guard: GuardAttemptsExhausted, To: StateArchived, Reason: ReasonAttemptsExhausted, Charge: ChargeAttempt},
	{From: []State{StateRunning}, Trigger: TriggerSkip, To: StateArchived, Reason: ReasonSkipped},
	{From: []State{StateRunning}, Trigger: TriggerDeadline, To: StateArchived, Reason: ReasonDeadlineExceeded},
	{From: []State{StateRunning}, Trigger: TriggerRevoke, To: StateDeleted},
	{From: []State{StateRunning}, Trigger: TriggerSnooze, To: StateScheduled},
	{From: []State{StateRunning}, Trigger: TriggerUndecodable, To: StateUndecodable, Reason: ReasonUndecodable},
	{From: []State{StateRunning}, Trigger: TriggerCrash, Guard: GuardCrashesLeft, To: StateRetryable, Charge: ChargeCrash},
	{From: []State{StateRunning}, Trigger: TriggerCrash, Guard: GuardCrashLimit, To: StateQuarantined, Reason: ReasonQuarantined, Charge: ChargeCrash, Quarantine: true},
	{From: []State{StateScheduled, StateAvailable, StateRetryable}, Trigger: TriggerHold, To: StateQuarantined, Reason: ReasonQuarantined},
	{From: []State{StateRunning}, Trigger: TriggerWait, To: StateScheduled},
	{From: []State{StateScheduled}, Trigger: TriggerSignal, To: StateAvailable},
	{From: []State{StateScheduled}, Trigger: TriggerChildren, To: StateAvailable},
	{From: []State{StateRunning}, Trigger: TriggerShutdown, To: StateAvailable},
	{From: []State{StateRunning}, Trigger: TriggerLeaseLost, To: StateAvailable},
	{From: []State{StateArchived, StateCancelled, StateUndecodable}, Trigger: TriggerOperatorRetry, To: StateAvailable, Operator: true,
		Event: EventRetried, Effects: EffectOneMoreAttempt, Refuse: RefuseQuarantined | RefuseSuperseded},
	{From: []State{StateQuarantined}, Trigger: TriggerOperatorRelease, To: StateAvailable, Operator: true,
		Event: EventReleased, Effects: EffectResetCrashes},
	{From: []State{StateScheduled, StateAvailable, StateRetryable, StateRunning}, Trigger: TriggerOperatorCancel, To: StateCancelled, Reason: ReasonCancelled, Operator: true,
		Event: EventCancelled},
	{From: []State{StateScheduled, StateAvailable, StateRetryable, StateCompleted, StateArchived, StateQuarantined, StateUndecodable, StateCancelled}, Trigger: TriggerOperatorDelete, To: StateDeleted, Operator: true},
	{From: []State{StateCompleted, StateArchived, StateQuarantined, StateUndecodable, StateCancelled}, Trigger: TriggerRetention, To: StateDeleted, Operator: true},
}

// DefaultCrashLimit is how many crashes quarantine a job's fingerprint.
const DefaultCrashLimit = 3

// Next finds the row that applies to j for trigger t. It returns
// ErrInvalidTransition when no row does.
func Next(j *Job, t Trigger, crashLimit int) (Transition, error) {
	if crashLimit <= 0 {
		crashLimit = DefaultCrashLimit
	}
	for _, row := range Transitions {
		if row.Trigger != t || !row.Guard.holds(j, crashLimit) {
			continue
		}
		for _, s := range row.From {
			if s == j.State {
				return row, nil
			}
		}
	}
	return Transition{}, fmt.Errorf("%w: %s on a %s job", ErrInvalidTransition, t, j.State)
}

// Apply changes j's counters and state as row says. It is the pure model of
// a transition, used by the property test and by backends that want it;
// timestamps, leases and errors are the caller's.
func (row Transition) Apply(j *Job) {
	switch row.Charge {
	case ChargeAttempt:
		j.Attempt++
	case ChargeCrash:
		j.CrashAttempt++
	}
	if row.To == StateRunning {
		j.Fence++
	}
	j.State = row.To
	j.TerminalReason = row.Reason
}

// transitionFor returns the one row of trigger t (for triggers with a
// single row).
func transitionFor(t Trigger) (Transition, error) {
	var found []Transition
	for _, row := range Transitions {
		if row.Trigger == t {
			found = append(found, row)
		}
	}
	if len(found) != 1 {
		return Transition{}, fmt.Errorf("%w: %d rows for %s", ErrInvalidTransition, len(found), t)
	}
	return found[0], nil
}
