package api

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// The fake's replay from a step: the copy, linked back, without a store.

func (f *fakeCtl) ReplayFromStep(ctx context.Context, id string, p engine.ReplayParams) (*engine.Job, error) {
	if err := f.mutate(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	orig, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	_, next, err := engine.PlanReplay(orig, p)
	if err != nil {
		return nil, err
	}
	nid := p.ID
	if nid == "" {
		nid = id + "~replay~00000000"
	}
	raw, err := next.Encode()
	if err != nil {
		return nil, err
	}
	n := copyJob(orig, true)
	n.ID, n.State, n.Checkpoint, n.Version = nid, engine.StateAvailable, raw, 1
	f.jobs[nid] = n
	return copyJob(n, false), nil
}

func (f *fakeCtl) ReplayPreview(ctx context.Context, id string, p engine.ReplayParams) (*engine.ReplayPlan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	orig, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	plan, _, err := engine.PlanReplay(orig, p)
	return plan, err
}
