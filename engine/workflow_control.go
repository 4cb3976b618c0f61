package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Replay from a step: the operator's redrive of a workflow that does not
// start over. The new job keeps the original's recorded steps before the
// chosen one and runs from it on; the original keeps its state, with the
// fork recorded on it, and is superseded by the new job.

// ReplayParams says where a replay starts.
type ReplayParams struct {
	// Step is the 1-based position of the first step that runs again;
	// every step before it must be completed on the original.
	Step int `json:"step"`
	// Result, when set, replaces the recorded result of step Step-1 in the
	// new job (a corrected input for the steps that run again).
	Result json.RawMessage `json:"result,omitempty"`
	// ID of the new job; `<id>~replay~<8 hex>` when empty.
	ID string `json:"id,omitempty"`
}

// ReplayPlan is what a replay would do, for a preview before it is asked
// for: the steps kept (their results replayed) and the steps that run
// again (those recorded from Step on; the handler may ask for more).
type ReplayPlan struct {
	Kept  []StepRecord `json:"kept"`
	Rerun []StepRecord `json:"rerun"`
}

// PlanReplay checks a replay of job j from p.Step and returns what it keeps
// and what runs again, with the new job's checkpoint.
func PlanReplay(j *Job, p ReplayParams) (*ReplayPlan, Checkpoint, error) {
	cp, err := ParseCheckpoint(j.Checkpoint)
	if err != nil {
		return nil, Checkpoint{}, fmt.Errorf("job %s: %w", j.ID, err)
	}
	if p.Step > 1 && len(cp.Steps) == 0 {
		return nil, Checkpoint{}, fmt.Errorf("%w: job %s has no recorded steps (it is not a workflow, or no step ran): it replays from step 1, the start, only", ErrInvalid, j.ID)
	}
	if p.Step < 1 || p.Step > len(cp.Steps)+1 {
		return nil, Checkpoint{}, fmt.Errorf("%w: job %s has %d recorded steps; replay from step 1 to %d", ErrInvalid, j.ID, len(cp.Steps), len(cp.Steps)+1)
	}
	for i := 0; i < p.Step-1; i++ {
		if cp.Steps[i].State != StepCompleted {
			return nil, Checkpoint{}, fmt.Errorf("%w: job %s: step %d (%s) is %s, so the replay cannot start after it", ErrInvalid, j.ID, i+1, cp.Steps[i].Name, cp.Steps[i].State)
		}
	}
	// Empty lists, not nil: the answer says "none" as [] on the wire.
	kept := append([]StepRecord{}, cp.Steps[:p.Step-1]...)
	if len(p.Result) > 0 {
		if p.Step < 2 {
			return nil, Checkpoint{}, fmt.Errorf("%w: a replacement result is for step %d−1; there is none before step 1", ErrInvalid, p.Step)
		}
		v, err := ValidateJSON(p.Result)
		if err != nil {
			return nil, Checkpoint{}, fmt.Errorf("%w: replacement result of step %d: %v", ErrInvalid, p.Step-1, err)
		}
		kept[p.Step-2].Result = v
	}
	plan := &ReplayPlan{Kept: kept, Rerun: append([]StepRecord{}, cp.Steps[p.Step-1:]...)}
	next := Checkpoint{Version: cp.Version, Steps: kept, ForkedFrom: &Fork{JobID: j.ID, Step: p.Step},
		Children: keptChildren(cp.Children, p.Step)}
	return plan, next, nil
}

// keptChildren are the children spawned by the steps before step: a
// kept Spawn returns their ids again, so the fork lists them as its own.
// They stay the original's children (ChildID names it): the last of
// them to end wakes the original, and a fork waiting for them sees them
// end at its wait's re-check.
func keptChildren(children []string, step int) []string {
	var out []string
	for _, id := range children {
		if at, ok := spawnStepOf(id); ok && at < step {
			out = append(out, id)
		}
	}
	return out
}

// spawnStepOf is the step position in a ChildID.
func spawnStepOf(id string) (int, bool) {
	if _, ok := ParentOf(id); !ok {
		return 0, false
	}
	rest := id[strings.LastIndex(id, "~s")+2:]
	n, err := strconv.Atoi(rest[:strings.IndexByte(rest, '.')])
	return n, err == nil
}

// ReplayPreview returns what a replay of job id from p.Step would keep and
// run again, without changing anything.
func (e *Engine) ReplayPreview(ctx context.Context, id string, p ReplayParams) (*ReplayPlan, error) {
	if err := sluicetype.NoSuchID("job", id); err != nil {
		return nil, err
	}
	j, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
	if err != nil {
		return nil, err
	}
	plan, _, err := PlanReplay(j, p)
	return plan, err
}

// replayFromStep is ReplayFromStep without the Interceptor.
func (e *Engine) replayFromStep(ctx context.Context, id string, p ReplayParams) (*Job, error) {
	if err := sluicetype.NoSuchID("job", id); err != nil {
		return nil, err
	}
	if j, ok, err := replayed[*Job](ctx); ok {
		return j, err
	}
	orig, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
	if err != nil {
		return nil, err
	}
	if !orig.State.Terminal() {
		return nil, &StateError{Action: "replay from step", ID: id, State: orig.State, Allowed: TerminalStates()}
	}
	_, next, err := PlanReplay(orig, p)
	if err != nil {
		return nil, err
	}
	if next.ForkedFrom != nil {
		// The replay's first run points back at the attempt that died
		// (AttemptInfo.Previous).
		next.ForkedFrom.Ref = previousRef(orig)
	}
	newID := p.ID
	if newID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		newID = id + "~replay~" + hex.EncodeToString(b[:])
	}
	if err := ValidateJobID(newID); err != nil {
		return nil, err
	}
	ocp, err := ParseCheckpoint(orig.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	ocp.Forks = append(ocp.Forks, Fork{JobID: newID, Step: p.Step})
	origRaw, err := ocp.Encode()
	if err != nil {
		return nil, err
	}
	newRaw, err := next.Encode()
	if err != nil {
		return nil, err
	}
	actor := ActorFrom(ctx)
	j, err := e.store.JobFork(auditCtx(ctx), &backend.JobForkParams{
		ID: id, Version: orig.Version, NewID: newID,
		Checkpoint: newRaw, OriginalCheckpoint: origRaw,
		OriginalEvent: backend.EventWrite{Kind: EventForked, Actor: actor, Message: fmt.Sprintf("replayed from step %d as %s", p.Step, newID)},
		CopyEvent:     backend.EventWrite{Kind: EventForked, Actor: actor, To: StateAvailable, Message: fmt.Sprintf("replay of %s from step %d", id, p.Step)},
	})
	if err != nil {
		return nil, err
	}
	e.wake(j.Queue)
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: j.State})
	e.publish(Change{Kind: ChangeJob, JobID: id, Queue: orig.Queue, State: orig.State})
	return j, nil
}
