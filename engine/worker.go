package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/outage"
	"github.com/sluicehq/sluice/sluicetype"
)

// queueRunner claims one queue's jobs in batches and runs each in its own
// goroutine, at most Concurrency at once. It claims up to Prefetch jobs
// ahead of its free slots: those wait in buf, under lease (they are in the
// running set, so their leases are renewed and the reaper sees them), and
// start as slots free, in claim order, on the goroutine of the job that
// freed the slot.
type queueRunner struct {
	e    *Engine
	name string
	cfg  QueueConfig

	wakeCh  chan struct{} // work was enqueued here
	freedCh chan struct{} // a slot (or a held job's place) came free
	// landedCh: a job of this queue left running in the store (its
	// outcome written, or its lease handed back) — a place under a limit
	// across processes came free, which a slot freeing is not while a
	// success waits for the completer.
	landedCh chan struct{}
	stopCh   chan struct{}
	stopOne  sync.Once
	// done closes when run has returned: no claim is in flight any more,
	// the jobs held ahead of a slot are released, and no job can start
	// after it.
	done chan struct{}

	mu sync.Mutex
	// slots counts the goroutines running jobs (at most Concurrency).
	slots int
	// buf holds claimed jobs waiting for a slot, oldest first.
	buf []heldJob
	// closed stops buf from feeding slots: the runner is stopping
	// (set by stopClaiming, and by the producer's last releaseHeld).
	closed bool

	active sync.WaitGroup

	// out reports this queue's claim failures once per outage and gives
	// the claim loop its backoff.
	out *outage.Outage

	// runs counts the jobs the slots have taken, for the rate.
	runs atomic.Int64
	// The rate the queue runs jobs at (jobs per second), kept by the
	// producer alone: when it was last measured and runs then.
	rate     float64
	rateAt   time.Time
	rateRuns int64
	// boundCap caps the surplus while a limit across processes binds the
	// queue's claims (-1: no cap), kept by the producer alone. A job held
	// ahead of a slot counts under the limit without running, so a
	// process that holds many takes room its own slots and other
	// processes could run in: a claim the limit bound halves the cap, a
	// claim it did not raises it by a quarter of the concurrency, until
	// the cap passes the surplus and lifts. Halving at once and growing
	// slowly keeps the cap near what the limit leaves rather than
	// swinging back to it within a few claims.
	boundCap int
}

// heldJob is a claimed job and this process's hold on it.
type heldJob struct {
	j *Job
	r *runState
}

func newQueueRunner(e *Engine, name string, cfg QueueConfig) *queueRunner {
	return &queueRunner{
		e: e, name: name, cfg: cfg,
		wakeCh:   make(chan struct{}, 1),
		freedCh:  make(chan struct{}, 1),
		landedCh: make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
		boundCap: -1,
		// From 10ms (a claim cut by a blip is worth a quick retry; the
		// poll interval when shorter) up to 5s.
		out: outage.New(e.log, "claim", outage.Options{MinBackoff: min(10*time.Millisecond, e.cfg.PollInterval)}),
	}
}

func (q *queueRunner) wake() { signal(q.wakeCh) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// stopClaiming ends the producer's claims and stops held jobs from
// starting: from Stop on, only jobs already running finish, and the
// producer hands the held ones back as it returns.
func (q *queueRunner) stopClaiming() {
	q.stopOne.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
		close(q.stopCh)
	})
}

func (q *queueRunner) waitIdle() { q.active.Wait() }

// surplus is how many jobs to hold ahead of the slots: the configured
// number or what the queue runs in PrefetchHorizon at its recent rate,
// within boundCap. Only the producer calls it.
func (q *queueRunner) surplus() int {
	s := q.wantSurplus()
	if q.boundCap >= 0 {
		s = min(s, q.boundCap)
	}
	return s
}

// bound adjusts boundCap after a claim: bound says a limit across
// processes decided how many jobs it took; surplus is the surplus the
// claim was sized with.
func (q *queueRunner) bound(bound bool, surplus int) {
	switch {
	case bound:
		q.boundCap = surplus / 2
	case q.boundCap >= 0:
		q.boundCap += max(1, q.cfg.Concurrency/4)
		if q.boundCap >= q.wantSurplus() {
			q.boundCap = -1
		}
	}
}

