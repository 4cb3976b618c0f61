package engine

import (
	"time"

	"github.com/sluicehq/sluice/backend"
)

// Observer is told what this engine's workers do, for metrics. Set it as
// Config.Observer; nil (the default) costs nothing.
//
// Its methods are called on the workers' goroutines, many at once, after
// the fact: they must be safe for concurrent use, return quickly and never
// block. The engine reads nothing back, so an observer cannot change an
// outcome.
type Observer interface {
	// JobTransition reports a state change this process wrote and the
	// store accepted: claims (available → running), claims past a
	// deadline (available → archived), worker outcomes (running →
	// completed, retryable, archived, scheduled, undecodable, quarantined,
	// available, deleted), the reaper's outcomes for dead processes' jobs,
	// and releases at shutdown. Successes are reported as running →
	// completed even where a zero retention deletes the row at once.
	// Operator actions and the scheduler's due → available moves are not
	// reported.
	JobTransition(queue, kind string, from, to State)
	// HandlerDone reports a handler run: how long it took and what it
	// came to. outcome is the trigger it produced ("success", "error"
	// (returned error or attempt timeout), "crash" (panic), "skip",
	// "snooze", "revoke", "deadline", "undecodable"), "lease_lost" when
	// the job was not for this worker, or "abandoned" when the result was
	// dropped because the lease was lost or the engine shut down first.
	HandlerDone(queue, kind, outcome string, d time.Duration)
}

// OutcomeAbandoned is HandlerDone's outcome for a run whose result was
// dropped: its lease was lost, or it was handed back at shutdown.
const OutcomeAbandoned = "abandoned"

// handlerStart is when a handler run starts, read only when someone
// observes it.
func (e *Engine) handlerStart() time.Time {
	if e.cfg.Observer == nil {
		return time.Time{}
	}
	return time.Now()
}

// observeHandler reports a handler run that began at began.
func (e *Engine) observeHandler(r *runState, j *Job, t backend.Trigger, began time.Time) {
	if e.cfg.Observer != nil {
		e.reportHandler(r, j, t, began)
	}
}

func (e *Engine) reportHandler(r *runState, j *Job, t backend.Trigger, began time.Time) {
	o := e.cfg.Observer
	outcome := string(t)
	if r.abandoned.Load() {
		outcome = OutcomeAbandoned
	}
	o.HandlerDone(j.Queue, j.Kind, outcome, time.Since(began))
}

// observeClaim reports the jobs a claim took and those it archived for
// their passed deadline.
func (e *Engine) observeClaim(res *backend.JobClaimResult) {
	if e.cfg.Observer != nil {
		e.reportClaim(res)
	}
}

func (e *Engine) reportClaim(res *backend.JobClaimResult) {
	o := e.cfg.Observer
	for _, j := range res.Jobs {
		o.JobTransition(j.Queue, j.Kind, StateAvailable, StateRunning)
	}
	for _, j := range res.Dead {
		o.JobTransition(j.Queue, j.Kind, StateAvailable, StateArchived)
	}
}

// observeTransition reports one written transition.
func (e *Engine) observeTransition(queue, kind string, from, to State) {
	if o := e.cfg.Observer; o != nil {
		o.JobTransition(queue, kind, from, to)
	}
}

// observeCompleted reports the successes of a written batch; errs holds
// each item's result.
func (e *Engine) observeCompleted(batch []completion, errs []error) {
	if e.cfg.Observer != nil {
		e.reportCompleted(batch, errs)
	}
}

func (e *Engine) reportCompleted(batch []completion, errs []error) {
	o := e.cfg.Observer
	for i, cm := range batch {
		if i < len(errs) && errs[i] == nil {
			o.JobTransition(cm.r.queue, cm.r.kind, StateRunning, StateCompleted)
		}
	}
}
