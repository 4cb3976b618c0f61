package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Config sets up an Engine. The zero value of every field means its
// default.
type Config struct {
	// Queues this engine works, with their concurrency. An engine with no
	// queues only enqueues and runs maintenance.
	Queues map[string]QueueConfig
	// Limits are concurrency and rate limits across every process on the
	// store (a kind's or a queue's running jobs, or starts), written to the store at Start:
	// they replace what the store held for the same kind or queue, and
	// hold in every process within a second. Control.SetLimit changes
	// them at runtime; limits.go.
	Limits []Limit
	// WorkerID names this process for the people who read its leases,
	// heartbeats, timeline entries and logs (a pod or host name, say);
	// host/pid when empty. The engine adds /<8 random hex> (see
	// Engine.WorkerID): a lease belongs to one incarnation, not to a
	// name. A process restarted under the same WorkerID is a new
	// incarnation; its previous one's jobs are charged a crash once that
	// incarnation's heartbeats stop, as for any process gone, so a
	// poison pill that kills it is counted and quarantined. Two live
	// engines never share an id, whatever WorkerID says.
	WorkerID string
	// LeaseDuration is how long a claim lasts without renewal (30s).
	LeaseDuration time.Duration
	// HeartbeatInterval is how often the process says it lives (5s); it
	// is considered gone after three missed beats.
	HeartbeatInterval time.Duration
	// PollInterval is how often an idle queue looks for work written by
	// other processes (1s). Work enqueued in this process wakes it at once.
	PollInterval time.Duration
	// MaintenanceInterval is the tick of scheduling, reaping and retention
	// (1s).
	MaintenanceInterval time.Duration
	// NoMaintenance turns the maintenance loops off in this engine.
	NoMaintenance bool
	// CrashLimit is how many crashes of one job quarantine its
	// fingerprint (3).
	CrashLimit int
	// CrashBackoff gives the delay before a suspect runs again after crash
	// n (1-based); longer than an ordinary retry so it runs behind its
	// siblings. DefaultCrashBackoff when nil.
	CrashBackoff func(crash int) time.Duration
	// MaxAttempts is the default attempt budget of a job (25).
	MaxAttempts int
	// PayloadLimit is the largest payload accepted, in bytes (1 MiB).
	PayloadLimit int
	// Retention of terminal jobs per state; see DefaultRetention. A
	// negative retention (Forever), like a state left out, keeps the jobs.
	Retention map[State]time.Duration
	// QueueRetention overrides Retention per queue and state, like
	// QueueConfig.Retention but for any queue, also those this engine does
	// not work: maintenance, which any engine may lead, sweeps them all.
	// Where both name a state, QueueRetention wins.
	QueueRetention map[string]map[State]time.Duration
	// ExpiryWarning is how long before retention deletes a dead,
	// quarantined or undecodable job it is flagged as expiring (24h):
	// the console's state tabs count such jobs, its sheet says so, and
	// sluice_jobs_expiring reports them (`expires<24h` lists them). A
	// state kept for less is flagged for all of its retention.
	ExpiryWarning time.Duration
	// AuditRetention is how long the audit trail keeps a record
	// (DefaultAuditRetention, 90 days, when 0); negative keeps every one.
	AuditRetention time.Duration
	// ShutdownTimeout bounds the drain on Stop (10s); work unfinished by
	// then is released without charging an attempt.
	ShutdownTimeout time.Duration
	// CompleteBatch is the most acknowledgements written in one
	// transaction (1000).
	CompleteBatch int
	// CompleteWriters is how many acknowledgement batches may be written
	// at once (1). With one, a batch's round trip bounds the rate at
	// batch size over latency; a server store that runs statements in
	// parallel can take more. A single-writer store gains nothing.
	CompleteWriters int
	// OperationBatch is the most jobs a bulk operation changes in one
	// transaction (1000).
	OperationBatch int
	Logger         *slog.Logger
	// DeadLetter routes the deaths of every kind without a rule of its own
	// (Kind.DeadLetter) to a dead-letter job; none when nil.
	DeadLetter *DeadLetterRule
	// ScheduleSeenInterval is how often this engine declares its
	// schedules to the store again (one minute): a schedule no process
	// declared for three intervals is shown as gone.
	ScheduleSeenInterval time.Duration
	// Observer is told of the transitions this engine's workers write and
	// of each handler run, for metrics; nil costs nothing.
	Observer Observer
	// Interceptor is let in around enqueues, handler runs, workflow steps
	// and operator actions, for tracing (package sluiceotel); nil costs
	// nothing.
	Interceptor Interceptor
}

