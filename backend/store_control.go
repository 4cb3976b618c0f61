package backend

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// ControlStore is what the operator surface needs from storage, on top of
// Store. Same rules: Noun+Verb with params structs, the store's clock,
// one transaction per call (per batch for operations), an event row for
// every operator action, and ErrUnsupported (wrapped, naming the filter)
// for a filter the backend cannot serve — never a silently ignored one.
type ControlStore interface {
	// JobListPage pages summaries of the jobs matching the filter — no
	// payload, no checkpoint, and in Errors the latest error alone —
	// ordered by (state_changed_at, id) descending. After, when set, continues
	// strictly past that key: towards older rows, or towards newer ones
	// when Reverse (rows then come oldest first; the caller flips them).
	JobListPage(ctx context.Context, p *JobListPageParams) ([]*sluicetype.Job, error)
	// JobCountMatching counts jobs matching the filter, stopping at Max (0: no
	// cap) and reporting whether it stopped.
	JobCountMatching(ctx context.Context, p *JobCountMatchingParams) (n int64, capped bool, err error)
	// JobCountUniqueHeld counts, of every job JobCountMatching would count
	// for the same filter, those whose move to To would take a unique key
	// another job holds, and names one such holder: a bulk retry's dry run
	// says how many the run will refuse before it starts.
	JobCountUniqueHeld(ctx context.Context, p *JobCountUniqueHeldParams) (*UniqueHeldCount, error)
	// JobCountByQueue reads the maintained per-queue, per-state counters.
	JobCountByQueue(ctx context.Context, p *JobCountByQueueParams) (map[string]map[sluicetype.State]int64, error)
	// JobCountReconcile recounts the counters from the jobs themselves.
	JobCountReconcile(ctx context.Context) error
	// JobErrorGroups groups dead jobs matching the filter by queue, kind
	// and error pattern (written at death by the engine).
	JobErrorGroups(ctx context.Context, p *JobErrorGroupsParams) ([]sluicetype.ErrorGroup, error)
	// ErrorGroupTriageSet records an operator's verdict on one error
	// group (resolved or ignored), at the store's time, replacing the one
	// before; Status open removes it. It returns the verdict as written
	// (nil when removed). The store keeps verdicts only: whether a
	// resolved group came back is read from its jobs by the engine, so
	// no death writes here.
	ErrorGroupTriageSet(ctx context.Context, p *ErrorGroupTriageSetParams) (*ErrorGroupTriage, error)
	// ErrorGroupTriageList returns every verdict, by queue, kind and
	// pattern.
	ErrorGroupTriageList(ctx context.Context) ([]ErrorGroupTriage, error)

	// JobAction applies one operator action's spec to one job in one
	// transaction: the job must be in one of Spec.From (else a
	// *StateError) and pass the spec's refusals (*QuarantinedError,
	// *SupersededError unless Force); then the spec's state and effects are
	// written with Event and the counter delta. It returns the job as
	// written (nil when deleted); ErrNotFound for no such job.
	JobAction(ctx context.Context, p *JobActionParams) (*sluicetype.Job, error)
	// JobUpdatePayload replaces the payload (and fingerprint) when the
	// row's version is still Version (else a *VersionError) and the job
	// is not running (else a *StateError), with Event.
	JobUpdatePayload(ctx context.Context, p *JobUpdatePayloadParams) (*sluicetype.Job, error)
	// JobRetryCopy inserts the corrected copy of a terminal job (else
	// a *StateError; a quarantined new fingerprint is a
	// *QuarantinedError; an existing NewID is ErrConflict) and marks the
	// original superseded, with both events, in one transaction.
	JobRetryCopy(ctx context.Context, p *JobRetryCopyParams) (*sluicetype.Job, error)
	// JobFork inserts a copy of a terminal job (else a *StateError; a
	// quarantined fingerprint is a *QuarantinedError; an existing NewID,
	// or an original whose version is no longer Version, is ErrConflict):
	// same queue, kind, payload, fingerprint, metadata, tags, priority,
	// attempt budget, schema version and timeout, available now, with
	// Checkpoint; and writes OriginalCheckpoint on the original and marks
	// it superseded by NewID, leaving its state as it is. Both events,
	// one transaction.
	JobFork(ctx context.Context, p *JobForkParams) (*sluicetype.Job, error)

	// OperationInsert persists a new bulk operation (status pending,
	// created_at the store's now) and returns it.
	OperationInsert(ctx context.Context, p *OperationInsertParams) (*sluicetype.Operation, error)
	OperationGet(ctx context.Context, p *OperationGetParams) (*sluicetype.Operation, error)
	// OperationList pages operations newest first.
	OperationList(ctx context.Context, p *OperationListParams) ([]*sluicetype.Operation, error)
	// OperationCancel marks a pending, running or halted operation
	// cancelled.
	OperationCancel(ctx context.Context, p *OperationCancelParams) (*sluicetype.Operation, error)
	// OperationClaim leases the oldest pending or running operation whose
	// lease is free or expired (fence +1) to Holder, passing over one whose
	// StartAt is after the store's now; nil when none.
	OperationClaim(ctx context.Context, p *OperationClaimParams) (*OperationLease, error)
	// OperationProcessBatch applies one batch the engine chose, fenced on
	// the operation lease (Holder, Fence) and on its cursor (After must be
	// the operation's cursor), else ErrLeaseLost. Under lock it takes, in
	// id order past After and among at most Window jobs, up to Limit jobs
	// that match Selector and entered their state at or before Cutoff
	// (superseded ones only when the selector includes them); writes the
	// spec on each (one refused by the spec's refusals is counted failed
	// and named in Refused); and commits the jobs' changes and the
	// operation's progress (processed, succeeded, failed, cursor, lease
	// expiry) together. Exhausted reports that no job is left past the
	// batch. An operation that is no longer running is returned as it is,
	// unchanged, so its runner stops on the status.
	OperationProcessBatch(ctx context.Context, p *OperationProcessBatchParams) (*OperationBatchResult, error)
	// OperationFinish sets a running operation's status and error, fenced
	// on its lease (ErrLeaseLost otherwise); a final status sets
	// finished_at and frees the lease.
	OperationFinish(ctx context.Context, p *OperationFinishParams) (*sluicetype.Operation, error)
	// OperationCanarySet writes a canary run's state, fenced on the
	// operation's lease (ErrLeaseLost otherwise), and extends the lease;
	// with Halt it also sets the status halted and the error and frees
	// the lease, so no runner takes the operation until OperationResume.
	OperationCanarySet(ctx context.Context, p *OperationCanarySetParams) (*sluicetype.Operation, error)
	// OperationResume sets a halted operation pending again with the
	// canary state given (its error cleared), for the next runner to
	// take; ErrWrongState for an operation that is not halted,
	// ErrNotFound for none.
	OperationResume(ctx context.Context, p *OperationResumeParams) (*sluicetype.Operation, error)

	// QueueList names every queue that has jobs or a paused record.
	QueueList(ctx context.Context) ([]sluicetype.QueueInfo, error)
	// QueuePause and QueueResume: workers do not claim from a paused queue.
	QueuePause(ctx context.Context, p *QueuePauseParams) error
	QueueResume(ctx context.Context, p *QueuePauseParams) error
}