// wantSurplus is how many jobs to hold ahead of the slots, limits aside:
// the configured number, or what the queue runs in PrefetchHorizon at its
// recent rate.
func (q *queueRunner) wantSurplus() int {
	if q.cfg.Prefetch != prefetchAuto {
		return q.cfg.Prefetch
	}
	now := time.Now()
	if dt := now.Sub(q.rateAt); dt >= 5*time.Millisecond {
		runs := q.runs.Load()
		inst := float64(runs-q.rateRuns) / dt.Seconds()
		if q.rateAt.IsZero() {
			inst = 0
		}
		// Smoothed, so one slow claim does not empty the surplus.
		q.rate = 0.7*q.rate + 0.3*inst
		q.rateAt, q.rateRuns = now, runs
	}
	return min(DefaultPrefetch(q.cfg.Concurrency), int(q.rate*PrefetchHorizon.Seconds()))
}

// free is how many more jobs the runner may claim now, out of capacity.
func (q *queueRunner) free(capacity int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return capacity - q.slots - len(q.buf)
}

// run is the producer: claim while there is room and work, then sleep
// until woken, room frees, or the poll interval passes.
//
// Claims are batched: while jobs are held, the producer waits until half
// the room is free (or claimLinger passes) before claiming again, so one
// store transaction starts many jobs rather than one. With a prefetch of
// at least the concurrency the slots never wait for that: the held jobs
// feed them meanwhile.
func (q *queueRunner) run() {
	defer close(q.done)
	defer q.releaseHeld(msgReleasedAtShutdown)
	for {
		// capacity: how many jobs the runner holds at most now, running
		// and held ahead of a slot.
		surplus := q.surplus()
		capacity := q.cfg.Concurrency + surplus
		lowWater := max(1, capacity/2)
		free := q.free(capacity)
		if free <= 0 {
			if !q.wait(q.freedCh, nil) {
				return
			}
			continue
		}
		if free < lowWater {
			// Some room is free, not much: give the rest a moment.
			deadline := time.Now().Add(claimLinger)
			for free < lowWater {
				left := time.Until(deadline)
				if left <= 0 {
					break
				}
				t := time.NewTimer(left)
				ok := q.wait(q.freedCh, t.C)
				t.Stop()
				if !ok {
					return
				}
				free = q.free(capacity)
			}
		}
		n, limited, bound, err := q.claim(free)
		if err != nil {
			if q.e.runCtx.Err() != nil {
				return
			}
			q.e.contact.fail()
			if !outage.StoreUnavailable(err) {
				q.e.log.Warn("claim failed", "queue", q.name, "err", err)
			}
			// A refusal backs off too: retrying it at once would only
			// spin.
			backoff := q.out.Fail(err, "queue", q.name)
			if !q.wait(nil, time.After(backoff)) {
				return
			}
			continue
		}
		q.out.Succeed()
		q.bound(bound, surplus)
		if n == free {
			// The queue had at least a full batch: claim again as soon as
			// room frees, without waiting for the poll.
			if !q.wait(q.freedCh, nil) {
				return
			}
			continue
		}
		if limited {
			// A limit across processes covered the claim: the queue may
			// hold jobs a full limit kept back. One of this process's
			// jobs leaving running in the store frees a place under the
			// limit, so claim again then, or at the poll for places
			// freed elsewhere — a claim per job that ends here, not per
			// job that waits. Not at a slot freeing: a success's lease
			// counts until the completer writes it, so a claim then
			// would find the limit as full as before.
			if !q.wait(q.landedCh, time.After(q.e.cfg.PollInterval)) {
				return
			}
			continue
		}
		// The queue ran short: wait for new work here or from another
		// process (the poll), not for every slot that frees.
		if !q.wait(nil, time.After(q.e.cfg.PollInterval)) {
			return
		}
	}
}

// claimLinger bounds how long a producer waits for more free slots before
// claiming for the ones it has.
const claimLinger = 2 * time.Millisecond