// QueueConfig is one queue's settings.
type QueueConfig struct {
	// Concurrency is how many of its jobs run at once in this process (10).
	Concurrency int
	// Prefetch is how many jobs the queue claims ahead of its free slots.
	// They are held under lease, renewed like running jobs and so visible
	// to the reaper, start as slots free, and are released without charge
	// on Stop. It makes claims larger and rarer: a transaction per claim
	// is what a store pays most for at tens of workers.
	//
	// 0 (the default) holds what the queue runs in about
	// PrefetchHorizon at its recent rate, at most DefaultPrefetch: a
	// queue of no-op jobs holds hundreds, one of jobs that take a second
	// holds next to none, so a slow process does not sit on work that
	// others could run. A positive value holds that many, whatever the
	// rate; a negative one none.
	Prefetch int
	// Retention overrides Config.Retention for this queue's jobs.
	Retention map[State]time.Duration
}

// DefaultPrefetch is the most jobs a queue of the given concurrency holds
// ahead of its slots when its Prefetch is left 0: four times the
// concurrency, and at least 1000. Below the cap, PrefetchHorizon decides;
// the cap binds only a queue that runs more than 50,000 jobs a second in
// one process. At such rates fewer, larger claims cost the store less a
// job (scripts/bench throughput on PostgreSQL and SQLite shows it), and
// a larger cap gains nothing more at this horizon.
// The horizon is left at 20 ms: a job held ahead of its slot is charged
// a crash when its process dies, as a running job is.
func DefaultPrefetch(concurrency int) int { return max(4*concurrency, 1000) }

// PrefetchHorizon is how much work, at a queue's recent rate, it holds
// ahead of its slots when its Prefetch is left 0: enough to feed the
// slots through a few claims' round trips.
const PrefetchHorizon = 20 * time.Millisecond

// prefetchAuto marks a queue whose surplus follows its rate.
const prefetchAuto = -1

// DefaultExpiryWarning is Config.ExpiryWarning's default.
const DefaultExpiryWarning = 24 * time.Hour

// DefaultRetention keeps completed and cancelled jobs a day and dead ones
// two weeks.
func DefaultRetention() map[State]time.Duration {
	return map[State]time.Duration{
		StateCompleted:   24 * time.Hour,
		StateCancelled:   24 * time.Hour,
		StateArchived:    14 * 24 * time.Hour,
		StateQuarantined: 14 * 24 * time.Hour,
		StateUndecodable: 14 * 24 * time.Hour,
	}
}

