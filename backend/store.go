package backend

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// Store is what the engine needs from storage. Methods are Noun+Verb and
// take a params struct, so a new field never breaks a caller.
//
// Rules every implementation keeps (backend/backendtest checks them):
//   - Every time is the store's clock: callers pass durations, the store
//     adds them to its own now. Times are kept to the microsecond
//     (PostgreSQL's precision); a time a caller passes (a deadline) may
//     come back truncated to it.
//   - A write naming a lease (id, lease id, fence) applies only while the
//     job is running under that exact lease; otherwise it changes nothing
//     and reports ErrLeaseLost.
//   - Each method is one transaction: a transition, its event row, its
//     error entry and any fingerprint change commit together.
//
// Writes arrive resolved (plan.go): the engine has decided the state, the
// texts and the consequences, and the store only translates them into its
// own statements. The operator surface (ControlStore) and idempotency keys
// (IdempotencyStore) are part of every store; what a store cannot serve it
// leaves undeclared in Capabilities and answers with ErrUnsupported.
type Store interface {
	ControlStore
	IdempotencyStore
	WaitStore

	// Backend names the implementation: "sqlite", "postgres", "redis".
	Backend() string
	// Capabilities lists what the store serves beyond the rules every
	// store keeps. Code asks with Declares.
	Capabilities() []Capability
	// Close releases the store's connections.
	Close() error
	// Now is the store's clock.
	Now(ctx context.Context) (time.Time, error)

	// JobInsertMany writes new jobs; each is accepted or refused on its
	// own (ErrConflict for an id with other content, ErrQuarantined for a
	// quarantined fingerprint). An id that exists with the same content
	// returns the existing job with Existing set.
	JobInsertMany(ctx context.Context, p *JobInsertManyParams) ([]JobInsertResult, error)
	// JobGetByID returns one job (payload only when asked) or ErrNotFound.
	JobGetByID(ctx context.Context, p *JobGetByIDParams) (*sluicetype.Job, error)
	// JobEventList returns a job's stored timeline events, oldest first.
	JobEventList(ctx context.Context, p *JobEventListParams) ([]sluicetype.Event, error)
	// JobClaim moves up to Limit available jobs of one queue to running
	// under new leases (fence +1) and returns them with their payloads.
	// Jobs whose deadline has passed are written as PastDeadline says
	// instead (returned in Dead), never run.
	JobClaim(ctx context.Context, p *JobClaimParams) (*JobClaimResult, error)
	// JobCompleteMany finishes successful jobs in one transaction; each
	// item is fenced on its own.
	JobCompleteMany(ctx context.Context, p *JobCompleteManyParams) ([]error, error)
	// JobFinish applies one fenced transition out of running (anything but
	// success) as the engine resolved it: retry, archive, quarantine,
	// snooze, undecodable, revoke, release. It returns the job as written
	// (nil when deleted).
	JobFinish(ctx context.Context, p *JobFinishParams) (*sluicetype.Job, error)
	// JobCheckpoint replaces running jobs' checkpoints (a workflow step's
	// result each) in one transaction, each item under its job's lease:
	// fenced like JobFinish, and refused with ErrLeaseLost too once the
	// lease has expired by the store's clock, so that no step is recorded
	// after the reaper may have taken the job. Each item succeeds or fails
	// on its own.
	JobCheckpoint(ctx context.Context, p *JobCheckpointParams) ([]error, error)
	// JobLeaseRenew extends leases; each item is fenced on its own: nil,
	// ErrLeaseLost, or ErrBusy when the store passed a row another write
	// held by (the engine renews it next round).
	JobLeaseRenew(ctx context.Context, p *JobLeaseRenewParams) ([]error, error)
	// JobListExpiredLeases lists running jobs whose lease has expired, with
	// whether the owning worker process still heartbeats.
	JobListExpiredLeases(ctx context.Context, p *JobListExpiredLeasesParams) ([]ExpiredLease, error)
	// JobScheduleDue moves jobs whose time has come (scheduled and
	// retryable, as the params say) to available and returns the queues
	// that got work.
	JobScheduleDue(ctx context.Context, p *JobScheduleDueParams) ([]string, error)
	// JobDeleteExpired deletes terminal jobs past their retention, at most
	// Limit, and returns how many.
	JobDeleteExpired(ctx context.Context, p *JobDeleteExpiredParams) (int, error)

	// FingerprintGet returns a quarantine record or ErrNotFound.
	FingerprintGet(ctx context.Context, p *FingerprintGetParams) (*sluicetype.Fingerprint, error)
	// FingerprintList lists quarantined and probationary fingerprints.
	FingerprintList(ctx context.Context, p *FingerprintListParams) ([]*sluicetype.Fingerprint, error)
	// FingerprintRelease lifts a quarantine: the record goes on probation
	// and its held jobs return to available with crash counters reset. It
	// returns how many jobs were released.
	FingerprintRelease(ctx context.Context, p *FingerprintReleaseParams) (int, error)

	// WorkerHeartbeat records that a worker process lives, until TTL.
	WorkerHeartbeat(ctx context.Context, p *WorkerHeartbeatParams) error
	// WorkerDelete removes a worker's record on clean shutdown.
	WorkerDelete(ctx context.Context, p *WorkerDeleteParams) error

	// LeaderAttempt takes or renews the named maintenance lease for holder.
	// It reports whether holder leads until TTL from now.
	LeaderAttempt(ctx context.Context, p *LeaderAttemptParams) (bool, error)
	// LeaderResign gives the lease up if holder has it.
	LeaderResign(ctx context.Context, p *LeaderResignParams) error
}

