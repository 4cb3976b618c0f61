package engine

import (
	"context"
	"encoding/json"
	"time"
)

// ControlStore is what the operator surface needs from storage, on top of
// Store. Same rules: Noun+Verb with params structs, the store's clock,
// one transaction per call (per batch for operations), an event row for
// every operator action, and ErrUnsupported (wrapped, naming the filter)
// for a filter the backend cannot serve — never a silently ignored one.
type ControlStore interface {
	// JobList pages summaries of the jobs matching the filter — no
	// payload, no checkpoint, and in Errors the latest error alone —
	// ordered by (state_changed_at, id) descending. After, when set, continues
	// strictly past that key: towards older rows, or towards newer ones
	// when Reverse (rows then come oldest first; the caller flips them).
	JobList(ctx context.Context, p *JobListParams) ([]*Job, error)
	// JobCount counts jobs matching the filter, stopping at Max (0: no
	// cap) and reporting whether it stopped.
	JobCount(ctx context.Context, p *JobCountParams) (n int64, capped bool, err error)
	// JobCountByQueue reads the maintained per-queue, per-state counters.
	JobCountByQueue(ctx context.Context, p *JobCountByQueueParams) (map[string]map[State]int64, error)
	// JobCountReconcile recounts the counters from the jobs themselves.
	JobCountReconcile(ctx context.Context) error
	// JobErrorGroups groups dead jobs matching the filter by queue, kind
	// and error pattern (written at death by the engine).
	JobErrorGroups(ctx context.Context, p *JobErrorGroupsParams) ([]ErrorGroup, error)

	// JobRetry: archived, cancelled or undecodable → available; history
	// kept, max_attempts = max(max_attempts, attempt+1), scheduled now,
	// finalized_at and terminal_reason cleared, a passed deadline dropped
	// unless a new one is given. ErrQuarantined when its fingerprint is
	// quarantined; ErrConflict when superseded and not forced;
	// ErrWrongState otherwise.
	JobRetry(ctx context.Context, p *JobRetryParams) (*Job, error)
	// JobCancel: scheduled, available, retryable or running → cancelled;
	// a running job's lease is cleared in the same write.
	JobCancel(ctx context.Context, p *JobActionParams) (*Job, error)
	// JobDelete removes a job in any state but running.
	JobDelete(ctx context.Context, p *JobActionParams) error
	// JobRelease: one quarantined job → available, crash_attempt reset.
	JobRelease(ctx context.Context, p *JobActionParams) (*Job, error)
	// JobUpdatePayload replaces the payload (and fingerprint) when the
	// row's version is still Version; ErrConflict otherwise,
	// ErrWrongState while running.
	JobUpdatePayload(ctx context.Context, p *JobUpdatePayloadParams) (*Job, error)
	// JobRetryWithInput inserts the corrected copy and marks the original
	// superseded, both in one transaction.
	JobRetryWithInput(ctx context.Context, p *JobRetryWithInputParams) (*Job, error)

	// OperationInsert persists a new bulk operation (status pending,
	// created_at the store's now) and returns it.
	OperationInsert(ctx context.Context, p *OperationInsertParams) (*Operation, error)
	OperationGet(ctx context.Context, p *OperationGetParams) (*Operation, error)
	// OperationList pages operations newest first.
	OperationList(ctx context.Context, p *OperationListParams) ([]*Operation, error)
	// OperationCancel marks a pending or running operation cancelled.
	OperationCancel(ctx context.Context, p *OperationCancelParams) (*Operation, error)
	// OperationClaim leases the oldest pending or running operation whose
	// lease is free or expired (fence +1) to Holder; nil when none.
	OperationClaim(ctx context.Context, p *OperationClaimParams) (*OperationLease, error)
	// OperationProcessBatch applies the operation's action to the next
	// Limit jobs past its id cursor that match its selector and entered
	// their state at or before its creation (re-checked in the same
	// transaction), and commits the jobs' changes and the operation's
	// progress together, fenced on the operation lease (ErrLeaseLost
	// otherwise). It completes the operation when no job is left.
	OperationProcessBatch(ctx context.Context, p *OperationProcessBatchParams) (*Operation, error)

	// QueueList names every queue that has jobs or a paused record.
	QueueList(ctx context.Context) ([]QueueInfo, error)
	// QueuePause and QueueResume: workers do not claim from a paused queue.
	QueuePause(ctx context.Context, p *QueuePauseParams) error
	QueueResume(ctx context.Context, p *QueuePauseParams) error
}

type JobListParams struct {
	Filter Filter
	// ExcludeSuperseded leaves out jobs retried with new input (bulk
	// selectors do, unless the filter includes them).
	ExcludeSuperseded bool
	After             *Cursor
	Reverse           bool
	Limit             int
}

type JobCountParams struct {
	Filter            Filter
	ExcludeSuperseded bool
	Max               int64
	// AsOf counts only jobs that entered their state at or before it.
	AsOf *time.Time
}

type JobCountByQueueParams struct {
	Queue string // "" for all
}

type JobErrorGroupsParams struct {
	Filter Filter
	Limit  int
}

type JobRetryParams struct {
	ID       string
	Actor    string
	Force    bool
	Deadline *time.Time
}

type JobActionParams struct {
	ID    string
	Actor string
}

type JobUpdatePayloadParams struct {
	ID          string
	Payload     json.RawMessage
	Fingerprint string
	Version     int64
	Actor       string
}

type JobRetryWithInputParams struct {
	ID          string
	NewID       string
	Payload     json.RawMessage
	Fingerprint string
	Actor       string
}

type OperationInsertParams struct {
	ID        string
	Action    Action
	Selector  Filter
	CreatedBy string
	Matched   int64
	Rate      int
}

type OperationGetParams struct{ ID string }

type OperationListParams struct {
	After *Cursor // CreatedAt/ID of the last row seen
	Limit int
}

type OperationCancelParams struct {
	ID    string
	Actor string
}

type OperationClaimParams struct {
	Holder string
	TTL    time.Duration
}

// OperationLease is a maintenance instance's hold on an operation.
type OperationLease struct {
	Operation *Operation
	Holder    string
	Fence     int64
}

type OperationProcessBatchParams struct {
	ID     string
	Holder string
	Fence  int64
	Limit  int
	TTL    time.Duration // extends the operation lease
}

type QueuePauseParams struct {
	Queue string
	Actor string
}
