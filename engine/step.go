package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Durable workflows: a handler made of steps.
//
// Step runs a piece of a handler once per job and records its JSON result
// on the job (its checkpoint) under the job's lease before the handler
// goes on. When the job runs again — a retry, a redrive, the recovery
// from a crash — the handler runs from the top and every step already
// recorded returns its stored result without running. Steps are matched by
// position and name; the lease fence is verified by each step's write, so
// a worker that lost its lease stops at the next step boundary and its
// result is not recorded.

const (
	// StepCompleted: the step's result is recorded; it is not run again.
	StepCompleted StepState = "completed"
	// StepFailed: the step returned an error on its last run.
	StepFailed StepState = "failed"
	// StepCrashed: the job crashed (a panic, or its process died) while the
	// step ran.
	StepCrashed StepState = "crashed"
)

// StepUpgrader maps the steps recorded by step-set version v to those of
// version v+1: a kind declares one when it changes its steps, so that jobs
// recorded by the old code replay correctly under the new. Dropping a step
// (and the ones after it) makes them run again.
type StepUpgrader func(steps []StepRecord) ([]StepRecord, error)

// ErrStepOutsideJob is Step's error when its context is not a handler's.
var ErrStepOutsideJob = errors.New("engine.Step called outside a job handler")

// errStepMismatch is the cause of a step_mismatch: the handler's n-th step
// is not the n-th recorded one.
var errStepMismatch = errors.New("step mismatch")

// workflowKey carries a running job's *workflow in its handler's context.
type workflowKey struct{}

// workflow is one run of one job's handler, as its steps see it.
type workflow struct {
	e     *Engine
	r     *runState
	jobID string
	kind  string

	mu sync.Mutex
	cp Checkpoint
	// pos is the position of the next step the handler asks for.
	pos int
	// running is the step being run (-1: none), for crash accounting.
	running int
	// dirty says cp holds a change not yet written (a failed step), for
	// the finish write.
	dirty bool
	// mismatch, when set, turns the run into undecodable whatever the
	// handler returns.
	mismatch string
	// kindVersion is the step-set version this code declares.
	kindVersion int
	// waiting, once a wait has begun, turns the run into that wait
	// (wait.go).
	waiting *Wait
}

// prepareWorkflow decodes the job's checkpoint for its handler and brings
// it to the kind's step-set version. It reports a result to write at once,
// without running the handler, when the job cannot run here.
func (e *Engine) prepareWorkflow(ctx context.Context, r *runState, j *Job, k *Kind) (context.Context, *workflow, *handlerResult) {
	cp, err := ParseCheckpoint(j.Checkpoint)
	if err != nil {
		return ctx, nil, &handlerResult{trigger: backend.TriggerUndecodable, message: err.Error()}
	}
	have := max(cp.Version, 1)
	want := max(k.StepVersion, 1)
	if have > want {
		// Recorded by newer code: leave the job for a newer worker, without
		// charging it, and not at once, so that this worker does not claim
		// it again and again.
		return ctx, nil, &handlerResult{trigger: backend.TriggerSnooze, delay: e.cfg.PollInterval,
			message: fmt.Sprintf("step set version %d is newer than this worker's %d: left for a newer worker", have, want)}
	}
	for v := have; v < want && len(cp.Steps) > 0; v++ {
		up, ok := k.StepUpgraders[v]
		if !ok {
			// No mapping declared: the steps are matched as they are.
			continue
		}
		steps, err := up(append([]StepRecord(nil), cp.Steps...))
		if err != nil {
			return ctx, nil, &handlerResult{trigger: backend.TriggerUndecodable, reason: ReasonStepMismatch,
				message: fmt.Sprintf("upgrade steps of kind %q from version %d: %v", k.Name, v, err)}
		}
		cp.Steps = steps
	}
	cp.Version = want
	wf := &workflow{e: e, r: r, jobID: j.ID, kind: j.Kind, cp: cp, running: -1, kindVersion: want}
	return context.WithValue(ctx, workflowKey{}, wf), wf, nil
}