// wait blocks until a wake-up, a signal on ch, or tick; it reports false
// when the runner is stopping.
func (q *queueRunner) wait(ch chan struct{}, tick <-chan time.Time) bool {
	select {
	case <-q.stopCh:
		return false
	case <-q.wakeCh:
	case <-ch:
	case <-tick:
	}
	return true
}

// claim takes up to free jobs and starts them; it returns how many it
// took, whether a limit across processes covered the claim and whether
// one bound it (backend.JobClaimResult's Limited and Bound).
func (q *queueRunner) claim(free int) (int, bool, bool, error) {
	e := q.e
	suspects, lone, ok := e.suspects.admit(e.running.len() == 0)
	if !ok {
		// A job that crashed twice or more runs alone in this process.
		return 0, false, false, nil
	}
	// Shared with other claims, exclusive with a crash's write (crashgate.go):
	// what this claim takes is in buf before a crash hands buf back.
	e.crashes.claims.RLock()
	defer e.crashes.claims.RUnlock()
	res, err := e.store.JobClaim(e.runCtx, &backend.JobClaimParams{
		Queue: q.name, WorkerID: e.cfg.WorkerID, LeaseID: uuid.NewString(),
		Limit: free, Suspects: suspects, Lone: lone, Kinds: e.kindVersions(),
		LeaseDuration: e.cfg.LeaseDuration,
		PastDeadline:  e.claimDeadlinePlan,
	})
	if err != nil {
		e.suspects.claimed(suspects, lone, 0, false)
		return 0, false, false, err
	}
	took, tookLone := 0, false
	for _, j := range res.Jobs {
		switch suspectOf(j) {
		case suspectFirst:
			took++
		case suspectLone:
			tookLone = true
		}
	}
	e.suspects.claimed(suspects, lone, took, tookLone)
	e.clock.observe(res.Now)
	e.observeClaim(res)
	for _, j := range res.Dead {
		go e.fireDeath(j, MessageDeadlineBeforeRun, ReasonDeadlineExceeded)
	}
	q.hold(res.Jobs)
	return len(res.Jobs), res.Limited, res.Bound, nil
}

// claimDeadlinePlan is the claim's write for available jobs past their
// deadline, from the table's claim_past_deadline row.
func claimDeadlinePlan(worker string) (backend.ClaimDeadlineWrite, error) {
	row, err := backend.TransitionFor(backend.TriggerClaimPastDeadline)
	if err != nil {
		return backend.ClaimDeadlineWrite{}, err
	}
	return backend.ClaimDeadlineWrite{
		To: row.To, Reason: row.Reason, LastError: MessageDeadlineBeforeRun, Pattern: MessageDeadlineBeforeRun,
		Event: backend.EventWrite{Kind: EventArchived, Actor: worker, From: StateAvailable, To: row.To, Message: MessageDeadlineBeforeRun},
	}, nil
}

// hold takes claimed jobs into the running set (so their leases are
// renewed from now on), queues them behind those already held, and starts
// as many as there are free slots.
func (q *queueRunner) hold(jobs []*Job) {
	if len(jobs) == 0 {
		return
	}
	held := make([]heldJob, len(jobs))
	for i, j := range jobs {
		ctx, cancel := context.WithCancelCause(q.e.hardCtx)
		held[i] = heldJob{j: j, r: q.e.running.add(j, ctx, cancel)}
	}
	q.mu.Lock()
	q.buf = append(q.buf, held...)
	var starts []heldJob
	// Once stopping (a claim that was in flight), nothing starts: the
	// producer hands these back as it returns.
	for !q.closed && q.slots < q.cfg.Concurrency {
		h, ok := q.nextLocked()
		if !ok {
			break
		}
		starts = append(starts, h)
		q.slots++
	}
	q.mu.Unlock()
	q.active.Add(len(starts))
	for _, h := range starts {
		go q.work(h)
	}
}

// work runs h, then the held jobs after it while there are any: a slot
// passes from one job to the next without a goroutine of its own.
func (q *queueRunner) work(h heldJob) {
	defer q.active.Done()
	for {
		q.runs.Add(1)
		q.e.execute(q, h.r, h.j)
		q.mu.Lock()
		next, ok := heldJob{}, false
		if !q.closed {
			next, ok = q.nextLocked()
		}
		if !ok {
			q.slots--
			q.mu.Unlock()
			signal(q.freedCh)
			return
		}
		h = next
		q.mu.Unlock()
		signal(q.freedCh)
	}
}