type JobListPageParams struct {
	Filter sluicetype.Filter
	// ExcludeSuperseded leaves out superseded jobs (bulk
	// selectors do, unless the filter includes them).
	ExcludeSuperseded bool
	After             *sluicetype.Cursor
	Reverse           bool
	Limit             int
	// Scan, when set, is filled by a store whose scan of unindexed
	// conditions is bounded (ScanReport); a store that reads all it
	// needs leaves it alone.
	Scan *sluicetype.ScanReport
}

type JobCountMatchingParams struct {
	Filter            sluicetype.Filter
	ExcludeSuperseded bool
	Max               int64
	// AsOf counts only jobs that entered their state at or before it.
	AsOf *time.Time
	// Scan, as in JobListPageParams: a store whose scan is bounded fills it
	// and answers the count of the jobs it examined (a lower bound).
	Scan *sluicetype.ScanReport
}

// JobCountUniqueHeldParams selects the jobs as JobCountMatchingParams does
// (without a cap: every matched job is looked at) and names the state
// their move leads to, whose bit in a job's unique-states mask says the
// move would take the job's key.
type JobCountUniqueHeldParams struct {
	Filter            sluicetype.Filter
	ExcludeSuperseded bool
	AsOf              *time.Time
	To                sluicetype.State
}