// Step runs fn once per job and records its result; see the file comment.
// Inside a handler of the engine it returns the stored result of a step
// already completed at this position, runs fn otherwise and writes its
// JSON result on the job under the lease before returning it. An error of
// fn is returned as it is (the handler decides), and recorded with the
// job's outcome. When the step at this position was recorded under
// another name, Step returns an error and the job becomes undecodable
// (reason step_mismatch), whatever the handler returns. When the lease is
// lost, Step returns an error wrapping ErrLeaseLost and records nothing.
//
// A handler calls its steps one after another, from its own goroutine:
// positions are what match a run's steps to the recorded ones.
func Step[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	wf, _ := ctx.Value(workflowKey{}).(*workflow)
	if wf == nil {
		return zero, fmt.Errorf("step %q: %w", name, ErrStepOutsideJob)
	}
	rec, replay, err := wf.begin(name)
	if err != nil {
		return zero, err
	}
	ctx, done := wf.stepBegin(ctx, name, rec.pos, replay)
	if replay {
		var v T
		if err := json.Unmarshal(rec.Result, &v); err != nil {
			err = wf.mismatched(fmt.Sprintf("step %d %q: stored result does not decode: %v", rec.pos+1, name, err))
			done(err)
			return zero, err
		}
		done(nil)
		return v, nil
	}
	defer func() {
		// A panic in the step ends it too (the handler's run turns it
		// into a crash).
		if p := recover(); p != nil {
			done(fmt.Errorf("panic: %v", p))
			panic(p)
		}
	}()
	v, err := runStep(ctx, wf, rec.pos, name, fn)
	done(err)
	return v, err
}

// runStep runs a step's function and records its result.
func runStep[T any](ctx context.Context, wf *workflow, pos int, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	rec := stepAt{pos: pos}
	began := time.Now()
	v, ferr := fn(ctx)
	took := time.Since(began)
	if ferr != nil {
		wf.failed(rec.pos, ferr, took)
		return v, ferr
	}
	res, err := json.Marshal(v)
	if err == nil {
		// A result the stores cannot keep fails the step, as its own
		// error would, rather than the checkpoint write after it.
		err = sluicetype.CheckStorableJSON("result", res)
	}
	if err != nil {
		err = fmt.Errorf("step %d %q: encode result: %w", rec.pos+1, name, err)
		wf.failed(rec.pos, err, took)
		return zero, err
	}
	if err := wf.complete(ctx, rec.pos, res, took); err != nil {
		return zero, err
	}
	return v, nil
}

// stepAt is a step as begin hands it to Step.
type stepAt struct {
	pos    int
	Result json.RawMessage
}

// begin matches the handler's next step against the checkpoint. It
// reports the stored result when the step is completed, and otherwise
// marks it running.
func (wf *workflow) begin(name string) (stepAt, bool, error) {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	// The boundary: a run whose lease is gone, or that began a wait, goes
	// no further.
	if err := wf.blockedLocked(name); err != nil {
		return stepAt{}, false, err
	}
	pos := wf.pos
	wf.pos++
	if pos < len(wf.cp.Steps) {
		rec := &wf.cp.Steps[pos]
		if rec.State == StepCompleted {
			if rec.Name != name {
				wf.mismatch = fmt.Sprintf("step %d is %q in the handler but %q in the checkpoint", pos+1, name, rec.Name)
				return stepAt{}, false, Undecodable(fmt.Errorf("%w: %s", errStepMismatch, wf.mismatch))
			}
			return stepAt{pos: pos, Result: rec.Result}, true, nil
		}
		// A step that failed or crashed runs again, under the name the
		// handler gives it now; its counts stay.
		rec.Name = name
		wf.cp.Steps = wf.cp.Steps[:pos+1]
	} else {
		wf.cp.Steps = append(wf.cp.Steps, StepRecord{Name: name})
	}
	rec := &wf.cp.Steps[pos]
	rec.State = StepCrashed // until it ends: what a crash finds
	rec.Attempts++
	rec.Error = ""
	rec.StartedAt = wf.e.clock.now()
	rec.Duration = 0
	wf.running = pos
	return stepAt{pos: pos}, false, nil
}

// mismatched makes the run undecodable.
func (wf *workflow) mismatched(why string) error {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	wf.running = -1
	wf.mismatch = why
	return Undecodable(fmt.Errorf("%w: %s", errStepMismatch, why))
}

