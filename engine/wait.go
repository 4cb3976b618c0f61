package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
)

// Workflows that wait: durable timers (Sleep, SleepUntil), signals
// (WaitSignal, Control.Signal) and children (Spawn, WaitAll).
//
// A wait is a step: it has a name and a position, and once it is over its
// result is recorded like any step's, so a replay returns at once. While
// it is not over, the call returns a *WaitingError; the handler returns it
// (or anything: the run ends as a wait whatever it returns), and the
// worker writes the transition of the table's TriggerWait row — running →
// scheduled, no attempt spent, the lease given up — with the checkpoint,
// which records what the job waits for (Checkpoint.Wait). The job then
// holds no worker slot and no lease until it is due again:
//   - a sleep's end and a signal's timeout are its scheduled_at, and the
//     ordinary due path (JobScheduleDue) makes it available;
//   - a signal sent to a waiting job wakes it at once (TriggerSignal):
//     Control.Signal buffers the signal, then wakes the job if it waits
//     for that name; the worker, after writing a signal wait, wakes the
//     job itself if a signal came meanwhile. One of the two always sees
//     the other's write (each writes before it reads), and the wake is
//     fenced on the job's state and fence, so a second wake is a no-op;
//   - the last child to end wakes its parent (TriggerChildren): the
//     engine that writes a child's terminal outcome checks the parent's
//     children once that write has committed. A parent also re-checks
//     on its own every childrenRecheck, so a wake lost with a process
//     that died right after its child's commit only delays the parent.
//
// Running again, the handler replays its completed steps and reaches the
// wait, which now finds its time passed, its signal buffered (taken in
// the same write that records it: exactly once) or its children done.

// EventWaiting is the timeline entry of a run that ended in a wait;
// EventWoken is that of a wait ended by a signal or by its children.
const (
	EventWaiting EventKind = "waiting"
	EventWoken   EventKind = "woken"
)

// childrenRecheck is how often a parent waiting for its children looks
// at them on its own: the backstop for a wake lost with a process that
// died between its child's commit and the check after it. Rare, so long:
// each re-check claims the parent and reads every child.
const childrenRecheck = 10 * time.Minute

// foreverWait stands for a signal wait without a timeout.
const foreverWait = 100 * 365 * 24 * time.Hour

// ErrWaiting is matched by the error a wait returns while it is not over.
var ErrWaiting = errors.New("job waits")

// WaitingError unwinds the handler: return it (the run ends as a wait
// whatever the handler returns, once a wait has begun).
type WaitingError struct{ Wait Wait }

func (e *WaitingError) Error() string { return "waiting: " + e.Wait.Describe() }
func (e *WaitingError) Unwrap() error { return ErrWaiting }

// ErrWaitTimeout is matched by a signal wait's timeout.
var ErrWaitTimeout = errors.New("wait timed out")

// WaitTimeoutError is what WaitSignal returns when its timeout passed
// first; the handler may handle it like any error.
type WaitTimeoutError struct {
	Signal  string
	Timeout time.Duration
}

func (e *WaitTimeoutError) Error() string {
	return fmt.Sprintf("signal %q: %v after %s", e.Signal, ErrWaitTimeout, e.Timeout)
}
func (e *WaitTimeoutError) Unwrap() error { return ErrWaitTimeout }

// ErrChildrenDied is matched by WaitAll's error when children died.
var ErrChildrenDied = errors.New("children died")

// ChildrenError names the children that did not complete.
type ChildrenError struct {
	Step string
	Died []string
}

func (e *ChildrenError) Error() string {
	return fmt.Sprintf("wait %q: %d %v: %s", e.Step, len(e.Died), ErrChildrenDied, strings.Join(e.Died, ", "))
}
func (e *ChildrenError) Unwrap() error { return ErrChildrenDied }

