package backend

import (
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// Plans: the writes the engine resolves and a store applies.
//
// Every rule lives in the engine. For each worker outcome, maintenance
// finding and operator action the engine works out the whole write — the
// target state, the times to set or clear, the error entry and its cap,
// the event row and its text, the counter deltas and the fingerprint's
// consequences — and hands it to the store as one of these values. A store
// applies a plan as one transaction (one SQL transaction, one Lua script)
// and decides nothing: it holds no user-facing text and chooses no state.
// The fences a plan carries (a lease, a version, an operation lease) are
// checked in that same transaction.

// Schedule says what a write does to a job's scheduled_at.
type Schedule int

const (
	// ScheduleKeep leaves scheduled_at as it is.
	ScheduleKeep Schedule = iota
	// ScheduleNow sets it to the store's now.
	ScheduleNow
	// ScheduleAfter sets it to the store's now plus the plan's Delay.
	ScheduleAfter
)

// ErrorWrite appends one entry to a job's error list.
type ErrorWrite struct {
	// Entry is appended as it is, but for At, which the store sets to its
	// now.
	Entry sluicetype.AttemptError
	// Keep caps the list after the append: the first entry and the latest
	// Keep-1 stay (0: no cap). See TrimErrors.
	Keep int
	// LastError and Pattern become the job's last error and error
	// pattern, which the error filter and the error groups read.
	LastError string
	Pattern   string
}

// TrimErrors applies an ErrorWrite's Keep rule to a list, for stores that
// hold the list as a value they rewrite.
func TrimErrors(list []sluicetype.AttemptError, keep int) []sluicetype.AttemptError {
	if keep <= 0 || len(list) <= keep {
		return list
	}
	out := make([]sluicetype.AttemptError, 0, keep)
	out = append(out, list[0])
	return append(out, list[len(list)-(keep-1):]...)
}

// EventWrite is one timeline row, written as it is at the store's now.
type EventWrite struct {
	Kind    sluicetype.EventKind
	Actor   string
	From    sluicetype.State
	To      sluicetype.State
	Attempt int
	Message string
}

// CountDelta moves N jobs of Queue from one state to another in the
// maintained counters ("" for From when the jobs are new, StateDeleted for
// To when they are gone).
type CountDelta struct {
	Queue    string
	From, To sluicetype.State
	N        int64
}

// FingerprintWrite is what a worker outcome does to the job's fingerprint.
type FingerprintWrite struct {
	Fingerprint string
	Kind        string
	// AddCrashes is added to the crash count of the fingerprint's record
	// when it has one (quarantined or on probation); without Quarantine
	// no record is created.
	AddCrashes int
	// Quarantine creates the record, or bumps it, as quarantined (since
	// kept when it already was). A new record counts the crashes of all
	// the fingerprint's jobs, this one's included.
	Quarantine bool
	// LastError and LastJobID are recorded on the record.
	LastError string
	LastJobID string
	// StepCrash, when set, is the workflow step the crash happened in (its
	// name, or "#n" for the n-th step before its name is known): the
	// store adds 1 to the stored count of (Fingerprint, StepCrash), with or
	// without a record, in the same write.
	StepCrash string
	// Hold, when set, moves the fingerprint's waiting jobs as it says.
	Hold *HoldWrite
}

// HoldWrite moves every job of a fingerprint in one of From to To, each
// with an event of Event's kind and text; the counters move by the rows
// moved.
type HoldWrite struct {
	From   []sluicetype.State
	To     sluicetype.State
	Reason sluicetype.TerminalReason
	Event  EventWrite // From, To and Attempt are each held job's own
}

// DeadLetterWrite is the dead-letter route of a death (deadletter.go),
// applied in the same transaction as the death:
//   - no job of Job.ID exists: Job is inserted as JobInsertMany would (no
//     quarantine check), with dead_letter_of the dying job's id;
//   - it exists in a terminal state (the dead job was redriven and died
//     again): it is retried with the new death — payload and fingerprint
//     replaced by Job's, state available, scheduled now, finalized_at and
//     terminal_reason cleared, max_attempts = max(max_attempts, attempt+1)
//     — and RetryEvent is written on it (From and Attempt its own);
//   - it exists and is not terminal: it is left as it is (it has not
//     triaged the earlier death yet, and will read the job as it is).
//
// The counters move by what was written.
type DeadLetterWrite struct {
	Job *JobInsertParams
	// RetryEvent is written on the existing job when it is retried.
	RetryEvent EventWrite
}

// CheckpointWrite replaces a workflow job's checkpoint (step.go) in the
// same transaction as the outcome: the step that failed or crashed.
type CheckpointWrite struct {
	Checkpoint json.RawMessage
}

// JobFinishParams is one fenced transition out of running, resolved by
// the engine (see finishPlan): the store applies it under the lease and
// decides nothing.
type JobFinishParams struct {
	JobRef
	// IfLeaseExpired makes the write apply only while the lease is still
	// expired by the store's clock: the reaper's writes, so that a
	// renewal between its listing and its write wins.
	IfLeaseExpired bool
	// IfWorkerGone makes the write apply only while the lease's worker
	// has no live heartbeat: the reaper's crash charges.
	IfWorkerGone bool
	// IfBefore, when set, makes the write apply only until that time by
	// the store's clock: a crash charge the store held back (an outage)
	// is refused rather than applied on a stale view of who lives.
	IfBefore time.Time

	// To is the new state; StateDeleted removes the row (and nothing else
	// of the plan but Counts applies).
	To sluicetype.State
	// Reason is the terminal reason written ("" clears it).
	Reason sluicetype.TerminalReason
	// Charge is the counter the transition spends (+1).
	Charge Charge
	// Schedule and Delay set scheduled_at.
	Schedule Schedule
	Delay    time.Duration
	// Finalize sets finalized_at to the store's now; otherwise it is
	// cleared.
	Finalize bool

	Error       *ErrorWrite
	Event       *EventWrite
	Counts      []CountDelta
	Fingerprint *FingerprintWrite
	DeadLetter  *DeadLetterWrite
	Checkpoint  *CheckpointWrite
}

// ClaimDeadlineWrite is what a claim writes on an available job whose
// deadline has passed: it is archived instead of run.
type ClaimDeadlineWrite struct {
	To     sluicetype.State
	Reason sluicetype.TerminalReason
	// LastError and Pattern are the job's last error and error pattern:
	// it died without a handler error, and still forms an error group.
	LastError string
	Pattern   string
	// Event is written for each such job; its Attempt is the job's own.
	Event EventWrite
	// DeadLetter routes each such death, in the claim's transaction: the
	// store applies DeadLetterFor(DeadLetter.For(kind), job, LastError,
	// Reason) as JobFinishParams.DeadLetter says (nil routes nothing; a
	// death DeadLetterFor refuses is archived unrouted, as a finish
	// whose route the engine could not build).
	DeadLetter *DeadLetterRoutes
}
