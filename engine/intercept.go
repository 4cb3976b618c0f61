package engine

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/backend"
)

// Interceptor is let in around what the engine does at its seams, for
// tracing: every enqueue, every handler run (attempt), every workflow step
// and every operator action. Set it as Config.Interceptor; nil (the
// default) costs nothing. Package sluiceotel is one, for OpenTelemetry; the
// engine itself knows no tracing library.
//
// Unlike an Observer, an interceptor runs inline and may change what goes
// on: it may add to a job's metadata before it is written (a W3C trace
// context, say) and wrap the context a handler, a step or an action runs
// with. It cannot change an outcome. Its methods are called on many
// goroutines at once and must be safe for concurrent use; what they return
// must be cheap, since it is on every job's path.
type Interceptor interface {
	// InterceptEnqueue wraps one EnqueueMany (and so Enqueue) call. It
	// may change jobs before it passes them to next (a job's Metadata,
	// which must stay a JSON object), and must return what next returned.
	InterceptEnqueue(ctx context.Context, jobs []EnqueueParams, next EnqueueFunc) ([]EnqueueResult, error)
	// InterceptAttempt is called as a claimed job's handler is about to
	// run. The context it returns is the handler's; the hook it returns
	// says how the attempt is remembered and is told how it ended.
	InterceptAttempt(ctx context.Context, a AttemptInfo) (context.Context, AttemptHook)
	// InterceptStep is called as a workflow step (Step) begins, also for
	// a step whose stored result is returned without running it
	// (StepInfo.Replayed). The context it returns is the step function's;
	// done is called once with the step's error (nil on success).
	InterceptStep(ctx context.Context, s StepInfo) (context.Context, func(err error))
	// InterceptAction is called as an operator action of Control begins
	// (ActionInfo.Name lists them); done is called once with its error.
	InterceptAction(ctx context.Context, a ActionInfo) (context.Context, func(err error))
}

// EnqueueFunc writes jobs: the rest of an EnqueueMany call, as an
// Interceptor is handed it.
type EnqueueFunc func(ctx context.Context, jobs []EnqueueParams) ([]EnqueueResult, error)

// AttemptInfo is the attempt an Interceptor is told of.
type AttemptInfo struct {
	// Job is the job as claimed. It is shared: read it, never change it.
	Job *Job
	// Run numbers the job's runs (its fence): crashes, failures and
	// waits each take one.
	Run int64
	// Previous is the Ref of the latest failed, crashed or dead attempt of
	// this job (its last error entry) or, for a job that has not failed
	// yet and was made from another one's death — replayed from a step
	// (ReplayFromStep) or routed to a dead-letter kind — of the
	// original's; empty when there is none or it had no Ref. A job
	// retried after its death is handed the Ref of the attempt that died.
	Previous string
}

// AttemptHook is what an Interceptor wants of one attempt.
type AttemptHook struct {
	// Ref, when not empty, is kept with the attempt's error entry
	// (AttemptError.Ref) if it fails, crashes or dies, and handed back as
	// AttemptInfo.Previous to the job's next run: sluiceotel keeps the
	// attempt span's W3C traceparent there, so a retry links to it.
	Ref string
	// Done, when set, is called once when the attempt has ended and its
	// outcome is known.
	Done func(AttemptResult)
}

// AttemptResult is how an attempt ended.
type AttemptResult struct {
	// Outcome is as Observer.HandlerDone reports it: "success", "error",
	// "crash", "skip", "snooze", "wait", "revoke", "deadline",
	// "undecodable", "lease_lost", or "abandoned" (the result was dropped:
	// lease lost or shutdown).
	Outcome string
	// Err is what the handler returned (a panic as an error); nil on
	// success and where the handler did not run.
	Err error
	// Message is the text written with the outcome (the error entry's).
	Message string
	// State is the state the outcome's write put the job in; empty when
	// nothing was written (abandoned, or the write failed). A success is
	// StateCompleted as it is handed to the batched acknowledgement.
	State State
	// Dead is set when the write killed the job: archived with its
	// attempts spent or for good, or quarantined (a death handler's
	// death; a dead-letter route, when set, was applied with it).
	Dead bool
	// Duration is how long the handler ran.
	Duration time.Duration
}

// StepInfo is the workflow step an Interceptor is told of.
type StepInfo struct {
	JobID string
	Kind  string
	// Name is the step's name, Position its 1-based place in the handler.
	Name     string
	Position int
	// Replayed is set when the step is not run: its result was recorded
	// by an earlier run and is returned as it stands.
	Replayed bool
}