// nextLocked takes the oldest held job that may start now, with q.mu
// held. It passes over jobs of a fingerprint whose crash is being written:
// that crash hands them back (crashgate.go). A slot that finds none ends;
// what it passed over is handed back before the crash's write, so nothing
// is left in buf without a slot to feed it.
func (q *queueRunner) nextLocked() (heldJob, bool) {
	i := 0
	for i < len(q.buf) && !q.e.crashes.startable(q.buf[i].j.Fingerprint) {
		i++
	}
	if i == len(q.buf) {
		return heldJob{}, false
	}
	h := q.buf[i]
	if i == 0 {
		q.buf[0] = heldJob{}
		q.buf = q.buf[1:]
	} else {
		last := len(q.buf) - 1
		copy(q.buf[i:], q.buf[i+1:])
		q.buf[last] = heldJob{}
		q.buf = q.buf[:last]
	}
	if len(q.buf) == 0 {
		q.buf = nil // let the backing array go
	}
	return h, true
}

// takeHeld takes the held jobs of fingerprint fp out of buf, keeping the
// others in their order.
func (q *queueRunner) takeHeld(fp string) []heldJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	var taken []heldJob
	kept := q.buf[:0]
	for _, h := range q.buf {
		if h.j.Fingerprint == fp {
			taken = append(taken, h)
		} else {
			kept = append(kept, h)
		}
	}
	for i := len(kept); i < len(q.buf); i++ {
		q.buf[i] = heldJob{}
	}
	q.buf = kept
	if len(q.buf) == 0 {
		q.buf = nil
	}
	return taken
}

// Messages of the releases of held jobs that never started.
const (
	msgReleasedAtShutdown = "released unfinished at shutdown"
	msgReleasedAfterCrash = "released unstarted: a job crashed in this process"
)

// releaseHeld hands the jobs claimed ahead of a slot back to available,
// charging nothing: they never started. It also stops buf from taking or
// feeding any more (the producer's last act, at shutdown).
func (q *queueRunner) releaseHeld(msg string) {
	q.mu.Lock()
	q.closed = true
	held := q.buf
	q.buf = nil
	q.mu.Unlock()
	q.handBack(held, msg)
}

// handBack hands held jobs taken out of buf back to available, charging
// nothing.
func (q *queueRunner) handBack(held []heldJob, msg string) {
	if len(held) == 0 {
		return
	}
	e := q.e
	rs := make([]*runState, 0, len(held))
	for _, h := range held {
		if h.r.abandoned.CompareAndSwap(false, true) {
			rs = append(rs, h.r)
		} else {
			// Its lease was lost meanwhile: nothing to hand back.
			e.running.remove(h.r.ref.ID)
		}
		e.suspects.dropped(h.r.suspect)
		h.r.cancel(nil)
	}
	e.releaseUnfinished(context.WithoutCancel(e.hardCtx), rs, msg)
}

// handlerResult is what one run of a handler came to.
type handlerResult struct {
	trigger backend.Trigger
	delay   time.Duration
	message string
	trace   string
	// before, when set, is the store time by which the outcome's write
	// must land (the reaper's crash charges).
	before time.Time
	// reason, when set, replaces the table row's terminal reason
	// (step_mismatch); checkpoint, when set, is written with the outcome
	// (step.go).
	reason     TerminalReason
	checkpoint json.RawMessage
	// err is what the handler returned (a panic as an error), for an
	// Interceptor; ref is the Interceptor's reference of the attempt,
	// kept with its error entry.
	err error
	ref string
	// wait is the wait a run ended in (TriggerWait, wait.go).
	wait *Wait
}