// UniqueHeldCount answers JobCountUniqueHeld: how many matched jobs a
// live other job holds the key of, and one of those holders ("" for
// none).
type UniqueHeldCount struct {
	Held   int64
	Holder string
}

type JobCountByQueueParams struct {
	Queue string // "" for all
}

type JobErrorGroupsParams struct {
	Filter sluicetype.Filter
	Limit  int
}

// ErrorGroupTriage is an operator's verdict on the error group of
// Queue, Kind and Pattern.
type ErrorGroupTriage struct {
	Queue, Kind, Pattern string
	// Status is resolved or ignored.
	Status sluicetype.GroupStatus
	Note   string
	Actor  string
	// At is when it was written, by the store's clock.
	At time.Time
}

// ErrorGroupTriageSetParams sets the verdict on one error group.
type ErrorGroupTriageSetParams struct {
	Queue, Kind, Pattern string
	// Status is resolved or ignored; open removes the verdict.
	Status sluicetype.GroupStatus
	Note   string
	Actor  string
}

// Valid refuses a verdict no store keeps: a group's pattern is never
// empty (JobErrorGroups makes no group of jobs without one).
func (p *ErrorGroupTriageSetParams) Valid() bool {
	return p.Queue != "" && p.Kind != "" && p.Pattern != "" &&
		(p.Status == sluicetype.GroupResolved || p.Status == sluicetype.GroupIgnored || p.Status == sluicetype.GroupOpen)
}

// SortTriage orders verdicts by queue, kind and pattern, as
// ErrorGroupTriageList returns them.
func SortTriage(ts []ErrorGroupTriage) {
	slices.SortFunc(ts, func(a, b ErrorGroupTriage) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Pattern, b.Pattern))
	})
}

// JobActionParams is one operator action on one job.
type JobActionParams struct {
	ID   string
	Spec ActionSpec
	// Force passes RefuseSuperseded.
	Force bool
	// Deadline replaces the job's deadline (EffectOneMoreAttempt).
	Deadline *time.Time
	// Event is written when Spec.Event is set; From and Attempt are the
	// job's own.
	Event EventWrite
}

type JobUpdatePayloadParams struct {
	ID          string
	Payload     json.RawMessage
	Fingerprint string
	Version     int64
	// Event is written on the job; From, To and Attempt are its own.
	Event EventWrite
}

type JobRetryCopyParams struct {
	ID          string
	NewID       string
	Payload     json.RawMessage
	Fingerprint string
	// OriginalEvent is written on the original (From and To its state,
	// Attempt its own); CopyEvent on the copy.
	OriginalEvent EventWrite
	CopyEvent     EventWrite
}

// JobForkParams is a replay from a step (engine.ReplayFromStep).
type JobForkParams struct {
	ID string
	// Version is the original's version the engine planned from.
	Version int64
	NewID   string
	// Checkpoint is the copy's; OriginalCheckpoint replaces the
	// original's (the fork recorded).
	Checkpoint         json.RawMessage
	OriginalCheckpoint json.RawMessage
	// OriginalEvent is written on the original (From and To its state,
	// Attempt its own); CopyEvent on the copy.
	OriginalEvent EventWrite
	CopyEvent     EventWrite
}