func (c Config) withDefaults() Config {
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.MaintenanceInterval <= 0 {
		c.MaintenanceInterval = time.Second
	}
	if c.ExpiryWarning <= 0 {
		c.ExpiryWarning = DefaultExpiryWarning
	}
	if c.ScheduleSeenInterval <= 0 {
		c.ScheduleSeenInterval = time.Minute
	}
	if c.CrashLimit <= 0 {
		c.CrashLimit = DefaultCrashLimit
	}
	if c.CrashBackoff == nil {
		c.CrashBackoff = DefaultCrashBackoff
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 25
	}
	if c.PayloadLimit <= 0 {
		c.PayloadLimit = 1 << 20
	}
	if c.Retention == nil {
		c.Retention = DefaultRetention()
	}
	if c.AuditRetention == 0 {
		c.AuditRetention = DefaultAuditRetention
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.OperationBatch <= 0 || c.OperationBatch > OperationBatch {
		c.OperationBatch = OperationBatch
	}
	if c.CompleteBatch <= 0 {
		c.CompleteBatch = 1000
	}
	if c.CompleteWriters <= 0 {
		c.CompleteWriters = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	qs := make(map[string]QueueConfig, len(c.Queues))
	for name, q := range c.Queues {
		if q.Concurrency <= 0 {
			q.Concurrency = 10
		}
		if q.Prefetch < 0 {
			q.Prefetch = 0
		} else if q.Prefetch == 0 {
			q.Prefetch = prefetchAuto
		}
		qs[name] = q
	}
	c.Queues = qs
	return c
}

// Handler runs one job. Its error decides the outcome: nil succeeds; Skip,
// Revoke, Snooze and Undecodable do what they say; any other error is a
// failed attempt. A panic is a crash.
type Handler func(ctx context.Context, job *Job) error

// Upcaster turns a payload of one schema version into the next.
type Upcaster func(payload json.RawMessage) (json.RawMessage, error)

// Kind registers a job kind with this engine.
type Kind struct {
	Name    string
	Handler Handler
	// Version is the payload schema version this code writes and reads
	// (1 when 0). Older jobs are upcast through Upcasters[v] (v to v+1);
	// a job with no path is undecodable, and a newer one is left for a
	// newer worker.
	Version   int
	Upcasters map[int]Upcaster
	// Timeout bounds one attempt (none when 0; a job's own timeout wins).
	Timeout time.Duration
	// MaxAttempts overrides Config.MaxAttempts for new jobs of this kind.
	MaxAttempts int
	// Backoff gives the delay before retry n (1-based) after an error;
	// DefaultBackoff when nil.
	Backoff func(attempt int) time.Duration
	// StepVersion is the version of the kind's step set (engine.Step
	// names and order; 1 when 0), declared as Version is for payloads.
	// A job whose checkpoint was written by a newer step set is left for
	// a newer worker; an older one is brought up through
	// StepUpgraders[v] (v to v+1) where the kind declares one.
	StepVersion   int
	StepUpgraders map[int]StepUpgrader
	// DeadLetter routes this kind's deaths; it beats Config.DeadLetter.
	DeadLetter *DeadLetterRule
}

// TypedHandler adapts a function taking a decoded payload; a payload that
// does not decode into T makes the job undecodable.
func TypedHandler[T any](fn func(ctx context.Context, job *Job, payload T) error) Handler {
	return func(ctx context.Context, job *Job) error {
		var v T
		if err := json.Unmarshal(job.Payload, &v); err != nil {
			return Undecodable(err)
		}
		return fn(ctx, job, v)
	}
}

// DefaultBackoff is exponential with full jitter on its upper half:
// attempt n waits between 2^n/2 and 2^n seconds, capped at an hour.
func DefaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 12 {
		attempt = 12
	}
	base := time.Duration(1<<attempt) * time.Second
	if base > time.Hour {
		base = time.Hour
	}
	half := base / 2
	return half + rand.N(half+1)
}

// DefaultCrashBackoff puts a suspect behind its siblings: longer than an
// ordinary retry, growing with each crash.
func DefaultCrashBackoff(crash int) time.Duration {
	return DefaultBackoff(crash + 2)
}

// DeathReason says why a job died.
type DeathReason = TerminalReason

// DeathEvent is what a death handler receives: a deep copy of the job as
// written, the terminal error and the reason.
type DeathEvent struct {
	Job    *Job
	Error  string
	Reason DeathReason
}

// DeathHandler is called once per fence-verified transition to archived or
// quarantined, after the durable write. It must not block for long; a
// panic is recovered and logged.
type DeathHandler func(ctx context.Context, ev DeathEvent)
