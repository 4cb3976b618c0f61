package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/outage"
	"github.com/sluicehq/sluice/sluicetype"
)

// Engine enqueues jobs, runs the workers of the queues it is configured
// with, and takes its turn at maintenance. Several engines (processes) may
// share one store.
type Engine struct {
	store backend.Store
	cfg   Config
	log   *slog.Logger
	// claimDeadlinePlan is what every claim writes on jobs past their
	// deadline.
	claimDeadlinePlan backend.ClaimDeadlineWrite
	// holdRow is the table's row for a quarantined fingerprint's waiting
	// jobs.
	holdRow backend.Transition

	mu    sync.RWMutex
	kinds map[string]*Kind
	dead  []DeathHandler
	// periodic are the schedules this engine fires (periodic.go).
	periodic map[string]*periodicDef

	started atomic.Bool
	stopped atomic.Bool

	// runCtx lives from Start to Stop; workers' contexts derive from it.
	runCtx    context.Context
	runCancel context.CancelFunc
	// hardCtx is cancelled when the shutdown bound is reached.
	hardCtx    context.Context
	hardCancel context.CancelFunc
	wg         sync.WaitGroup

	queues    map[string]*queueRunner
	completer *completer
	// checkpoints group-commits workflow steps (checkpointer.go).
	checkpoints checkpointer
	// parents runs the wake checks of parents whose children ended
	// (signal.go).
	parents parentChecks
	running *runningSet
	// suspects admits jobs that crashed before (suspects.go).
	suspects *suspectGate
	// crashes orders a crash's write against claims and held jobs
	// (crashgate.go).
	crashes crashGate
	// storeOK is when the store last answered this process without error
	// after a failure: the reaper waits a heartbeat TTL after an outage
	// before it may call a silent worker dead.
	contact contactClock
	// clock holds the offset of the store's clock from this process's.
	clock storeClock
	bus   bus
	// opsWake starts the operation runner at once after a Bulk.
	opsWake chan struct{}
	// lastReconcile is when this engine last recounted the counters.
	lastReconcile atomic.Int64
	// out* report each loop's store outages: one WARN when one begins,
	// one INFO when it ends, and the loop's backoff meanwhile
	// (internal/outage). Each claim loop has its own (queueRunner.out).
	outComplete  *outage.Outage
	outOutcome   *outage.Outage
	outHeartbeat *outage.Outage
	outRenew     *outage.Outage
	outMaint     *outage.Outage
	outOps       *outage.Outage
	outPeriodic  *outage.Outage
}

// New builds an engine over store. Register kinds and death handlers, then
// Start it to run workers and maintenance; Enqueue works without Start.
func New(store backend.Store, cfg Config) (*Engine, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalid)
	}
	cfg = cfg.withDefaults()
	for name := range cfg.Queues {
		if err := sluicetype.ValidateName("queue", name); err != nil {
			return nil, err
		}
	}
	for _, l := range cfg.Limits {
		if err := validateLimit(l); err != nil {
			return nil, err
		}
	}
	// Leases and heartbeats belong to this incarnation, not to a name
	// that a restarted process may reuse (see Config.WorkerID).
	if cfg.WorkerID == "" {
		host, _ := os.Hostname()
		cfg.WorkerID = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	cfg.WorkerID += "/" + uuid.NewString()[:8]
	e := &Engine{
		store:   store,
		cfg:     cfg,
		log:     cfg.Logger,
		kinds:   map[string]*Kind{},
		running: newRunningSet(),
		opsWake: make(chan struct{}, 1),
	}
	// Completions retry from 20ms up to 2s.
	e.outComplete = outage.New(e.log, "complete", outage.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 2 * time.Second})
	// Outcomes other than success retry on their own (finishWithRetry);
	// this only reports the ones given up.
	e.outOutcome = outage.New(e.log, "outcome", outage.Options{})
	// The heartbeat and renewals keep their cadence (see leaseLoop).
	e.outHeartbeat = outage.New(e.log, "heartbeat", outage.Options{})
	e.outRenew = outage.New(e.log, "lease renewal", outage.Options{})
	maint := outage.Options{MinBackoff: cfg.MaintenanceInterval, MaxBackoff: max(cfg.MaintenanceInterval, outage.DefaultOutageMaxBackoff)}
	e.outMaint = outage.New(e.log, "maintenance", maint)
	e.outOps = outage.New(e.log, "operations", maint)
	e.outPeriodic = outage.New(e.log, "schedules", outage.Options{MinBackoff: periodicPoll, MaxBackoff: outage.DefaultOutageMaxBackoff})
	e.queues = make(map[string]*queueRunner, len(cfg.Queues))
	for name, q := range cfg.Queues {
		e.queues[name] = newQueueRunner(e, name, q)
	}
	e.completer = newCompleter(e)
	e.checkpoints.e = e
	most := 1
	for _, q := range cfg.Queues {
		most = max(most, q.Concurrency)
	}
	e.suspects = newSuspectGate(most)
	e.running.released = func(r *runState) {
		e.suspects.released(r.suspect)
		if r.suspect == suspectLone {
			// Claims held back while it was held may go on.
			e.wakeAll()
		}
	}
	var err error
	if e.claimDeadlinePlan, err = claimDeadlinePlan(cfg.WorkerID); err != nil {
		return nil, err
	}
	if e.holdRow, err = backend.TransitionFor(backend.TriggerHold); err != nil {
		return nil, err
	}
	return e, nil
}

