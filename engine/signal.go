package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Signals and wakes: Control.Signal, the worker's check after a signal
// wait, and the parent's check after a child ended (wait.go has the
// design).

// MaxSignalPayload bounds a signal's payload, in bytes.
const MaxSignalPayload = 1 << 20

// Signal sends the signal name to job id with payload (JSON; null when
// empty): it is buffered until a WaitSignal of that name takes it, and
// wakes the job at once if it waits for that name. ErrNotFound for no
// such job; a *StateError for a terminal one.
func (e *Engine) Signal(ctx context.Context, id, name string, payload json.RawMessage) (*Signal, error) {
	return intercepted(ctx, e, ActionInfo{Name: "signal", JobID: id, Signal: name}, func(ctx context.Context) (*Signal, error) {
		return e.signal(ctx, id, name, payload)
	})
}

// signal is Signal inside the Interceptor and the audit trail.
func (e *Engine) signal(ctx context.Context, id, name string, payload json.RawMessage) (*Signal, error) {
	if err := sluicetype.ValidateName("signal", name); err != nil {
		return nil, err
	}
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	if len(payload) > MaxSignalPayload {
		return nil, fmt.Errorf("%w: signal payload of %d bytes; at most %d", ErrInvalid, len(payload), MaxSignalPayload)
	}
	if !json.Valid(payload) {
		return nil, fmt.Errorf("%w: signal payload is not JSON", ErrInvalid)
	}
	if err := sluicetype.CheckStorableJSON("signal payload", payload); err != nil {
		return nil, err
	}
	if err := sluicetype.NoSuchID("job", id); err != nil {
		return nil, err
	}
	// The job as it is now: when it waits for this signal, the wake goes
	// in the signal's own write, so a process that dies after the send
	// leaves no signal buffered beside a job still asleep.
	before, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("signal job %s: %w", id, err)
	}
	sp := &backend.SignalSendParams{JobID: id, Name: name, Payload: payload}
	if w := waitOf(before); w != nil && w.Kind == WaitKindSignal && w.Signal == name {
		if sp.Wake, err = e.wakePlan(before, backend.TriggerSignal, ActorFrom(ctx), signalWakeMessage(name)); err != nil {
			return nil, fmt.Errorf("signal job %s: %w", id, err)
		}
	}
	sig, err := e.store.SignalSend(auditCtx(ctx), sp)
	if err != nil {
		return nil, fmt.Errorf("signal job %s: %w", id, err)
	}
	if sig.Woke {
		e.woken(before, sp.Wake.To)
		return sig, nil
	}
	// Not woken in the send: the job began its wait since the read, or
	// moved on. Read after the write: a worker that writes the wait after
	// this read sees the signal in its own check (signalArrived).
	j, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return sig, nil
		}
		return nil, fmt.Errorf("signal job %s: %w", id, err)
	}
	if w := waitOf(j); w != nil && w.Kind == WaitKindSignal && w.Signal == name {
		if _, err := e.wakeWaiting(ctx, j, backend.TriggerSignal, ActorFrom(ctx), signalWakeMessage(name)); err != nil {
			return nil, fmt.Errorf("signal job %s: wake: %w", id, err)
		}
	}
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: j.State})
	return sig, nil
}

// signalWakeMessage is the woken event's text for signal name.
func signalWakeMessage(name string) string { return fmt.Sprintf("signal %q", name) }

// Signals lists a job's buffered signals (of one name, or all when "").
func (e *Engine) Signals(ctx context.Context, id, name string) ([]*Signal, error) {
	return e.store.SignalList(ctx, &backend.SignalListParams{JobID: id, Name: name})
}

// waitOf is the wait of a scheduled job, nil when it waits for none.
func waitOf(j *Job) *Wait {
	if j == nil || j.State != StateScheduled || len(j.Checkpoint) == 0 {
		return nil
	}
	cp, err := ParseCheckpoint(j.Checkpoint)
	if err != nil {
		return nil
	}
	return cp.Wait
}

// WaitOf returns what a job waits for, nil when it is not waiting. It
// needs the job's checkpoint (GetJob has it; a listed summary does not).
func WaitOf(j *Job) *Wait { return waitOf(j) }

