package sluicetype

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"
)

// MaxApplyIDs is the most ids one Apply call takes.
const MaxApplyIDs = 1000

// Action is what Apply and Bulk do to each job.
type Action string

const (
	ActionRetry   Action = "retry"
	ActionCancel  Action = "cancel"
	ActionDelete  Action = "delete"
	ActionRelease Action = "release"
)

// Actions lists the operator actions in a stable order.
var Actions = []Action{ActionRetry, ActionCancel, ActionDelete, ActionRelease}

// Destructive reports whether a ends or removes the jobs it takes, with
// no way back (cancel, delete): in bulk it runs only from a dry run's
// plan (see Engine.Bulk).
func (a Action) Destructive() bool { return a == ActionCancel || a == ActionDelete }

// Role is what a caller may do, from least to most.
type Role string

const (
	RoleViewer    Role = "viewer"
	RoleInspector Role = "inspector"
	RoleOperator  Role = "operator"
	RoleAdmin     Role = "admin"
)

// Meta describes the engine behind a Control.
type Meta struct {
	Backend      string   `json:"backend"`
	Capabilities []string `json:"capabilities"`
	Role         Role     `json:"role"`
	ReadOnly     bool     `json:"read_only"`
	Actor        string   `json:"actor,omitempty"`
	// Idempotency says where an HTTP server keeps Idempotency-Key
	// records: "store" (committed with each mutation in the engine's
	// store: they survive restarts and are shared by every server on it)
	// or "memory" (this server process only). Empty from the engine.
	Idempotency string `json:"idempotency,omitempty"`
	// Retention is what the engine's maintenance deletes and when.
	Retention *RetentionPolicy `json:"retention,omitempty"`
	// Warnings say what about the store's server loses jobs silently (a
	// Redis that keeps nothing on disk, or evicts keys), from
	// the store (backend.DurabilityWarner); empty when nothing is known
	// to be wrong.
	Warnings []string `json:"warnings,omitempty"`
}

// RetentionPolicy is how long terminal jobs are kept: per state by
// default, and per queue and state where a queue overrides the default
// (durations in nanoseconds on the wire). A negative duration, like a
// state left out, keeps the jobs forever.
type RetentionPolicy struct {
	Default map[State]time.Duration            `json:"default"`
	Queues  map[string]map[State]time.Duration `json:"queues,omitempty"`
	// Warning is how long before deleting a job of ExpiringStates the
	// engine flags it as expiring (Config.ExpiryWarning); 0: not said.
	Warning time.Duration `json:"warning,omitempty"`
}

// Of is the retention of a queue's terminal jobs, per state: how long
// after a job entered the state it is deleted. A state absent from the
// map is kept forever.
func (p *RetentionPolicy) Of(queue string) map[State]time.Duration {
	out := map[State]time.Duration{}
	if p == nil {
		return out
	}
	for st, d := range p.Default {
		out[st] = d
	}
	for st, d := range p.Queues[queue] {
		out[st] = d
	}
	for st, d := range out {
		if d < 0 || !st.Terminal() {
			delete(out, st)
		}
	}
	return out
}

