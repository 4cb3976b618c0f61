package sluicetype

import (
	"encoding/json"
	"strings"
	"time"
)

// State is where a job is in its life. See the transition table in
// backend/transitions.go.
type State string

const (
	StateScheduled   State = "scheduled"
	StateAvailable   State = "available"
	StateRunning     State = "running"
	StateRetryable   State = "retryable"
	StateCompleted   State = "completed"
	StateArchived    State = "archived"
	StateQuarantined State = "quarantined"
	StateUndecodable State = "undecodable"
	StateCancelled   State = "cancelled"
	// StateDeleted is not stored: it names the row being gone.
	StateDeleted State = "deleted"
)

// TerminalStates lists the terminal states, in AllStates' order.
func TerminalStates() []State {
	var out []State
	for _, st := range AllStates {
		if st.Terminal() {
			out = append(out, st)
		}
	}
	return out
}

// AllStates lists every stored state, in the order the console shows them.
var AllStates = []State{
	StateScheduled, StateAvailable, StateRunning, StateRetryable,
	StateCompleted, StateArchived, StateQuarantined, StateUndecodable,
	StateCancelled,
}

// Terminal reports whether a job in s stays there until an operator acts or
// retention deletes it.
func (s State) Terminal() bool {
	switch s {
	case StateCompleted, StateArchived, StateQuarantined, StateUndecodable, StateCancelled:
		return true
	}
	return false
}

// Valid reports whether s is a stored state.
func (s State) Valid() bool {
	for _, v := range AllStates {
		if s == v {
			return true
		}
	}
	return false
}

// TerminalReason says why a job reached a dead state.
type TerminalReason string

const (
	ReasonNone              TerminalReason = ""
	ReasonAttemptsExhausted TerminalReason = "attempts_exhausted"
	ReasonSkipped           TerminalReason = "skipped"
	ReasonDeadlineExceeded  TerminalReason = "deadline_exceeded"
	ReasonQuarantined       TerminalReason = "quarantined"
	ReasonUndecodable       TerminalReason = "undecodable"
	ReasonCancelled         TerminalReason = "cancelled"
)