// wakeWaiting applies the table's row for t to j, which waits: fenced on
// its state and fence as read.
func (e *Engine) wakeWaiting(ctx context.Context, j *Job, t backend.Trigger, actor, msg string) (bool, error) {
	p, err := e.wakePlan(j, t, actor, msg)
	if err != nil {
		return false, err
	}
	moved, err := e.store.JobWake(ctx, p)
	if err != nil {
		return false, err
	}
	if moved {
		e.woken(j, p.To)
	}
	return moved, nil
}

// wakePlan is the write of the table's row for t on j, which waits.
func (e *Engine) wakePlan(j *Job, t backend.Trigger, actor, msg string) (*backend.JobWakeParams, error) {
	row, err := backend.Next(j, t, e.cfg.CrashLimit)
	if err != nil {
		return nil, err
	}
	return &backend.JobWakeParams{
		ID: j.ID, From: j.State, Fence: j.Fence, To: row.To,
		Event:  backend.EventWrite{Kind: EventWoken, Actor: actor, From: j.State, To: row.To, Attempt: j.Attempt, Message: msg},
		Counts: []backend.CountDelta{{Queue: j.Queue, From: j.State, To: row.To, N: 1}},
	}, nil
}

// woken tells this process that j moved to "to" by a wake.
func (e *Engine) woken(j *Job, to State) {
	e.wake(j.Queue)
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: to})
	e.observeTransition(j.Queue, j.Kind, j.State, to)
}

// afterWait runs once a run's wait is written: a signal that came, or
// the last child that ended, while the job was still running wakes it
// now (their own checks read the job before this write committed).
func (e *Engine) afterWait(ctx context.Context, written *Job, w *Wait) {
	if w == nil || written == nil {
		return
	}
	if w.Kind == WaitKindChildren {
		e.checkParent(ctx, written.ID)
		return
	}
	if w.Kind != WaitKindSignal {
		return
	}
	sigs, err := e.store.SignalList(ctx, &backend.SignalListParams{JobID: written.ID, Name: w.Signal})
	if err != nil {
		// The wait's timeout still wakes it; the signal stays buffered.
		e.log.Warn("signal check after wait failed", "job", written.ID, "err", err)
		return
	}
	if len(sigs) == 0 {
		return
	}
	if _, err := e.wakeWaiting(ctx, written, backend.TriggerSignal, e.cfg.WorkerID, fmt.Sprintf("signal %q (buffered)", w.Signal)); err != nil {
		e.log.Warn("wake after wait failed", "job", written.ID, "err", err)
	}
}

// parentChecks runs the checks of parents whose children ended, at most
// one at a time per parent (a check that is asked for again while it
// runs runs once more after it).
type parentChecks struct {
	mu      sync.Mutex
	running map[string]bool
	again   map[string]bool
}

// childEnded is called after a job's terminal outcome committed: when it
// is a child (ChildID), its parent is woken if it waits for its children
// and none is left.
func (e *Engine) childEnded(id string) {
	parent, ok := ParentOf(id)
	if !ok {
		return
	}
	pc := &e.parents
	pc.mu.Lock()
	if pc.running == nil {
		pc.running, pc.again = map[string]bool{}, map[string]bool{}
	}
	if pc.running[parent] {
		pc.again[parent] = true
		pc.mu.Unlock()
		return
	}
	pc.running[parent] = true
	pc.mu.Unlock()
	go func() {
		ctx := context.WithoutCancel(e.hardCtx)
		for {
			e.checkParent(ctx, parent)
			pc.mu.Lock()
			if !pc.again[parent] {
				delete(pc.running, parent)
				pc.mu.Unlock()
				return
			}
			delete(pc.again, parent)
			pc.mu.Unlock()
		}
	}()
}

// checkParent wakes parent if it waits for children and none is left.
func (e *Engine) checkParent(ctx context.Context, parent string) {
	j, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: parent})
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			e.log.Warn("parent check failed; its own re-check will see", "parent", parent, "err", err)
		}
		return
	}
	w := waitOf(j)
	if w == nil || w.Kind != WaitKindChildren {
		return
	}
	left, err := e.childrenLeft(ctx, w.Children)
	if err != nil {
		e.log.Warn("parent check failed; its own re-check will see", "parent", parent, "err", err)
		return
	}
	if left {
		return
	}
	if _, err := e.wakeWaiting(ctx, j, backend.TriggerChildren, e.cfg.WorkerID, fmt.Sprintf("%d children ended", len(w.Children))); err != nil {
		e.log.Warn("parent wake failed; its own re-check will see", "parent", parent, "err", err)
	}
}
