package engine

import (
	"context"
	"encoding/json"
	"time"
)

// Control is the operator surface: the one interface the console, the
// command line and the HTTP server use. The embedded engine implements it
// over its Store; api.Client implements it remotely.
type Control interface {
	// Meta describes the backend, its capabilities and the caller.
	Meta(ctx context.Context) (*Meta, error)
	// ListJobs pages job summaries, newest first by the time each job
	// entered its state: no payload, no checkpoint, and the latest error
	// only (GetJob has them all).
	ListJobs(ctx context.Context, p ListJobsParams) (*JobPage, error)
	// GetJob returns one job with its errors, timeline and links; the
	// payload only when asked.
	GetJob(ctx context.Context, id string, includePayload bool) (*JobDetail, error)
	// Counts gives jobs per state per queue; queue "" means all.
	Counts(ctx context.Context, queue string) (*Counts, error)
	// CountJobs counts, state by state, the jobs a filter matches — what
	// ListJobs lists under it — for filters the maintained counters
	// cannot answer (an error, a payload path, a fingerprint, ...). Each
	// state is counted exactly up to a bound; past it the count is that
	// bound and the state is named in Capped.
	CountJobs(ctx context.Context, p CountJobsParams) (*JobCounts, error)
	// ErrorGroups groups dead jobs by kind and normalised error, each
	// with its id and triage status, leaving out the ignored groups;
	// ListErrorGroups takes them in when asked (triage.go).
	ErrorGroups(ctx context.Context, f Filter) ([]ErrorGroup, error)
	ListErrorGroups(ctx context.Context, p ListErrorGroupsParams) ([]ErrorGroup, error)
	// ResolveErrorGroup, IgnoreErrorGroup and UnignoreErrorGroup record an
	// operator's verdict on the group of an id (ErrorGroup.ID) and return
	// the group as it then stands; ErrNotFound for an id no group has.
	// A resolved group reopens by itself when one of its jobs dies after
	// the resolution; an ignored one leaves the default listings, its
	// jobs dying and counted as ever.
	ResolveErrorGroup(ctx context.Context, p ErrorGroupResolveParams) (*ErrorGroup, error)
	IgnoreErrorGroup(ctx context.Context, p ErrorGroupIgnoreParams) (*ErrorGroup, error)
	UnignoreErrorGroup(ctx context.Context, p ErrorGroupUnignoreParams) (*ErrorGroup, error)

	Queues(ctx context.Context) ([]QueueInfo, error)
	PauseQueue(ctx context.Context, queue string) error
	ResumeQueue(ctx context.Context, queue string) error
	// ListLimits lists the concurrency limits across processes, each with
	// the jobs it counts running; SetLimit sets one (0 removes it),
	// holding in every process within a second (limits.go).
	ListLimits(ctx context.Context) ([]Limit, error)
	SetLimit(ctx context.Context, l Limit) error

	// Schedules pages the periodic jobs' schedules the store keeps, in
	// name order after the name after (periodic_control.go).
	// PauseSchedule, ResumeSchedule and TriggerSchedule (run now) are
	// written to the store and held by every process; ErrNotFound for a
	// schedule the store does not keep, ErrUnsupported on a store
	// without schedules.
	Schedules(ctx context.Context, limit int, after string) (*SchedulePage, error)
	PauseSchedule(ctx context.Context, name string) error
	ResumeSchedule(ctx context.Context, name string) error
	TriggerSchedule(ctx context.Context, name string) error

	Retry(ctx context.Context, id string, opts RetryOptions) (*Job, error)
	Cancel(ctx context.Context, id string) (*Job, error)
	Delete(ctx context.Context, id string) error
	ReleaseJob(ctx context.Context, id string) (*Job, error)
	// UpdatePayload replaces a job's payload if its version is still the
	// one the editor saw (ErrConflict otherwise); refused while running.
	UpdatePayload(ctx context.Context, id string, payload json.RawMessage, version int64) (*Job, error)
	// RetryWithInput enqueues a corrected copy linked to the original,
	// which is marked superseded.
	RetryWithInput(ctx context.Context, id string, p RetryWithInputParams) (*Job, error)
	// ReplayFromStep creates a new job that keeps the checkpoint of a
	// terminal workflow job before p.Step and runs from it on, linked
	// both ways (workflow_control.go); ReplayPreview says what it would
	// keep and run again.
	ReplayFromStep(ctx context.Context, id string, p ReplayParams) (*Job, error)
	ReplayPreview(ctx context.Context, id string, p ReplayParams) (*ReplayPlan, error)

	// Apply runs one action on up to MaxApplyIDs jobs, each on its own.
	Apply(ctx context.Context, action Action, ids []string) ([]ActionResult, error)
	// Bulk previews (DryRun) or starts an operation over every job the
	// selector matches.
	Bulk(ctx context.Context, p BulkParams) (*BulkResult, error)
	Operation(ctx context.Context, id string) (*Operation, error)
	Operations(ctx context.Context, limit int, cursor string) (*OperationPage, error)
	CancelOperation(ctx context.Context, id string) (*Operation, error)
	// ResumeOperation sets a halted canary run going again, watching a
	// fresh window; ErrWrongState for an operation that is not halted.
	ResumeOperation(ctx context.Context, id string) (*Operation, error)

	// Signal sends the signal name to a job, with a JSON payload: it is
	// buffered until the job's WaitSignal of that name takes it, once,
	// and wakes the job if it waits for it (wait.go). ErrNotFound for no
	// such job; ErrWrongState for a terminal one.
	Signal(ctx context.Context, id, name string, payload json.RawMessage) (*Signal, error)

	Quarantine(ctx context.Context) ([]*Fingerprint, error)
	ReleaseFingerprint(ctx context.Context, fingerprint string) (int, error)

	// Audit pages the audit trail newest first: one record per mutating
	// action above, committed with it or, refused, on its own (audit.go).
	// ErrUnsupported on a store without a trail.
	Audit(ctx context.Context, q AuditQuery) (*AuditPage, error)

	// Subscribe streams job and operation changes until ctx ends.
	Subscribe(ctx context.Context) (<-chan Change, error)
}