// Filter selects jobs. Every field narrows; empty fields match all.
type Filter struct {
	States      []State  `json:"states,omitempty"`
	Queues      []string `json:"queues,omitempty"`
	Kinds       []string `json:"kinds,omitempty"`
	IDs         []string `json:"ids,omitempty"`
	Fingerprint string   `json:"fingerprint,omitempty"`
	// UniqueKey is a unique job's key (Job.UniqueKey): the jobs that
	// carry it, holding it or not.
	UniqueKey string   `json:"unique_key,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	Error     string   `json:"error,omitempty"`
	// ErrorPattern is an error group's normalised message (NormalizeError).
	ErrorPattern    string      `json:"error_pattern,omitempty"`
	Payload         []PathMatch `json:"payload,omitempty"`
	Meta            []PathMatch `json:"meta,omitempty"`
	CreatedAfter    *time.Time  `json:"created_after,omitempty"`
	CreatedBefore   *time.Time  `json:"created_before,omitempty"`
	FinalizedAfter  *time.Time  `json:"finalized_after,omitempty"`
	FinalizedBefore *time.Time  `json:"finalized_before,omitempty"`
	// ExpiresWithin is `expires<D`: dead (archived), quarantined and
	// undecodable jobs that retention deletes within D. The engine
	// resolves it against its retention into Expiring, which is what a
	// store matches.
	ExpiresWithin *time.Duration `json:"expires_within,omitempty"`
	// Expiring is ExpiresWithin resolved by the engine, never a caller's:
	// a job matches when one cut does, none when there is none.
	Expiring []ExpiryCut `json:"-"`
	// IncludeSuperseded takes in jobs that were retried with new input
	// or replayed from a step; bulk selectors leave them out otherwise.
	IncludeSuperseded bool `json:"include_superseded,omitempty"`
	// PlanCutoff is set by the engine alone, on the selector it persists
	// for an operation started from a BulkPlan: the plan's cutoff rides
	// with the selector so that whichever instance runs the operation,
	// after any restart, keeps to it. Stores keep it with the selector
	// and never filter on it; Validate refuses it in a caller's filter,
	// and the engine lifts it into Operation.Cutoff on the way out.
	PlanCutoff *time.Time `json:"plan_cutoff,omitempty"`
}

// ExpiryCut is a part of a resolved `expires<D` (Filter.Expiring): the
// jobs in State — of one of Queues when it is set, of none of NotQueues —
// whose state change and finalisation are both before Before. Retention's
// sweep deletes a job of that state and queue once both are older than
// its retention, so Before is the store's now less the retention plus D:
// the cut is what the sweep takes within D, by the store's clock.
type ExpiryCut struct {
	State     State
	Queues    []string
	NotQueues []string
	Before    time.Time
}

// ReadStates are the states a store reads to match f: f.States, and with
// ExpiresWithin only those of them its cuts name (ExpiringStates when it
// has none, so that a store reads no state's hot index to find nothing);
// nil is every state.
func (f Filter) ReadStates() []State {
	if f.ExpiresWithin == nil {
		return f.States
	}
	var named []State
	for _, c := range f.Expiring {
		if !slices.Contains(named, c.State) {
			named = append(named, c.State)
		}
	}
	if len(named) == 0 {
		named = ExpiringStates
	}
	if len(f.States) == 0 {
		return named
	}
	var out []State
	for _, s := range f.States {
		if slices.Contains(named, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return f.States // the cuts match none of them
	}
	return out
}

// Holds reports whether c selects j, as the stores match it.
func (c ExpiryCut) Holds(j *Job) bool {
	return j.State == c.State && (len(c.Queues) == 0 || slices.Contains(c.Queues, j.Queue)) &&
		!slices.Contains(c.NotQueues, j.Queue) && j.StateChangedAt.Before(c.Before) &&
		j.FinalizedAt != nil && j.FinalizedAt.Before(c.Before)
}

// ExpiringStates are the states whose jobs retention deletes only after
// warning: what `expires<D` selects, and the state tabs count.
var ExpiringStates = []State{StateArchived, StateQuarantined, StateUndecodable}

// PathMatch is `payload.<path>:value` or `meta.<key>:value`.
type PathMatch struct {
	Path  string `json:"path"`
	Value string `json:"value"`
}

// JobPage is one page of job summaries (see Control.ListJobs).
type JobPage struct {
	Jobs []*Job `json:"jobs"`
	// Next pages on towards older rows, Prev back towards newer ones; ""
	// at either end.
	Next string `json:"next_cursor,omitempty"`
	Prev string `json:"prev_cursor,omitempty"`
	// Scan says the store stopped reading at its scan budget: the page
	// may hold fewer jobs than match, and its cursor scans on. Nil when
	// the answer is complete.
	Scan *ScanReport `json:"scan,omitempty"`
}

// JobDetail is one job with everything an operator needs to judge it.
type JobDetail struct {
	Job      *Job    `json:"job"`
	Timeline []Event `json:"timeline"`
	// DeleteAt, for a terminal job, is when retention deletes it (the
	// first maintenance sweep after it); nil when its state is kept
	// forever, or the job is not terminal.
	DeleteAt *time.Time `json:"delete_at,omitempty"`
	// Expiring: the job is dead, quarantined or undecodable and DeleteAt
	// is within the engine's warning window (RetentionPolicy.Warning):
	// `expires<` lists it.
	Expiring bool `json:"expiring,omitempty"`
	// DeadLetter is the id of the job that triages this one's death
	// (dlq:<id>), when there is one.
	DeadLetter string `json:"dead_letter,omitempty"`
	// HeldBy, for an available job, is the concurrency limit across
	// processes that holds it back, with its usage: "limit kind
	// billing.charge 5/5". It waits, uncharged; it is not a failure.
	HeldBy string `json:"held_by,omitempty"`
}

// Counts is jobs per state, per queue.
type Counts struct {
	Queues map[string]map[State]int64 `json:"queues"`
	Total  map[State]int64            `json:"total"`
}

// Bounds of CountJobs: counting a filter reads the jobs it matches, so a
// screen refreshing live counts asks for a bound it can afford.
const (
	DefaultCountJobsMax int64 = 10_000
	MaxCountJobsMax     int64 = 1_000_000
)

// JobCounts answers CountJobs.
type JobCounts struct {
	// States holds the count of each state asked for (0 included).
	States map[State]int64 `json:"states"`
	// Capped names the states whose count reached Max: at least that
	// many match, maybe more.
	Capped []State `json:"capped,omitempty"`
	// Max is the bound each state was counted to.
	Max int64 `json:"max"`
	// Scans holds, for the states whose count the store stopped at its
	// scan budget, how far it got; those states are in Capped too (at
	// least that many).
	Scans map[State]*ScanReport `json:"scans,omitempty"`
}

// IsCapped reports whether s's count stopped at the bound.
func (c *JobCounts) IsCapped(s State) bool { return slices.Contains(c.Capped, s) }

// HiddenValue is what a server sends, in place of a value, to a role that
// may not read it: a payload or meta condition's value in an operation's
// selector, and error text when the server hides it from viewers. A
// console that meets it knows the text is withheld, not empty.
const HiddenValue = "<hidden>"

// ErrorGroup is the dead jobs of one kind sharing a normalised error.
type ErrorGroup struct {
	Queue     string    `json:"queue"`
	Kind      string    `json:"kind"`
	Pattern   string    `json:"pattern"`
	Count     int64     `json:"count"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Sample    string    `json:"sample"`
	// Selector matches this group's jobs, for a bulk action.
	Selector Filter `json:"selector"`
	// NearSingletons counts the other listed groups of the same queue and
	// kind that hold one job each and whose pattern differs from this
	// one's in a single word: most likely the same failure with an id the
	// normaliser did not recognise, which a bulk action on this group's
	// Selector leaves behind.
	NearSingletons int `json:"near_singletons,omitempty"`
	// ID names the group across listings and processes (ErrorGroupID):
	// the handle an operator resolves or ignores it by.
	ID string `json:"id"`
	// Status is where triage left the group (open when nobody did).
	Status GroupStatus `json:"status"`
	// Note is what the operator who resolved or ignored the group wrote.
	Note string `json:"note,omitempty"`
	// TriagedBy and TriagedAt say who resolved or ignored the group, and
	// when (the store's clock); empty while it is open.
	TriagedBy string     `json:"triaged_by,omitempty"`
	TriagedAt *time.Time `json:"triaged_at,omitempty"`
	// ReopenedAt is the first death in the group after its resolution,
	// set while Status is reopened.
	ReopenedAt *time.Time `json:"reopened_at,omitempty"`
}