// execute runs one claimed job to its outcome and writes it.
func (e *Engine) execute(q *queueRunner, r *runState, j *Job) {
	defer r.cancel(nil)
	if r.abandoned.Load() {
		// Its lease was lost while it waited for a slot: the job is no
		// longer ours to run.
		e.suspects.dropped(r.suspect)
		e.running.remove(j.ID)
		return
	}
	var res handlerResult
	defer func() { e.suspects.done(r.suspect, res.trigger == backend.TriggerCrash) }()

	began := e.handlerStart()
	ctx, hook := e.attemptBegin(r.ctx, r, j)
	if hook.Done != nil && began.IsZero() {
		began = time.Now()
	}
	res = e.runHandler(ctx, r, j)
	res.ref = hook.Ref
	r.returned.Store(true)
	e.observeHandler(r, j, res.trigger, began)
	if r.abandoned.Load() {
		// Our lease is gone (or was handed back at shutdown): whatever
		// we would write is fenced out, so write nothing.
		e.running.remove(j.ID)
		attemptDone(hook, &res, "", false, true, time.Since(began))
		return
	}
	if res.trigger == backend.TriggerSuccess && r.acked.CompareAndSwap(false, true) {
		e.completer.add(r, q.retention(StateCompleted) == 0)
		attemptDone(hook, &res, StateCompleted, false, false, time.Since(began))
		return
	}
	defer e.running.remove(j.ID)
	to := e.finish(context.WithoutCancel(e.hardCtx), r.ref, j, res, e.cfg.WorkerID)
	signal(q.landedCh)
	attemptDone(hook, &res, to, to == StateArchived || to == StateQuarantined, false, time.Since(began))
}

// runHandler upcasts the payload, runs the handler under its timeout and
// deadline, and turns what happened into a trigger.
func (e *Engine) runHandler(ctx context.Context, r *runState, j *Job) (res handlerResult) {
	k := e.kind(j.Kind)
	if k == nil {
		return handlerResult{trigger: backend.TriggerUndecodable, message: fmt.Sprintf("no handler registered for kind %q", j.Kind)}
	}
	if j.SchemaVersion > k.Version {
		// The claim filters these out; a newer version here means the
		// filter and the kind disagree. Leave it for a newer worker.
		return handlerResult{trigger: backend.TriggerLeaseLost, message: "schema version newer than this worker"}
	}
	payload, err := upcast(k, j.SchemaVersion, j.Payload)
	if err != nil {
		return handlerResult{trigger: backend.TriggerUndecodable, message: err.Error()}
	}
	hj := j.Clone()
	hj.Payload = payload
	hj.SchemaVersion = k.Version
	ctx, wf, early := e.prepareWorkflow(ctx, r, j, k)
	if early != nil {
		return *early
	}
	defer wf.outcome(&res)

	timeout := j.Timeout
	if timeout <= 0 {
		timeout = k.Timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
		defer cancel()
	}
	if j.Deadline != nil {
		local := time.Now().Add(j.Deadline.Sub(e.clock.now()))
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, local, errJobDeadline)
		defer cancel()
	}

	if j.Deadline != nil && !e.clock.now().Before(*j.Deadline) {
		// It passed while the job waited for a slot: do not run it.
		return handlerResult{trigger: backend.TriggerDeadline, message: MessageDeadlineBeforeRun}
	}
	err, panicked, stack := callHandler(ctx, k.Handler, hj)
	if panicked {
		return handlerResult{trigger: backend.TriggerCrash, message: err.Error(), trace: stack, err: err}
	}
	defer func() { res.err = err }()
	trig, delay := outcome(err)
	if trig == backend.TriggerError {
		cause := context.Cause(ctx)
		if errors.Is(cause, errJobDeadline) || (j.Deadline != nil && !e.clock.now().Before(*j.Deadline)) {
			return handlerResult{trigger: backend.TriggerDeadline, message: fmt.Sprintf("deadline %s passed: %v", j.Deadline.UTC().Format(time.RFC3339Nano), err)}
		}
		if errors.Is(cause, errAttemptTimeout) {
			return handlerResult{trigger: backend.TriggerError, message: fmt.Sprintf("attempt timed out after %s: %v", timeout, err)}
		}
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return handlerResult{trigger: trig, delay: delay, message: msg}
}

// callHandler runs h, turning a panic into an error with its stack.
//
//lint:ignore ST1008 err is the handler's result; panicked and stack describe it.
func callHandler(ctx context.Context, h Handler, j *Job) (err error, panicked bool, stack string) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
			panicked = true
			stack = string(debug.Stack())
		}
	}()
	return h(ctx, j), false, ""
}