// ChildResult is one child as WaitAll found it ended.
type ChildResult struct {
	ID     string         `json:"id"`
	State  State          `json:"state"`
	Reason TerminalReason `json:"reason,omitempty"`
	// Error is the child's last error, when it died.
	Error string `json:"error,omitempty"`
	// Result is a workflow child's last completed step result.
	Result json.RawMessage `json:"result,omitempty"`
}

// Died reports whether the child ended without completing. A child gone
// (deleted by its retention) counts as completed.
func (c ChildResult) Died() bool { return c.State != StateCompleted && c.State != StateDeleted }

// waitResult is a wait step's recorded result.
type waitResult struct {
	Until    time.Time       `json:"until,omitzero"`
	Timeout  bool            `json:"timeout,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Children []ChildResult   `json:"children,omitempty"`
}

// waitAt is where a wait call stands in the checkpoint.
type waitAt struct {
	pos int
	// done: the step was completed earlier; result is its record.
	done   bool
	result json.RawMessage
	// prior is the wait recorded by an earlier run, nil for a new one.
	prior *Wait
}

// beginWait matches a wait call against the checkpoint, as begin does for
// a step.
func (wf *workflow) beginWait(name string) (waitAt, error) {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if err := wf.blockedLocked(name); err != nil {
		return waitAt{}, err
	}
	pos := wf.pos
	wf.pos++
	if pos < len(wf.cp.Steps) {
		rec := &wf.cp.Steps[pos]
		if rec.State == StepCompleted || rec.State == StepWaiting {
			if rec.Name != name {
				wf.mismatch = fmt.Sprintf("step %d is %q in the handler but %q in the checkpoint", pos+1, name, rec.Name)
				return waitAt{}, Undecodable(fmt.Errorf("%w: %s", errStepMismatch, wf.mismatch))
			}
			if rec.State == StepCompleted {
				return waitAt{pos: pos, done: true, result: rec.Result}, nil
			}
			at := waitAt{pos: pos}
			if w := wf.cp.Wait; w != nil && w.Step == pos+1 {
				c := *w
				at.prior = &c
			}
			return at, nil
		}
		rec.Name = name
		wf.cp.Steps = wf.cp.Steps[:pos+1]
	} else {
		wf.cp.Steps = append(wf.cp.Steps, StepRecord{Name: name})
	}
	rec := &wf.cp.Steps[pos]
	rec.State = StepWaiting
	rec.Attempts++
	rec.Error = ""
	rec.StartedAt = wf.e.clock.now()
	return waitAt{pos: pos}, nil
}

// blockedLocked refuses a step after a mismatch, a lost lease or a wait
// that has begun.
func (wf *workflow) blockedLocked(name string) error {
	if wf.mismatch != "" {
		return Undecodable(fmt.Errorf("%w: %s", errStepMismatch, wf.mismatch))
	}
	if wf.r != nil && wf.r.abandoned.Load() {
		return fmt.Errorf("step %q of job %s: %w", name, wf.jobID, ErrLeaseLost)
	}
	if wf.waiting != nil {
		return &WaitingError{Wait: *wf.waiting}
	}
	return nil
}

// suspend ends the run in w: the handler unwinds with the error returned.
func (wf *workflow) suspend(w Wait) error {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	wf.cp.Steps[w.Step-1].State = StepWaiting
	wf.cp.Wait = &w
	wf.waiting = &w
	return &WaitingError{Wait: w}
}

// over records the wait at pos as completed with res (written with the
// run's next checkpoint write), and returns the record.
func (wf *workflow) over(pos int, res waitResult) (json.RawMessage, error) {
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode wait result: %w", err)
	}
	wf.mu.Lock()
	defer wf.mu.Unlock()
	rec := &wf.cp.Steps[pos]
	rec.State = StepCompleted
	rec.Result = raw
	rec.Duration = wf.e.clock.now().Sub(rec.StartedAt)
	wf.cp.Wait = nil
	return raw, nil
}

// overRecorded is over, then the checkpoint written under the lease as a
// step's result is (complete): a wait that ends in a run is recorded
// there and then, not left "waiting" in the store when no later step
// writes again before the job finishes.
func (wf *workflow) overRecorded(ctx context.Context, pos int, res waitResult) error {
	if _, err := wf.over(pos, res); err != nil {
		return err
	}
	if wf.r == nil {
		return nil
	}
	raw, err := wf.encode()
	if err != nil {
		return err
	}
	if err := wf.e.checkpoints.write(context.WithoutCancel(ctx), wf.r.ref, raw); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			wf.r.lost()
		}
		return fmt.Errorf("step %d of job %s: record the end of its wait: %w", pos+1, wf.jobID, err)
	}
	return nil
}

// encodeLocked is the checkpoint as it is now.
func (wf *workflow) encode() (json.RawMessage, error) {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	return wf.cp.Encode()
}

// waitOutcome turns a run that began a wait into the wait's outcome,
// whatever the handler returned (but a crash or a mismatch).
func (wf *workflow) waitOutcomeLocked(res *handlerResult) {
	if wf.waiting == nil || wf.mismatch != "" {
		return
	}
	switch res.trigger {
	case backend.TriggerSuccess, backend.TriggerError, backend.TriggerSkip, backend.TriggerSnooze:
	default:
		return
	}
	w := *wf.waiting
	res.trigger = backend.TriggerWait
	res.message = w.Describe()
	res.trace = ""
	res.delay = foreverWait
	if !w.Until.IsZero() {
		res.delay = max(w.Until.Sub(wf.e.clock.now()), 0)
	}
	res.wait = &w
	wf.dirty = true
}

func workflowOf(ctx context.Context, name string) (*workflow, error) {
	wf, _ := ctx.Value(workflowKey{}).(*workflow)
	if wf == nil {
		return nil, fmt.Errorf("wait %q: %w", name, ErrStepOutsideJob)
	}
	return wf, nil
}

// Sleep is a durable timer: the job leaves its worker and runs again,
// past this call, once d has passed (from the first time the handler got
// here). Return its error when it returns one (a *WaitingError).
func Sleep(ctx context.Context, name string, d time.Duration) error {
	return sleep(ctx, name, func(now time.Time) time.Time { return now.Add(d) })
}

// SleepUntil is Sleep until t.
func SleepUntil(ctx context.Context, name string, t time.Time) error {
	return sleep(ctx, name, func(time.Time) time.Time { return t })
}

func sleep(ctx context.Context, name string, until func(now time.Time) time.Time) error {
	wf, err := workflowOf(ctx, name)
	if err != nil {
		return err
	}
	at, err := wf.beginWait(name)
	if err != nil || at.done {
		return err
	}
	now := wf.e.clock.now()
	w := Wait{Kind: WaitKindSleep, Step: at.pos + 1, Name: name}
	if at.prior != nil && at.prior.Kind == WaitKindSleep {
		w.Until = at.prior.Until
	} else {
		w.Until = until(now)
	}
	if !now.Before(w.Until) {
		return wf.overRecorded(ctx, at.pos, waitResult{Until: w.Until})
	}
	return wf.suspend(w)
}

// WaitSignal waits, holding no worker, for the signal name sent to this
// job (Control.Signal) and returns its payload. A signal sent before the
// wait is buffered and taken here; each signal is delivered once. When
// timeout (> 0) passes first, it returns a *WaitTimeoutError
// (ErrWaitTimeout), which the handler may handle. The step's name is the
// signal's.
func WaitSignal(ctx context.Context, name string, timeout time.Duration) (json.RawMessage, error) {
	wf, err := workflowOf(ctx, name)
	if err != nil {
		return nil, err
	}
	at, err := wf.beginWait(name)
	if err != nil {
		return nil, err
	}
	if at.done {
		var res waitResult
		if err := json.Unmarshal(at.result, &res); err != nil {
			return nil, wf.mismatched(fmt.Sprintf("step %d %q: stored result does not decode: %v", at.pos+1, name, err))
		}
		if res.Timeout {
			return nil, &WaitTimeoutError{Signal: name, Timeout: timeout}
		}
		return res.Payload, nil
	}
	w := Wait{Kind: WaitKindSignal, Step: at.pos + 1, Name: name, Signal: name}
	now := wf.e.clock.now()
	if at.prior != nil && at.prior.Kind == WaitKindSignal {
		w.Until = at.prior.Until
	} else if timeout > 0 {
		w.Until = now.Add(timeout)
	}
	if wf.r != nil {
		sigs, err := wf.e.store.SignalList(ctx, &backend.SignalListParams{JobID: wf.jobID, Name: name})
		if err != nil {
			return nil, fmt.Errorf("wait for signal %q: %w", name, err)
		}
		if len(sigs) > 0 {
			return wf.take(ctx, at.pos, sigs[0])
		}
	}
	if !w.Until.IsZero() && !now.Before(w.Until) {
		if err := wf.overRecorded(ctx, at.pos, waitResult{Timeout: true}); err != nil {
			return nil, err
		}
		return nil, &WaitTimeoutError{Signal: name, Timeout: timeout}
	}
	return nil, wf.suspend(w)
}

// take consumes sig as the result of the wait at pos, in the write that
// records it.
func (wf *workflow) take(ctx context.Context, pos int, sig *Signal) (json.RawMessage, error) {
	if _, err := wf.over(pos, waitResult{Payload: sig.Payload}); err != nil {
		return nil, err
	}
	raw, err := wf.encode()
	if err != nil {
		return nil, err
	}
	err = wf.e.store.SignalConsume(context.WithoutCancel(ctx), &backend.SignalConsumeParams{
		JobRef: wf.r.ref, Name: sig.Name, Seq: sig.Seq, Checkpoint: raw})
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			wf.r.lost()
		}
		wf.mu.Lock()
		wf.cp.Steps[pos].State = StepFailed
		wf.cp.Steps[pos].Result = nil
		wf.cp.Steps[pos].Error = err.Error()
		wf.dirty = true
		wf.mu.Unlock()
		return nil, fmt.Errorf("take signal %q of job %s: %w", sig.Name, wf.jobID, err)
	}
	return sig.Payload, nil
}

// Spawn enqueues children from inside a handler, once: it is a step, so
// a replay returns the ids it recorded, and the children's ids are
// derived from the parent's id and the step's position (ChildID), so a
// run that crashed after the enqueue and before the record enqueues the
// same jobs again, which the store returns as existing. Each child's ID
// is set by Spawn.
func Spawn(ctx context.Context, name string, children []EnqueueParams) ([]string, error) {
	wf, err := workflowOf(ctx, name)
	if err != nil {
		return nil, err
	}
	wf.mu.Lock()
	pos := wf.pos
	wf.mu.Unlock()
	ids := make([]string, len(children))
	for i := range children {
		ids[i] = ChildID(wf.jobID, pos+1, i)
		if err := ValidateJobID(ids[i]); err != nil {
			return nil, fmt.Errorf("spawn %q: child id: %w", name, err)
		}
	}
	return Step(ctx, name, func(ctx context.Context) ([]string, error) {
		ps := make([]EnqueueParams, len(children))
		copy(ps, children)
		for i := range ps {
			ps[i].ID = ids[i]
		}
		res, err := wf.e.EnqueueMany(ctx, ps)
		if err != nil {
			return nil, fmt.Errorf("spawn %q: %w", name, err)
		}
		for i, r := range res {
			if r.Err != nil {
				return nil, fmt.Errorf("spawn %q: child %s: %w", name, ids[i], r.Err)
			}
		}
		wf.mu.Lock()
		have := map[string]bool{}
		for _, id := range wf.cp.Children {
			have[id] = true
		}
		for _, id := range ids {
			if !have[id] {
				wf.cp.Children = append(wf.cp.Children, id)
			}
		}
		wf.mu.Unlock()
		return ids, nil
	})
}

// ChildID is the id Spawn gives the i-th child (from 0) of the spawn at
// 1-based position step of job parent.
func ChildID(parent string, step, i int) string {
	return fmt.Sprintf("%s~s%d.%d", parent, step, i)
}

// ParentOf returns the parent id of a child id made by ChildID.
func ParentOf(id string) (string, bool) {
	k := strings.LastIndex(id, "~s")
	if k <= 0 {
		return "", false
	}
	rest := id[k+2:]
	dot := strings.IndexByte(rest, '.')
	if dot <= 0 || dot == len(rest)-1 {
		return "", false
	}
	for _, c := range rest[:dot] + rest[dot+1:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return id[:k], true
}

// WaitAll waits, holding no worker, until every child has ended, and
// returns them in order. When some did not complete, it returns the
// results with a *ChildrenError (ErrChildrenDied) naming them.
func WaitAll(ctx context.Context, name string, children []string) ([]ChildResult, error) {
	wf, err := workflowOf(ctx, name)
	if err != nil {
		return nil, err
	}
	at, err := wf.beginWait(name)
	if err != nil {
		return nil, err
	}
	if at.done {
		var res waitResult
		if err := json.Unmarshal(at.result, &res); err != nil {
			return nil, wf.mismatched(fmt.Sprintf("step %d %q: stored result does not decode: %v", at.pos+1, name, err))
		}
		return res.Children, childrenErr(name, res.Children)
	}
	results, done, err := wf.e.readChildren(ctx, children)
	if err != nil {
		return nil, fmt.Errorf("wait for children %q: %w", name, err)
	}
	if done < len(children) {
		return nil, wf.suspend(Wait{Kind: WaitKindChildren, Step: at.pos + 1, Name: name,
			Children: append([]string(nil), children...), Done: done,
			Until: wf.e.clock.now().Add(childrenRecheck)})
	}
	if err := wf.overRecorded(ctx, at.pos, waitResult{Children: results}); err != nil {
		return nil, err
	}
	return results, childrenErr(name, results)
}

func childrenErr(name string, rs []ChildResult) error {
	var died []string
	for _, r := range rs {
		if r.Died() {
			died = append(died, r.ID)
		}
	}
	if len(died) == 0 {
		return nil
	}
	return &ChildrenError{Step: name, Died: died}
}

// readChildren reads each child, and counts those that ended.
func (e *Engine) readChildren(ctx context.Context, ids []string) ([]ChildResult, int, error) {
	out := make([]ChildResult, len(ids))
	done := 0
	for i, id := range ids {
		j, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if errors.Is(err, ErrNotFound) {
			out[i] = ChildResult{ID: id, State: StateDeleted}
			done++
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		out[i] = ChildResult{ID: id, State: j.State, Reason: j.TerminalReason}
		if !j.State.Terminal() {
			continue
		}
		done++
		if j.State != StateCompleted && len(j.Errors) > 0 {
			out[i].Error = j.Errors[len(j.Errors)-1].Message
		}
		if cp, err := ParseCheckpoint(j.Checkpoint); err == nil {
			for k := len(cp.Steps) - 1; k >= 0; k-- {
				if cp.Steps[k].State == StepCompleted {
					out[i].Result = cp.Steps[k].Result
					break
				}
			}
		}
	}
	return out, done, nil
}

// countChildrenLeft counts the children not ended, stopping at the
// first: the wake check needs only whether any is left.
func (e *Engine) childrenLeft(ctx context.Context, ids []string) (bool, error) {
	for start := 0; start < len(ids); start += MaxApplyIDs {
		page := ids[start:min(start+MaxApplyIDs, len(ids))]
		n, _, err := e.store.JobCountMatching(ctx, &backend.JobCountMatchingParams{
			Filter: Filter{IDs: page, States: []State{StateScheduled, StateAvailable, StateRunning, StateRetryable}},
			Max:    1,
		})
		if err != nil {
			return false, err
		}
		if n > 0 {
			return true, nil
		}
	}
	return false, nil
}