// JobInsertParams is one new job. The engine has validated it and computed
// its fingerprint.
type JobInsertParams struct {
	ID            string
	Queue         string
	Kind          string
	Payload       json.RawMessage
	SchemaVersion int
	Metadata      json.RawMessage
	Tags          []string
	Priority      int
	MaxAttempts   int
	Fingerprint   string
	// Delay from the store's now until the job is due; 0 makes it
	// available at once. ScheduledAt, when set, wins.
	Delay       time.Duration
	ScheduledAt *time.Time
	Deadline    *time.Time
	Timeout     time.Duration
	// UniqueKey, when set, makes the insert unique: while another job
	// with this key is in a state of its own UniqueStates mask
	// (sluicetype.UniqueMaskHolds), the insert writes nothing and returns
	// that job with Existing set. The store holds the key atomically
	// (never a check then an insert). UniqueStates is the mask this job
	// holds its key under.
	UniqueKey    string
	UniqueStates int64
}

type JobInsertManyParams struct {
	Jobs []*JobInsertParams
	// RefuseQuarantined refuses each job whose fingerprint is quarantined
	// (a *QuarantinedError in its result).
	RefuseQuarantined bool
}

// JobInsertResult is the outcome for one job of JobInsertMany.
type JobInsertResult struct {
	Job      *sluicetype.Job // without payload
	Existing bool            // the id existed with the same content, or the unique key was held
	Err      error
}

type JobGetByIDParams struct {
	ID             string
	IncludePayload bool
}

type JobEventListParams struct {
	JobID string
}

type JobClaimParams struct {
	Queue    string
	WorkerID string
	LeaseID  string
	Limit    int
	// Suspects is how many jobs on their first crash (crash_attempt 1)
	// the claim may take; they are taken only when the batch is not
	// filled by jobs that never crashed.
	Suspects int
	// Lone lets the claim take one job that crashed twice or more
	// (crash_attempt >= 2), and only when it takes nothing else: the
	// engine asks for it when its process runs nothing, and then runs
	// that job alone.
	Lone bool
	// Kinds maps each kind this worker runs to the newest schema version
	// it knows; jobs of other kinds or newer versions are left alone.
	Kinds         map[string]int
	LeaseDuration time.Duration
	// PastDeadline is the write for available jobs whose deadline has
	// passed; a zero value (To "") leaves them alone.
	PastDeadline ClaimDeadlineWrite
	// Partition, when set, takes only jobs whose partition has room
	// (a partitioned limit; ClaimUnderLimits sets it).
	Partition *ClaimPartition
}