// upcast brings a payload from version v to the kind's current version.
func upcast(k *Kind, v int, payload []byte) ([]byte, error) {
	if v <= 0 {
		v = 1
	}
	out := payload
	for ; v < k.Version; v++ {
		up, ok := k.Upcasters[v]
		if !ok {
			return nil, fmt.Errorf("no upcaster from schema version %d of kind %q (current %d)", v, k.Name, k.Version)
		}
		next, err := up(out)
		if err != nil {
			return nil, fmt.Errorf("upcast %q from version %d: %w", k.Name, v, err)
		}
		out = next
	}
	return out, nil
}

func (q *queueRunner) retention(s State) time.Duration {
	if d, ok := q.cfg.Retention[s]; ok {
		return d
	}
	if d, ok := q.e.cfg.Retention[s]; ok {
		return d
	}
	return -1
}

// finish writes a non-success outcome through the transition table, then
// calls the death handlers if the job died. It returns the state written,
// empty when nothing was.
func (e *Engine) finish(ctx context.Context, ref backend.JobRef, j *Job, res handlerResult, actor string) State {
	return e.finishGuarded(ctx, ref, j, res, actor, false)
}

// finishReaped is finish for the reaper: the write holds only while the
// lease is still expired (and, for a crash, its worker still gone), so a
// worker that renewed or beat meanwhile keeps its job.
func (e *Engine) finishReaped(ctx context.Context, ref backend.JobRef, j *Job, res handlerResult) {
	e.finishGuarded(ctx, ref, j, res, "reaper:"+e.cfg.WorkerID, true)
}

func (e *Engine) finishGuarded(ctx context.Context, ref backend.JobRef, j *Job, res handlerResult, actor string, reaped bool) State {
	// The message and trace go into the store, a dead letter's payload and
	// the death handlers as every store can keep them (text.go).
	res.message, res.trace = sluicetype.StorableText(res.message), sluicetype.StorableText(res.trace)
	// A crash may be a poison pill's, and its write may quarantine the
	// fingerprint: hand this process's held jobs of it back first, with
	// claims stopped until the write lands, so that its hold catches them
	// as waiting jobs and no claim or slot of ours runs one next
	// (crashgate.go). The reaper's crash charges count alike.
	endGate := func() {}
	if res.trigger == backend.TriggerCrash && j.Fingerprint != "" {
		endGate = e.crashes.begin(j.Fingerprint)
		e.handBackHeld(j.Fingerprint)
	}
	defer endGate()
	probation := false
	if res.trigger == backend.TriggerCrash && j.Fingerprint != "" {
		var err error
		if probation, err = e.probationWithRetry(ctx, j.Fingerprint); err != nil {
			// Not knowing whether the job is on probation, nothing is
			// written: the lease expires and the reaper charges the crash,
			// reading the record again.
			if outage.StoreUnavailable(err) {
				e.outOutcome.Fail(err, "job", j.ID, "outcome", res.trigger)
			} else {
				e.log.Error("outcome not written", "job", j.ID, "outcome", res.trigger, "err", err)
			}
			return ""
		}
	}
	row, err := nextRow(j, res.trigger, e.cfg.CrashLimit, probation)
	if err != nil {
		e.log.Error("no transition", "job", j.ID, "err", err)
		return ""
	}
	j = e.withPayloadForDeath(ctx, j, row)
	p := e.finishPlan(ref, j, row, res, actor, reaped)
	if p.DeadLetter, err = e.deadLetterPlan(j, row, res.message, actor); err != nil {
		e.log.Error("dead letter not routed", "job", j.ID, "err", err)
	}
	written, err := e.finishWithRetry(ctx, p)
	endGate() // claims go on; the death handlers below may take a while
	if err != nil {
		switch {
		case errors.Is(err, ErrLeaseLost):
			e.log.Info("outcome refused: lease lost", "job", j.ID, "outcome", res.trigger)
		case outage.StoreUnavailable(err):
			// Every outcome meets an outage: one line for all of them
			// (the job stays leased until it expires, and the reaper
			// hands it out again).
			e.outOutcome.Fail(err, "job", j.ID, "outcome", res.trigger)
		default:
			e.log.Error("outcome not written", "job", j.ID, "outcome", res.trigger, "err", err)
		}
		return ""
	}
	e.outOutcome.Succeed()
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: row.To})
	e.observeTransition(j.Queue, j.Kind, j.State, row.To)
	if res.trigger == backend.TriggerWait {
		e.afterWait(ctx, written, res.wait)
	}
	if row.To.Terminal() || row.To == StateDeleted {
		e.childEnded(j.ID)
	}
	if written != nil && (row.To == StateArchived || row.To == StateQuarantined) {
		e.fireDeath(written, res.message, row.Reason)
	}
	return row.To
}