// GroupStatus is where an operator's triage left an error group.
type GroupStatus string

const (
	// GroupOpen: nobody resolved or ignored the group (or it was
	// un-ignored since).
	GroupOpen GroupStatus = "open"
	// GroupResolved: an operator resolved the group, and no job of it
	// died since.
	GroupResolved GroupStatus = "resolved"
	// GroupReopened: the group was resolved and a job of it died after
	// the resolution (ErrorGroup.ReopenedAt says when): it came back.
	GroupReopened GroupStatus = "reopened"
	// GroupIgnored: an operator ignored the group. Its new deaths are
	// archived and counted as ever, but the default listings leave it
	// out.
	GroupIgnored GroupStatus = "ignored"
)

// GroupStatuses lists the statuses in the order a listing shows them.
var GroupStatuses = []GroupStatus{GroupOpen, GroupReopened, GroupResolved, GroupIgnored}

// ErrorGroupID is the id of the error group of queue, kind and pattern:
// 16 hex digits of a SHA-256 over the three, so that every process and
// every listing names a group alike, whatever the filter it was read
// under.
func ErrorGroupID(queue, kind, pattern string) string {
	h := sha256.New()
	for _, s := range []string{queue, kind, pattern} {
		h.Write([]byte(s))
		h.Write([]byte{0x1f})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// QueueInfo is one queue with its counts.
type QueueInfo struct {
	Name   string          `json:"name"`
	Paused bool            `json:"paused"`
	Counts map[State]int64 `json:"counts"`
}

// ActionResult is one id's outcome in Apply.
type ActionResult struct {
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Reason is a short code: not_found, wrong_state, quarantined, ...
	Reason string `json:"reason,omitempty"`
}

type BulkParams struct {
	Action   Action
	Selector Filter
	DryRun   bool
	// RatePerSecond limits a real run; 0 is unlimited.
	RatePerSecond int
	// Plan, from a dry run's answer, pins a real run to what the preview
	// counted: only jobs that match the plan's selector and had entered
	// their state by its cutoff. Action and Selector may then be left
	// empty; when given they must be the plan's (ErrInvalid otherwise).
	// Without a plan the cutoff is the operation's creation; cancel and
	// delete run only with one (Action.Destructive).
	Plan *BulkPlan
	// StartAt, on a run, holds the operation until then: it stays pending,
	// visible and cancellable, and no batch is taken before it (by the
	// store's clock). It needs a plan, whose cutoff still bounds what the
	// run takes however late it starts; nil starts at once.
	StartAt *time.Time
	// Canary, on a retry's run, redrives a sample first and halts the
	// run when the redriven jobs fail again (CanaryParams); nil redrives
	// every job at once.
	Canary *CanaryParams
}

// BulkPlan is what a dry run previewed, for the run to do exactly that:
// the action, the selector narrowed to the states the action changes, and
// the store's time at the preview as the cutoff. The preview counted the
// jobs that entered their state by the cutoff; a run given the plan takes
// only those still in it, never a job that entered it later, so it never
// touches more jobs than the preview counted.
type BulkPlan struct {
	Action   Action    `json:"action"`
	Selector Filter    `json:"selector"`
	Cutoff   time.Time `json:"cutoff"`
}

// BulkResult answers Bulk: a preview for a dry run, else the operation.
type BulkResult struct {
	Matched   int64  `json:"matched"`
	Estimated bool   `json:"estimated,omitempty"`
	Sample    []*Job `json:"sample,omitempty"`
	// UniqueHeld, on a retry's dry run, counts the matched jobs (every
	// one, not the sample) whose unique key a live other job holds: the
	// run will refuse them. UniqueHolder names one of those holders.
	UniqueHeld   int64  `json:"unique_held,omitempty"`
	UniqueHolder string `json:"unique_holder,omitempty"`
	// Plan, on a dry run's answer, is what to hand the run so that it does
	// what the preview showed; absent when the selector names no state the
	// action changes (nothing to do).
	Plan      *BulkPlan  `json:"plan,omitempty"`
	Operation *Operation `json:"operation,omitempty"`
}

// OperationStatus is where a bulk operation is.
type OperationStatus string

const (
	OperationPending   OperationStatus = "pending"
	OperationRunning   OperationStatus = "running"
	OperationCompleted OperationStatus = "completed"
	OperationFailed    OperationStatus = "failed"
	OperationCancelled OperationStatus = "cancelled"
	// OperationHalted: a canary run stopped itself (Canary.Reason says
	// why); no runner takes it until an operator resumes or cancels it.
	OperationHalted OperationStatus = "halted"
)

// Operation is a persisted bulk action.
type Operation struct {
	ID         string          `json:"id"`
	Action     Action          `json:"action"`
	Selector   Filter          `json:"selector"`
	Status     OperationStatus `json:"status"`
	CreatedBy  string          `json:"created_by,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Matched    int64           `json:"matched"`
	Processed  int64           `json:"processed"`
	Succeeded  int64           `json:"succeeded"`
	Failed     int64           `json:"failed"`
	Error      string          `json:"error,omitempty"`
	Rate       int             `json:"rate_per_second,omitempty"`
	// Cutoff is the latest time a job may have entered its state to be
	// taken: the plan's cutoff for a run started from a dry run's plan,
	// else the operation's creation.
	Cutoff *time.Time `json:"cutoff,omitempty"`
	// StartAt is when a scheduled operation may start: until then it is
	// pending and no runner takes it. Nil for one that starts at once.
	StartAt *time.Time `json:"start_at,omitempty"`
	// Canary is a canary run's request and stage; nil for a run that
	// redrives every job at once.
	Canary *Canary `json:"canary,omitempty"`
}

// Waiting reports whether o is pending until its start time, as of now.
func (o *Operation) Waiting(now time.Time) bool {
	return o.Status == OperationPending && o.StartAt != nil && o.StartAt.After(now)
}

type OperationPage struct {
	Operations []*Operation `json:"operations"`
	Next       string       `json:"next_cursor,omitempty"`
}

// Paging limits of ListJobs.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
	// DryRunExactLimit is how far a dry run counts exactly; past it the
	// count is an estimate, flagged as such.
	DryRunExactLimit = 10_000_000
	// BulkSampleSize is how many matching jobs a dry run shows.
	BulkSampleSize = 20
	// OperationBatch is the most jobs one operation transaction changes.
	OperationBatch = 1000
)
