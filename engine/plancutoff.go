package engine

import (
	"context"
	"fmt"
)

// appliedPlan returns p's plan with the cutoff its run applies: a run
// takes jobs that entered their state by the plan's cutoff and by the
// operation's start, whichever is earlier (RunOperation), so a cutoff
// after the store's now is replaced by that now, and what is stored and
// shown (Operation.Cutoff) is what the run does. The caller's plan is
// left as it was.
func (e *Engine) appliedPlan(ctx context.Context, pl *BulkPlan) (*BulkPlan, error) {
	now, err := e.store.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("bulk: store clock: %w", err)
	}
	if !pl.Cutoff.After(now) {
		return pl, nil
	}
	out := *pl
	out.Cutoff = now
	return &out, nil
}