// finishPlan resolves a worker outcome (row of the table, for job j as
// claimed) into the write the store applies: every state, time, text,
// counter and fingerprint consequence is decided here.
func (e *Engine) finishPlan(ref backend.JobRef, j *Job, row backend.Transition, res handlerResult, actor string, reaped bool) *backend.JobFinishParams {
	p := &backend.JobFinishParams{
		JobRef: ref, To: row.To, Reason: row.Reason, Charge: row.Charge,
		IfLeaseExpired: reaped, IfWorkerGone: reaped && res.trigger == backend.TriggerCrash, IfBefore: res.before,
		Finalize: row.To.Terminal(),
		Counts:   []backend.CountDelta{{Queue: j.Queue, From: StateRunning, To: row.To, N: 1}},
	}
	if res.reason != "" {
		p.Reason = res.reason
	}
	if res.checkpoint != nil && row.To != StateDeleted {
		p.Checkpoint = &backend.CheckpointWrite{Checkpoint: res.checkpoint}
	}
	switch row.To {
	case StateAvailable:
		p.Schedule = backend.ScheduleNow
	case StateRetryable, StateScheduled:
		p.Schedule = backend.ScheduleAfter
	}
	var kind EventKind
	var entry *AttemptError
	switch res.trigger {
	case backend.TriggerError:
		kind = EventFailed
		entry = &AttemptError{Message: res.message, Trace: res.trace}
		if row.To == StateRetryable {
			k := e.kind(j.Kind)
			backoff := DefaultBackoff
			if k != nil && k.Backoff != nil {
				backoff = k.Backoff
			}
			p.Delay = backoff(j.Attempt + 1)
		} else {
			kind = EventArchived
		}
	case backend.TriggerCrash:
		kind = EventCrashed
		entry = &AttemptError{Crash: true, Message: res.message, Trace: res.trace}
		if row.To == StateRetryable {
			p.Delay = e.cfg.CrashBackoff(j.CrashAttempt + 1)
		} else {
			kind = EventQuarantined
		}
	case backend.TriggerSkip, backend.TriggerDeadline:
		kind = EventArchived
		entry = &AttemptError{Message: res.message}
	case backend.TriggerSnooze:
		kind = EventSnoozed
		p.Delay = res.delay
	case backend.TriggerWait:
		kind = EventWaiting
		p.Delay = res.delay
	case backend.TriggerUndecodable:
		kind = EventUndecodable
		entry = &AttemptError{Message: res.message}
	case backend.TriggerLeaseLost:
		kind = EventLeaseLost
	case backend.TriggerShutdown:
		kind = EventShutdown
	}
	if row.To == StateDeleted {
		return p
	}
	// The run that just ended, numbered by its claim: the fence grows by
	// one on every claim, so crashes (which spend no attempt) and
	// failures are numbered alike, #1, #2, ...
	run := int(ref.Fence)
	if run <= 0 {
		run = j.Attempt + 1
	}
	if entry != nil {
		entry.Attempt = run
		entry.Ref = res.ref
		if j.AttemptedAt != nil {
			started := *j.AttemptedAt
			entry.Started = &started
		}
		// The entry says who ran the attempt: its lease's worker, also
		// when the reaper writes it (the reaper is the event's actor).
		entry.Worker = actor
		if j.Lease != nil && j.Lease.WorkerID != "" {
			entry.Worker = j.Lease.WorkerID
		}
		p.Error = &backend.ErrorWrite{Entry: *entry, Keep: MaxKeptErrors, LastError: entry.Message, Pattern: NormalizeError(entry.Message)}
	}
	if kind != "" {
		p.Event = &backend.EventWrite{Kind: kind, Actor: actor, From: StateRunning, To: row.To, Attempt: run, Message: res.message}
	}
	if j.Fingerprint != "" && (row.Quarantine || row.Charge == backend.ChargeCrash) {
		fw := &backend.FingerprintWrite{
			Fingerprint: j.Fingerprint, Kind: j.Kind,
			Quarantine: row.Quarantine,
			LastError:  res.message, LastJobID: j.ID,
		}
		if row.Charge == backend.ChargeCrash {
			fw.AddCrashes = 1
			fw.StepCrash = crashedStep(res.checkpoint)
		}
		if row.Quarantine {
			fw.Hold = &backend.HoldWrite{
				From: e.holdRow.From, To: e.holdRow.To, Reason: e.holdRow.Reason,
				Event: backend.EventWrite{Kind: EventHeld, Actor: actor, Message: "fingerprint quarantined"},
			}
		}
		p.Fingerprint = fw
	}
	return p
}