type OperationInsertParams struct {
	ID        string
	Action    sluicetype.Action
	Selector  sluicetype.Filter
	CreatedBy string
	Matched   int64
	Rate      int
	// StartAt, when set, holds the operation back from OperationClaim
	// until the store's clock reaches it.
	StartAt *time.Time
	// Canary, when set, is the canary run's first state (stage sample,
	// no ids yet): the store keeps it with the operation, the ids of
	// Sample and Recent among it, and returns it on every read.
	Canary *sluicetype.Canary
}

type OperationGetParams struct{ ID string }

type OperationListParams struct {
	After *sluicetype.Cursor // CreatedAt/ID of the last row seen
	Limit int
}

type OperationCancelParams struct {
	ID string
	// Message is recorded as the operation's error.
	Message string
}

type OperationClaimParams struct {
	Holder string
	TTL    time.Duration
}

// OperationLease is a maintenance instance's hold on an operation.
type OperationLease struct {
	Operation *sluicetype.Operation
	Holder    string
	Fence     int64
	// Cursor is the last job id the operation's batches covered.
	Cursor string
}

type OperationProcessBatchParams struct {
	ID     string
	Holder string
	Fence  int64
	// After is the operation's cursor: the batch covers ids past it.
	After string
	// Spec is the action; Selector is the operation's selector narrowed
	// to the spec's states.
	Spec     ActionSpec
	Selector sluicetype.Filter
	// Cutoff: only jobs that entered their state at or before it.
	Cutoff time.Time
	// Limit is the most jobs the batch changes, Window the most it looks
	// at in id order.
	Limit  int
	Window int
	// Event is each changed job's timeline entry (when Spec.Event is
	// set); From and Attempt are the job's own.
	Event EventWrite
	TTL   time.Duration // extends the operation lease
	// Recent, when positive, has the store append the ids of the jobs
	// the batch changed (in id order) to the operation's Canary.Recent,
	// keeping the last Recent of them, in the batch's transaction: a
	// canary run then never loses a batch's jobs from the window it
	// watches, whenever its runner dies.
	Recent int
}

// OperationBatchResult is what one batch did.
type OperationBatchResult struct {
	// Operation is the operation after the batch.
	Operation *sluicetype.Operation
	// Cursor is the operation's cursor after the batch: the next batch's
	// After.
	Cursor string
	// Exhausted: no job is left past the batch.
	Exhausted bool
	// Refused has one error per job the spec's refusals turned away (a
	// *QuarantinedError), in id order.
	Refused []error
}

type OperationFinishParams struct {
	ID     string
	Holder string
	Fence  int64
	Status sluicetype.OperationStatus
	// Error is recorded as the operation's error ("" keeps it).
	Error string
}

// OperationCanarySetParams writes a canary run's state (its Sample and
// Recent ids among it) on a running operation, fenced on its lease.
type OperationCanarySetParams struct {
	ID     string
	Holder string
	Fence  int64
	Canary *sluicetype.Canary
	// Halt sets the status halted with Error, and frees the lease.
	Halt  bool
	Error string
	TTL   time.Duration // extends the operation lease when not halting
}

// OperationResumeParams sets a halted operation pending with Canary.
type OperationResumeParams struct {
	ID     string
	Canary *sluicetype.Canary
}

type QueuePauseParams struct {
	Queue string
	Actor string
}

// QueueInfosFromCounts is QueueList's answer from a store's per-queue counts and
// paused flags: every queue either names, sorted by name, a queue without
// jobs with empty counts.
func QueueInfosFromCounts(counts map[string]map[sluicetype.State]int64, paused map[string]bool) []sluicetype.QueueInfo {
	names := make([]string, 0, len(counts)+len(paused))
	for q := range counts {
		names = append(names, q)
	}
	for q := range paused {
		if _, ok := counts[q]; !ok {
			names = append(names, q)
		}
	}
	slices.Sort(names)
	out := make([]sluicetype.QueueInfo, len(names))
	for i, q := range names {
		c := counts[q]
		if c == nil {
			c = map[sluicetype.State]int64{}
		}
		out[i] = sluicetype.QueueInfo{Name: q, Paused: paused[q], Counts: c}
	}
	return out
}