// Store returns the store the engine runs on.
func (e *Engine) Store() backend.Store { return e.store }

// WorkerID is this engine's incarnation as its leases and heartbeats name
// it: Config.WorkerID (or host/pid) and a random suffix.
func (e *Engine) WorkerID() string { return e.cfg.WorkerID }

// Config returns the engine's settings with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Register adds a kind this engine can run. Register before Start.
func (e *Engine) Register(k Kind) error {
	if err := sluicetype.ValidateName("kind", k.Name); err != nil {
		return err
	}
	if k.Handler == nil {
		return fmt.Errorf("%w: kind %q has no handler", ErrInvalid, k.Name)
	}
	if k.Version <= 0 {
		k.Version = 1
	}
	if k.Backoff == nil {
		k.Backoff = DefaultBackoff
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started.Load() {
		return fmt.Errorf("%w: register kind %q before Start", ErrInvalid, k.Name)
	}
	if _, dup := e.kinds[k.Name]; dup {
		return fmt.Errorf("%w: kind %q registered twice", ErrInvalid, k.Name)
	}
	e.kinds[k.Name] = &k
	return nil
}

// OnDead adds a death handler. Handlers run in registration order.
func (e *Engine) OnDead(h DeathHandler) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dead = append(e.dead, h)
}

func (e *Engine) kind(name string) *Kind {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.kinds[name]
}

// kindVersions maps every registered kind to its schema version, for claims.
func (e *Engine) kindVersions() map[string]int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	m := make(map[string]int, len(e.kinds))
	for n, k := range e.kinds {
		m[n] = k.Version
	}
	return m
}

// Start runs the workers and, unless turned off, maintenance. It returns at
// once; Stop ends them.
func (e *Engine) Start(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: engine already started", ErrInvalid)
	}
	e.warnDeadLetterRules()
	e.claimDeadlinePlan.DeadLetter = e.claimDeadLetterRoutes()
	if len(e.cfg.Queues) > 0 && len(e.kindVersions()) == 0 {
		return fmt.Errorf("%w: queues configured but no kind registered", ErrInvalid)
	}
	if e.hasPeriodic() {
		if _, err := backend.ScheduleStoreOf(e.store); err != nil {
			e.started.Store(false)
			return fmt.Errorf("schedules declared: %w", err)
		}
	}
	if err := e.setConfigLimits(ctx); err != nil {
		e.started.Store(false)
		return err
	}
	e.runCtx, e.runCancel = context.WithCancel(context.WithoutCancel(ctx))
	e.hardCtx, e.hardCancel = context.WithCancel(context.WithoutCancel(ctx))
	e.contact.reset()

	if len(e.queues) > 0 {
		// Say we live before claiming anything, so no reaper mistakes our
		// first leases for a dead process's.
		if err := e.heartbeat(ctx); err != nil {
			e.contact.fail()
			if outage.StoreUnavailable(err) {
				e.outHeartbeat.Fail(err)
			} else {
				e.log.Warn("first heartbeat failed", "err", err)
			}
		} else {
			e.outHeartbeat.Succeed()
		}
		e.spawn(e.completer.run)
		e.spawn(e.leaseLoop)
		for _, q := range e.queues {
			e.spawn(q.run)
		}
		e.startWakeups() // wakeup.go: other processes' work
	}
	if e.hasPeriodic() {
		e.spawn(e.periodicLoop)
	}
	if !e.cfg.NoMaintenance {
		e.spawn(e.maintenanceLoop)
		if backend.Declares(e.store, backend.CapabilityOperations) {
			e.spawn(e.operationLoop)
		}
	}
	return nil
}

func (e *Engine) hasPeriodic() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.periodic) > 0
}

func (e *Engine) spawn(fn func()) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn()
	}()
}