// onProbation reports whether a crash of a job whose fingerprint has
// quarantine record rec quarantines at once, whatever the job's own count:
// the fingerprint was released and is on probation, or it is still
// quarantined, and the job runs only because an operator released it
// alone (or it was running when the quarantine came), with its crash
// counter reset.
func onProbation(rec *Fingerprint) bool {
	return rec != nil && (rec.Status == FingerprintProbation || rec.Status == FingerprintQuarantined)
}

// probationWithRetry reads whether a crash of a job of fingerprint fp
// quarantines at once (onProbation), retrying while the store is away as
// finishWithRetry does. A failed read taken for "no record" would charge
// a released pill's crash as an ordinary one and let it run, and kill a
// worker, again.
func (e *Engine) probationWithRetry(ctx context.Context, fp string) (bool, error) {
	wait := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		rec, err := e.store.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
		switch {
		case err == nil:
			return onProbation(rec), nil
		case errors.Is(err, ErrNotFound):
			return false, nil
		case attempt >= 8:
			e.contact.fail()
			return false, fmt.Errorf("read the quarantine record of fingerprint %s: %w", fp, err)
		}
		e.contact.fail()
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("read the quarantine record of fingerprint %s: %w", fp, err)
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// nextRow consults the table; a fingerprint on probation (onProbation)
// quarantines at its next crash whatever the job's own count.
func nextRow(j *Job, t backend.Trigger, crashLimit int, probation bool) (backend.Transition, error) {
	if probation && t == backend.TriggerCrash {
		crashLimit = 1
	}
	return backend.Next(j, t, crashLimit)
}

// finishWithRetry writes a transition, retrying while the store is down.
// A lease lost meanwhile ends the retries: the reaper has the job.
func (e *Engine) finishWithRetry(ctx context.Context, p *backend.JobFinishParams) (*Job, error) {
	wait := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		j, err := e.store.JobFinish(ctx, p)
		if err == nil || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) || attempt >= 8 {
			if err != nil && !errors.Is(err, ErrLeaseLost) {
				e.contact.fail()
			}
			return j, err
		}
		e.contact.fail()
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// fireDeath calls each death handler in registration order on its own deep
// copy. A handler that panics is logged; one that blocks past a bound is
// left behind so the worker goes on.
func (e *Engine) fireDeath(j *Job, msg string, reason TerminalReason) {
	e.mu.RLock()
	hs := append([]DeathHandler(nil), e.dead...)
	e.mu.RUnlock()
	for _, h := range hs {
		ev := DeathEvent{Job: j.Clone(), Error: msg, Reason: reason}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(e.hardCtx), deathHandlerBound)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if p := recover(); p != nil {
					e.log.Error("death handler panicked", "job", j.ID, "panic", p)
				}
			}()
			h(ctx, ev)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			e.log.Warn("death handler still running after its bound; moving on", "job", j.ID)
		}
		cancel()
	}
}

// deathHandlerBound is how long a worker waits for one death handler.
const deathHandlerBound = 5 * time.Second