// failed records a step's error, to be written with the job's outcome.
func (wf *workflow) failed(pos int, err error, took time.Duration) {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	rec := &wf.cp.Steps[pos]
	rec.State = StepFailed
	rec.Error = err.Error()
	rec.Duration = took
	wf.running = -1
	wf.dirty = true
}

// complete writes the step's result under the lease: the step boundary.
func (wf *workflow) complete(ctx context.Context, pos int, result json.RawMessage, took time.Duration) error {
	wf.mu.Lock()
	rec := &wf.cp.Steps[pos]
	rec.State = StepCompleted
	rec.Result = result
	rec.Duration = took
	rec.Error = ""
	wf.running = -1
	raw, err := wf.cp.Encode()
	name := rec.Name
	wf.mu.Unlock()
	if err != nil {
		return err
	}
	if wf.r == nil {
		return nil
	}
	// The write must land even when the handler's context is cancelled
	// right after the step: the step's work is done.
	err = wf.e.checkpoints.write(context.WithoutCancel(ctx), wf.r.ref, raw)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			wf.r.lost()
		}
		wf.mu.Lock()
		// Not recorded: what a later write of this run says must not
		// claim it was.
		wf.cp.Steps[pos].State = StepFailed
		wf.cp.Steps[pos].Result = nil
		wf.cp.Steps[pos].Error = err.Error()
		wf.dirty = true
		wf.mu.Unlock()
		return fmt.Errorf("step %d %q of job %s: record result: %w", pos+1, name, wf.jobID, err)
	}
	return nil
}

// outcome adjusts a handler's result for its steps: a mismatch makes it
// undecodable, a panic inside a step counts as that step's crash, and a
// step's error rides on the outcome's write.
func (wf *workflow) outcome(res *handlerResult) {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if wf.mismatch != "" {
		res.trigger = backend.TriggerUndecodable
		res.reason = ReasonStepMismatch
		res.message = "step mismatch: " + wf.mismatch
		res.trace = ""
	}
	wf.waitOutcomeLocked(res)
	if res.trigger == backend.TriggerCrash && wf.running >= 0 {
		rec := &wf.cp.Steps[wf.running]
		rec.State = StepCrashed
		rec.Crashes++
		rec.Error = res.message
		wf.dirty = true
	}
	if !wf.dirty || res.trigger == backend.TriggerSuccess {
		return
	}
	if raw, err := wf.cp.Encode(); err == nil {
		res.checkpoint = raw
	}
}

// crashedStepCheckpoint is the checkpoint the reaper writes with a crash
// charge: the step the dead process was running (the one after the last
// completed) gets the crash. Its name is not known when the process died
// before anything recorded the step; the next run names it.
func crashedStepCheckpoint(j *Job, message string) json.RawMessage {
	if len(j.Checkpoint) == 0 {
		return nil
	}
	cp, err := ParseCheckpoint(j.Checkpoint)
	if err != nil {
		return nil
	}
	pos := 0
	for pos < len(cp.Steps) && cp.Steps[pos].State == StepCompleted {
		pos++
	}
	if pos == len(cp.Steps) {
		cp.Steps = append(cp.Steps, StepRecord{})
	} else {
		cp.Steps = cp.Steps[:pos+1]
	}
	rec := &cp.Steps[pos]
	rec.State = StepCrashed
	rec.Crashes++
	rec.Error = message
	raw, err := cp.Encode()
	if err != nil {
		return nil
	}
	return raw
}

// StepCrashes sums the crashes per step name over jobs (those of one
// fingerprint): the crash count per (fingerprint, step). A step whose
// name is not known yet is counted under "#n", its 1-based position.
func StepCrashes(jobs []*Job) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		cp, err := ParseCheckpoint(j.Checkpoint)
		if err != nil {
			continue
		}
		for i, s := range cp.Steps {
			if s.Crashes == 0 {
				continue
			}
			name := s.Name
			if name == "" {
				name = fmt.Sprintf("#%d", i+1)
			}
			out[name] += s.Crashes
		}
	}
	return out
}