type JobClaimResult struct {
	Jobs []*sluicetype.Job
	// Dead are jobs archived at claim because their deadline had passed.
	Dead []*sluicetype.Job
	// Now is the store's clock at the claim, so the worker can turn the
	// store's deadlines into local timers.
	Now time.Time
	// Limited: a limit across processes covered the claim, so fewer jobs
	// than asked may mean a full limit rather than an empty queue; the
	// worker claims again when one of its own jobs leaves running, not
	// only at its next poll.
	Limited bool
	// Bound: a limit, not the queue, decided how many jobs the claim
	// took — it took all the room a limit left, and that room was less
	// than it asked. A store may also say so when a full limit passed a
	// job by (Redis does; the SQL stores would need a query more). The
	// worker holds fewer jobs ahead of its slots then: a job held there
	// counts under the limit without running.
	Bound bool
}

// JobRef names a job under one lease.
type JobRef struct {
	ID      string
	LeaseID string
	Fence   int64
}

type JobCompleteItem struct {
	JobRef
	// Delete removes the row instead (completed retention is 0).
	Delete bool
}

type JobCompleteManyParams struct {
	Items []JobCompleteItem
	// EndProbation deletes the probation record of each completed job's
	// fingerprint: a success ends it.
	EndProbation bool
}

// JobCheckpointParams is a group of step writes, at most one per job.
type JobCheckpointParams struct {
	Items []JobCheckpointItem
}

// JobCheckpointItem is one step's write: the job's whole checkpoint as it
// is after the step.
type JobCheckpointItem struct {
	JobRef
	Checkpoint json.RawMessage
}

type JobLeaseRenewParams struct {
	Items         []JobRef
	LeaseDuration time.Duration
}

type JobListExpiredLeasesParams struct {
	Limit int
}

// ExpiredLease is a running job whose lease has run out.
type ExpiredLease struct {
	Job *sluicetype.Job
	// WorkerAlive reports that the lease's worker still heartbeats: the
	// lease was lost to a stall or an outage, not to a crash.
	WorkerAlive bool
}

// JobScheduleDueParams moves due jobs as the table's due row says: jobs
// in From whose scheduled_at has come go to To, the states of From taken
// in order when more than Limit are due.
type JobScheduleDueParams struct {
	From  []sluicetype.State
	To    sluicetype.State
	Limit int
}

// JobDeleteExpiredParams gives the retention of each terminal state, with
// per-queue overrides. A missing state is kept forever.
type JobDeleteExpiredParams struct {
	Retention      map[sluicetype.State]time.Duration
	QueueRetention map[string]map[sluicetype.State]time.Duration
	Limit          int
}

type FingerprintGetParams struct {
	Fingerprint string
}

type FingerprintListParams struct {
	Limit int
}

// FingerprintReleaseParams lifts a quarantine: the record goes on
// probation and the fingerprint's jobs in Spec.From get the spec's write
// (the release action: quarantined → available, crash counters reset),
// each with Event (From and Attempt its own).
type FingerprintReleaseParams struct {
	Fingerprint string
	Spec        ActionSpec
	Event       EventWrite
}

type WorkerHeartbeatParams struct {
	ID     string
	Host   string
	PID    int
	Queues []string
	TTL    time.Duration
}

type WorkerDeleteParams struct {
	ID string
}

type LeaderAttemptParams struct {
	Name   string
	Holder string
	TTL    time.Duration
}

type LeaderResignParams struct {
	Name   string
	Holder string
}