// Stop shuts down gracefully: no new claims, running jobs get until the
// shutdown bound (ctx's deadline or Config.ShutdownTimeout, the sooner) to
// finish, then their contexts are cancelled and unfinished ones are
// released to available without charging an attempt.
func (e *Engine) Stop(ctx context.Context) error {
	if !e.started.Load() || !e.stopped.CompareAndSwap(false, true) {
		return nil
	}
	bound, cancel := context.WithTimeout(ctx, e.cfg.ShutdownTimeout)
	defer cancel()
	e.runCancel()
	for _, q := range e.queues {
		q.stopClaiming()
	}
	drained := make(chan struct{})
	go func() {
		// A claim in flight may still start jobs: wait for every producer
		// to return before waiting for the jobs.
		for _, q := range e.queues {
			<-q.done
		}
		for _, q := range e.queues {
			q.waitIdle()
		}
		close(drained)
	}()
	select {
	case <-drained:
	case <-bound.Done():
		// Handlers still running are abandoned first, so that none of them
		// writes an outcome for the cancellation; then their jobs are
		// released, charging nothing. A late write is fenced out anyway.
		held := e.running.abandonUnacked()
		e.hardCancel()
		e.releaseUnfinished(context.WithoutCancel(ctx), held, msgReleasedAtShutdown)
	}
	if len(e.queues) > 0 {
		// The completer runs only in an engine with queues (see Start).
		e.completer.close()
	}
	e.hardCancel()
	e.wg.Wait()
	if len(e.queues) > 0 {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer dcancel()
		if err := e.store.WorkerDelete(dctx, &backend.WorkerDeleteParams{ID: e.cfg.WorkerID}); err != nil {
			e.log.Warn("worker record not removed", "err", err)
		}
	}
	return nil
}

// releaseUnfinished hands every job still held by this process back to
// available, charging nothing; msg is the event's text.
func (e *Engine) releaseUnfinished(ctx context.Context, held []*runState, msg string) {
	for _, r := range held {
		_, err := e.store.JobFinish(ctx, shutdownPlan(r, e.cfg.WorkerID, msg))
		if err == nil {
			e.observeTransition(r.queue, r.kind, StateRunning, StateAvailable)
		} else if !errors.Is(err, ErrLeaseLost) {
			e.log.Warn("release at shutdown failed", "job", r.ref.ID, "err", err)
		}
		e.running.remove(r.ref.ID)
	}
}

// shutdownPlan hands a job this process still holds back to available,
// charging nothing.
func shutdownPlan(r *runState, worker, msg string) *backend.JobFinishParams {
	return &backend.JobFinishParams{
		JobRef: r.ref, To: StateAvailable, Schedule: backend.ScheduleNow,
		Counts: []backend.CountDelta{{Queue: r.queue, From: StateRunning, To: StateAvailable, N: 1}},
		Event: &backend.EventWrite{Kind: EventShutdown, Actor: worker, From: StateRunning, To: StateAvailable,
			Attempt: r.attempt + 1, Message: msg},
	}
}

func (e *Engine) heartbeat(ctx context.Context) error {
	host, _ := os.Hostname()
	queues := make([]string, 0, len(e.queues))
	for q := range e.queues {
		queues = append(queues, q)
	}
	return e.store.WorkerHeartbeat(ctx, &backend.WorkerHeartbeatParams{
		ID: e.cfg.WorkerID, Host: host, PID: os.Getpid(), Queues: queues,
		TTL: e.heartbeatTTL(),
	})
}

// reconnectGrace is how long after the store answers this process again
// another living process's client may still refuse to reach it. go-redis,
// once a pool's dials have failed as many times as it has connections,
// fails every call until a background dial, tried once a second,
// succeeds; a reaper that trusted its own contact sooner would charge a
// crash to a worker whose beats were refused by its own client. It is
// added after this process's start too: a process cannot tell whether
// the store has just come back (one replacing a killed worker is often
// started the moment the server answers), and the cost, a crash found
// 1.5 s later by a process that has only just started, is small.
const reconnectGrace = 1500 * time.Millisecond

// heartbeatTTL: a process is gone after three missed beats.
func (e *Engine) heartbeatTTL() time.Duration { return 3 * e.cfg.HeartbeatInterval }

// contactClock tracks the store's availability as this process sees it.
// An unbroken run of successes starts at the first success after the last
// failure, not at the failure: a loop that backs off through an outage
// sees its last failure well before the store came back, and counting
// from that failure would trust the store (and call silent workers dead)
// before the living ones have had a heartbeat interval to beat again.
type contactClock struct {
	mu     sync.Mutex
	since  time.Time // start of the current unbroken run of successes (or of the process)
	broken bool      // a failure was seen and no success since
}

func (c *contactClock) reset() {
	c.mu.Lock()
	c.since, c.broken = time.Now(), false
	c.mu.Unlock()
}

// fail records a failure (or a call slow enough to count as one).
func (c *contactClock) fail() {
	c.mu.Lock()
	c.broken = true
	c.mu.Unlock()
}

// trusts reports whether the store has answered without a break for ttl
// and reconnectGrace more, since this process's start or the end of its
// last outage; one lock, so the two facts are read together.
func (c *contactClock) trusts(ttl time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.broken && time.Since(c.since) >= ttl+reconnectGrace
}

// ok records a success: after a failure, the unbroken run begins now.
func (c *contactClock) ok() {
	c.mu.Lock()
	if c.broken {
		c.since, c.broken = time.Now(), false
	}
	c.mu.Unlock()
}

// storeClock converts the store's times into local timers.
type storeClock struct {
	offset atomic.Int64 // store now minus local now, in nanoseconds
}

func (c *storeClock) observe(storeNow time.Time) {
	if !storeNow.IsZero() {
		c.offset.Store(int64(time.Until(storeNow)))
	}
}

// now is the store's clock as best known.
func (c *storeClock) now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}