// Job is one unit of work and everything the engine knows about it.
type Job struct {
	ID            string          `json:"id"`
	Queue         string          `json:"queue"`
	Kind          string          `json:"kind"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	SchemaVersion int             `json:"schema_version"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	Tags          []string        `json:"tags,omitempty"`
	Priority      int             `json:"priority"`
	State         State           `json:"state"`
	// Attempt counts the attempts spent: returned errors, timeouts. A
	// crash spends none.
	Attempt int `json:"attempt"`
	// MaxAttempts bounds Attempt: the error that spends the last one
	// archives the job. An operator's retry raises it to one more than
	// Attempt when spent. Crashes are bounded by the crash limit instead.
	MaxAttempts int `json:"max_attempts"`
	// CrashAttempt counts the crashes (a panic, or its process gone)
	// since the job was enqueued or last released from quarantine; at
	// the crash limit it quarantines the job's fingerprint. A job whose
	// fingerprint is quarantined or on probation (a released job) is
	// quarantined at its next crash whatever this count.
	CrashAttempt int    `json:"crash_attempt"`
	Fingerprint  string `json:"fingerprint"`
	// Fence grows by one every time the job enters running; a worker's
	// write is applied only while its fence is still the job's.
	Fence          int64          `json:"fence"`
	ScheduledAt    time.Time      `json:"scheduled_at"`
	Deadline       *time.Time     `json:"deadline,omitempty"`
	Timeout        time.Duration  `json:"timeout,omitempty"`
	CreatedAt      time.Time      `json:"created_at"`
	AttemptedAt    *time.Time     `json:"attempted_at,omitempty"`
	AttemptedBy    string         `json:"attempted_by,omitempty"`
	StateChangedAt time.Time      `json:"state_changed_at"`
	FinalizedAt    *time.Time     `json:"finalized_at,omitempty"`
	TerminalReason TerminalReason `json:"terminal_reason,omitempty"`
	Lease          *Lease         `json:"lease,omitempty"`
	Errors         []AttemptError `json:"errors,omitempty"`
	// Version grows on every write to the row; payload edits name the
	// version the editor saw.
	Version    int64           `json:"version"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// Wait says what a waiting job waits for, on listed rows only (a
	// list carries no checkpoint): JobListPage fills it from the stored
	// checkpoint's wait. GetJob leaves it nil; WaitOf reads the
	// checkpoint there.
	Wait         *WaitSummary `json:"wait,omitempty"`
	DeadLetterOf string       `json:"dead_letter_of,omitempty"`
	RetryOf      string       `json:"retry_of,omitempty"`
	SupersededBy string       `json:"superseded_by,omitempty"`
	// UniqueKey is the key of a unique job (UniqueOpts), held while the
	// job is in one of the states it was enqueued with; empty for a job
	// enqueued without uniqueness.
	UniqueKey string `json:"unique_key,omitempty"`
	// HeldBy, on listed available rows only, names the limit across
	// processes that holds the job back, with its usage ("limit kind
	// billing.charge 5/5"): ListJobs fills it from one read of the limits
	// per page. Stores leave it empty; GetJob says it in JobDetail.HeldBy.
	HeldBy string `json:"held_by,omitempty"`
}

// Lease is a worker's claim on a running job.
type Lease struct {
	ID        string    `json:"id"`
	WorkerID  string    `json:"worker_id"`
	Fence     int64     `json:"fence"`
	ExpiresAt time.Time `json:"expires_at"`
}

// AttemptError is one failed attempt: a returned error, a timeout, or a crash.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	Crash   bool      `json:"crash"`
	At      time.Time `json:"at"`
	// Started is when the attempt's claim began it (its AttemptedAt), so
	// that At less Started is how long it ran (for a reaped crash, until
	// the reaper found it); nil on entries written before attempts kept it.
	Started *time.Time `json:"started,omitempty"`
	// Worker is the process that ran the attempt (its lease's worker),
	// even when the reaper wrote the entry.
	Worker  string `json:"worker,omitempty"`
	Message string `json:"message"`
	Trace   string `json:"trace,omitempty"`
	// Ref is the attempt's reference in an outside system, as an
	// engine.Interceptor gave it (sluiceotel: the attempt span's W3C
	// traceparent), so that the job's next run can point back at it.
	Ref string `json:"ref,omitempty"`
}

// MaxKeptErrors caps a job's error list: the first error and the latest
// MaxKeptErrors-1 are kept.
const MaxKeptErrors = 20

// CapErrors keeps the first error and the latest ones, MaxKeptErrors in all.
func CapErrors(errs []AttemptError) []AttemptError {
	if len(errs) <= MaxKeptErrors {
		return errs
	}
	out := make([]AttemptError, 0, MaxKeptErrors)
	out = append(out, errs[0])
	return append(out, errs[len(errs)-(MaxKeptErrors-1):]...)
}

// LastErrorText is what a list shows as the job's last error: its latest
// error entry, or for a job that died without one, what its death
// recorded: a deadline that passed before it ran says so in the words
// its timeline and its error group use, another death names its reason.
// The console and the command line showed three texts for one such job
// ("deadline exceeded", the group's, and nothing).
func (j *Job) LastErrorText() string {
	if n := len(j.Errors); n > 0 {
		return j.Errors[n-1].Message
	}
	switch {
	case j.State == StateCompleted || j.State == StateCancelled || j.TerminalReason == "":
		return ""
	case j.TerminalReason == ReasonDeadlineExceeded:
		return MessageDeadlineBeforeRun
	}
	return strings.ReplaceAll(string(j.TerminalReason), "_", " ")
}

// AttemptShown is the attempt an operator reads as "attempt/max": the
// attempts spent, and the last run too when it spent none — it is still
// going, or it ended in success, a skip, a deadline or an undecodable
// payload. A job that completed on its sixth run shows 6, one skipped on
// its first shows 1.
func (j *Job) AttemptShown() int {
	n := j.Attempt
	ran := j.AttemptedAt != nil
	switch {
	case j.State == StateRunning, j.State == StateCompleted:
		n++
	case ran && j.State == StateArchived && (j.TerminalReason == ReasonSkipped || j.TerminalReason == ReasonDeadlineExceeded):
		n++
	case ran && j.State == StateUndecodable:
		n++
	}
	return n
}

// Clone returns a deep copy, so handlers given a job cannot change the
// engine's.
func (j *Job) Clone() *Job {
	if j == nil {
		return nil
	}
	c := *j
	c.Payload = cloneBytes(j.Payload)
	c.Metadata = cloneBytes(j.Metadata)
	c.Checkpoint = cloneBytes(j.Checkpoint)
	if j.Tags != nil {
		c.Tags = append([]string(nil), j.Tags...)
	}
	if j.Errors != nil {
		c.Errors = append([]AttemptError(nil), j.Errors...)
		for i := range c.Errors {
			c.Errors[i].Started = cloneTime(c.Errors[i].Started)
		}
	}
	if j.Lease != nil {
		l := *j.Lease
		c.Lease = &l
	}
	if j.Wait != nil {
		w := *j.Wait
		c.Wait = &w
	}
	c.Deadline = cloneTime(j.Deadline)
	c.AttemptedAt = cloneTime(j.AttemptedAt)
	c.FinalizedAt = cloneTime(j.FinalizedAt)
	return &c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// Suspect reports whether the job has crashed before: a suspect is
// reclaimed behind its siblings and a process runs at most one at a time.
func (j *Job) Suspect() bool { return j.CrashAttempt > 0 }

// EventKind names an entry on a job's timeline.
type EventKind string

const (
	EventEnqueued      EventKind = "enqueued"
	EventClaimed       EventKind = "claimed"
	EventCompleted     EventKind = "completed"
	EventFailed        EventKind = "failed"
	EventCrashed       EventKind = "crashed"
	EventSnoozed       EventKind = "snoozed"
	EventArchived      EventKind = "archived"
	EventQuarantined   EventKind = "quarantined"
	EventUndecodable   EventKind = "undecodable"
	EventLeaseLost     EventKind = "lease_lost"
	EventReleased      EventKind = "released"
	EventRetried       EventKind = "retried"
	EventCancelled     EventKind = "cancelled"
	EventPayloadEdited EventKind = "payload_edited"
	EventHeld          EventKind = "held"
	EventShutdown      EventKind = "shutdown_release"
	// EventForked: a replay from a step made a new job of this one (on
	// the original) or this job of another (on the new one).
	EventForked EventKind = "forked"
)

// Event is one entry on a job's timeline. The happy path (enqueued,
// claimed, completed) is derived from the job's own columns; failures,
// crashes and operator actions are stored as event rows.
type Event struct {
	JobID   string    `json:"job_id"`
	Kind    EventKind `json:"kind"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor,omitempty"` // worker id or operator name
	From    State     `json:"from,omitempty"`
	To      State     `json:"to,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Message string    `json:"message,omitempty"`
}

// Timeline merges a job's stored events with the entries derived from its
// columns, oldest first.
func Timeline(j *Job, stored []Event) []Event {
	out := make([]Event, 0, len(stored)+len(j.Errors)+3)
	out = append(out, Event{JobID: j.ID, Kind: EventEnqueued, At: j.CreatedAt, To: StateAvailable})
	hasClaimAt := func(t time.Time) bool {
		for _, e := range stored {
			if e.Kind == EventClaimed && e.At.Equal(t) {
				return true
			}
		}
		return false
	}
	// The happy path keeps no event rows, so a claim is stored only for
	// the last run (AttemptedAt). Each earlier run left an error entry,
	// which says who ran it and when it ended: its claim is derived from
	// that, at the time the entry says the run started, or, for an entry
	// that does not say (written before entries kept it), just before the
	// failure, with a message that says so. They go in before the stored
	// events so that the stable sort keeps each claim ahead of its failure.
	for _, e := range j.Errors {
		if j.AttemptedAt != nil && !e.At.Before(*j.AttemptedAt) {
			continue // the last run: its claim is AttemptedAt
		}
		if hasClaimedRun(stored, e.Attempt) {
			continue
		}
		ev := Event{JobID: j.ID, Kind: EventClaimed, At: e.At, Actor: e.Worker, To: StateRunning,
			Attempt: e.Attempt, Message: DerivedClaimNote}
		if e.Started != nil && !e.Started.After(e.At) {
			ev.At, ev.Message = *e.Started, ""
		}
		out = append(out, ev)
	}
	out = append(out, stored...)
	if j.AttemptedAt != nil && !hasClaimAt(*j.AttemptedAt) {
		ev := Event{JobID: j.ID, Kind: EventClaimed, At: *j.AttemptedAt, Actor: j.AttemptedBy, To: StateRunning}
		if j.State == StateRunning || j.State == StateCompleted {
			ev.Attempt = j.Attempt + 1
		} else {
			// The run ended in a failure, whose entry numbers it, or in
			// a stored event (a wait, say) that does.
			for _, e := range j.Errors {
				if !e.At.Before(*j.AttemptedAt) {
					ev.Attempt = e.Attempt
				}
			}
			for _, e := range stored {
				if ev.Attempt == 0 && e.Attempt > 0 && !e.At.Before(*j.AttemptedAt) {
					ev.Attempt = e.Attempt
				}
			}
		}
		out = append(out, ev)
	}
	if j.State == StateCompleted && j.FinalizedAt != nil {
		out = append(out, Event{JobID: j.ID, Kind: EventCompleted, At: *j.FinalizedAt, Actor: j.AttemptedBy, From: StateRunning, To: StateCompleted})
	}
	sortEvents(out)
	return out
}

// DerivedClaimNote is the message of a claim derived from an error entry:
// the run's start was not kept, its end was.
const DerivedClaimNote = "claim time not kept: this run ended here"

// hasClaimedRun reports whether a stored claim names run n.
func hasClaimedRun(stored []Event, n int) bool {
	for _, e := range stored {
		if e.Kind == EventClaimed && e.Attempt == n {
			return true
		}
	}
	return false
}

func sortEvents(ev []Event) {
	// Insertion sort: timelines are short and mostly ordered already.
	for i := 1; i < len(ev); i++ {
		for k := i; k > 0 && ev[k].At.Before(ev[k-1].At); k-- {
			ev[k], ev[k-1] = ev[k-1], ev[k]
		}
	}
}

// MessageDeadlineBeforeRun is the last error, error pattern and event text of
// a job archived at claim because its deadline had passed.
const MessageDeadlineBeforeRun = "deadline passed before the job ran"

// DefaultCrashLimit is how many crashes quarantine a job's fingerprint.
const DefaultCrashLimit = 3