// ActionInfo is the operator action an Interceptor is told of.
type ActionInfo struct {
	// Name is the action: "retry", "cancel", "delete", "release" (one
	// quarantined job), "release_fingerprint", "patch" (UpdatePayload),
	// "retry_with_input", "replay" (ReplayFromStep), "apply" (Apply:
	// Action says which), "bulk" (Bulk: Action says which), "pause" and
	// "resume" (a queue), "cancel_operation", "resume_operation", "set_limit" (Limit says
	// which and its new value), "resolve_error_group",
	// "ignore_error_group" and "unignore_error_group" (ErrorGroup says
	// which), "pause_schedule", "resume_schedule" and "trigger_schedule"
	// (Schedule says which), "signal" (JobID and Signal), "enqueue" (an
	// enqueue through an operator surface, POST /jobs: IDs how many).
	Name string
	// Action is the action Apply or Bulk applies.
	Action Action
	// Actor is who asked, as the events record it (ActorFrom).
	Actor string
	// JobID is the job acted on, when one; Fingerprint the fingerprint
	// released; IDs how many jobs Apply was given; Queue the queue paused
	// or resumed; Operation the operation cancelled.
	JobID       string
	Fingerprint string
	IDs         int
	Queue       string
	Operation   string
	// Selector is a bulk action's selector, as the query language writes
	// it; DryRun says it only previewed.
	Selector string
	DryRun   bool
	// Limit is the limit SetLimit sets (Concurrency 0: removes).
	Limit *Limit
	// ErrorGroup is the id of the error group resolved, ignored or
	// un-ignored.
	ErrorGroup string
	// Schedule is the schedule paused, resumed or run now; Signal the
	// name of the signal sent to JobID.
	Schedule string
	Signal   string
}

// attemptBegin tells the interceptor a handler run begins.
func (e *Engine) attemptBegin(ctx context.Context, r *runState, j *Job) (context.Context, AttemptHook) {
	ic := e.cfg.Interceptor
	if ic == nil {
		return ctx, AttemptHook{}
	}
	prev := previousRef(j)
	if prev == "" && len(j.Errors) == 0 && j.DeadLetterOf != "" {
		// A dead letter's first runs point at the attempt that killed
		// its original: one read, for dead letters only.
		if orig, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: j.DeadLetterOf}); err == nil {
			prev = previousRef(orig)
		}
	}
	return ic.InterceptAttempt(ctx, AttemptInfo{Job: j, Run: r.ref.Fence, Previous: prev})
}

// previousRef is the Ref of the job's latest failed attempt, or of the
// original's for a replay that has not failed yet.
func previousRef(j *Job) string {
	if n := len(j.Errors); n > 0 {
		return j.Errors[n-1].Ref
	}
	if len(j.Checkpoint) == 0 {
		return ""
	}
	cp, err := ParseCheckpoint(j.Checkpoint)
	if err != nil || cp.ForkedFrom == nil {
		return ""
	}
	return cp.ForkedFrom.Ref
}

// attemptDone tells the interceptor how an attempt ended.
func attemptDone(h AttemptHook, res *handlerResult, to State, dead bool, abandoned bool, took time.Duration) {
	if h.Done == nil {
		return
	}
	out := AttemptResult{Outcome: string(res.trigger), Err: res.err, Message: res.message, State: to, Dead: dead, Duration: took}
	if abandoned {
		out.Outcome, out.State, out.Dead = OutcomeAbandoned, "", false
	}
	h.Done(out)
}

// stepBegin tells the interceptor a step begins; done is never nil.
func (wf *workflow) stepBegin(ctx context.Context, name string, pos int, replayed bool) (context.Context, func(error)) {
	ic := wf.e.cfg.Interceptor
	if ic == nil {
		return ctx, func(error) {}
	}
	return ic.InterceptStep(ctx, StepInfo{JobID: wf.jobID, Kind: wf.kind, Name: name, Position: pos + 1, Replayed: replayed})
}

// intercepted runs an operator action inside the interceptor's
// InterceptAction.
//
// It also records the action in the audit trail (audit.go): the record
// rides with the action's store write, or is appended after it when no
// write carried it or the action failed.
func intercepted[T any](ctx context.Context, e *Engine, a ActionInfo, fn func(context.Context) (T, error)) (T, error) {
	ctx, plan := e.auditBegin(ctx, a)
	ic := e.cfg.Interceptor
	if ic == nil {
		v, err := fn(ctx)
		e.auditEnd(ctx, plan, err)
		return v, err
	}
	a.Actor = ActorFrom(ctx)
	ctx, done := ic.InterceptAction(ctx, a)
	v, err := fn(ctx)
	done(err)
	e.auditEnd(ctx, plan, err)
	return v, err
}