type ListJobsParams struct {
	Filter Filter
	// Cursor continues a previous page, either way; "" starts at the
	// newest.
	Cursor string
	Limit  int // 1–200, 50 when 0
}

// CountJobsParams asks CountJobs for the jobs Filter matches in each of
// its states (every state when it names none).
type CountJobsParams struct {
	Filter Filter
	// Max bounds each state's exact count: DefaultCountJobsMax when 0, at
	// most MaxCountJobsMax.
	Max int64
	// Whole counts past the store's scan budget: a store that counts a
	// filter by reading jobs (Redis, for error text, tags, payload paths)
	// reads every job its index holds for the filter, as a dry run's
	// count does, up to Max matches. It costs what that count costs, so
	// the console asks for it only when idle, one state at a time.
	Whole bool
}

// RetryOptions tunes an operator retry.
type RetryOptions struct {
	// Force retries a job that was superseded by a retry with new input
	// or a replay from a step.
	Force bool
	// Deadline replaces one that has already passed.
	Deadline *time.Time
}

type RetryWithInputParams struct {
	// ID of the new job; `<id>~retry~<8 hex>` when empty.
	ID      string
	Payload json.RawMessage
}

// ChangeKind says what a Change is about.
type ChangeKind string

const (
	ChangeJob       ChangeKind = "job"
	ChangeOperation ChangeKind = "operation"
	// ChangeResync tells a slow consumer that changes were dropped: reload.
	ChangeResync ChangeKind = "resync"
	// ChangeLost tells that the stream of changes broke and could not be
	// reopened at once, or that the store behind it is away (Err says
	// why): nothing is heard until a ChangeResync says it is back. A
	// Control that reconnects by itself (the HTTP client) sends it, and
	// so does the Engine when its poll of the store fails, so that the
	// consumer learns of the outage when it begins. The API server sends
	// the Engine's as a "lost" event, which its client turns back into
	// ChangeLost.
	ChangeLost ChangeKind = "lost"
)

// Change is one coalesced notification from Subscribe.
type Change struct {
	Kind      ChangeKind `json:"kind"`
	JobID     string     `json:"job_id,omitempty"`
	Queue     string     `json:"queue,omitempty"`
	State     State      `json:"state,omitempty"`
	Operation string     `json:"operation_id,omitempty"`
	// Err is why the stream was lost (ChangeLost only).
	Err error `json:"-"`
}

type actorKey struct{}

// WithActor names who acts in ctx (an operator, a token's name); it is
// recorded on the timeline and on operations.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor named in ctx, or "operator".
func ActorFrom(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "operator"
}
