package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/outage"
)

// operationLeaseTTL is how long an operation stays leased between
// batches: long enough for a batch and a rate-limit pause, short enough
// that another instance resumes an operation soon after its runner died.
func (e *Engine) operationLeaseTTL() time.Duration {
	return max(10*e.cfg.MaintenanceInterval, 2*time.Second)
}

func (e *Engine) wakeOperations() { signal(e.opsWake) }

// operationLoop runs persisted bulk operations: any engine doing
// maintenance may take one, fenced by the operation's lease, so an
// operation cut off by a restart is resumed by whoever runs next.
func (e *Engine) operationLoop() {
	t := time.NewTicker(e.cfg.MaintenanceInterval)
	defer t.Stop()
	ctx := e.runCtx
	for {
		var wait time.Duration
		for {
			did, err := e.RunOperation(ctx)
			if err != nil && ctx.Err() == nil {
				e.contact.fail()
				if !outage.StoreUnavailable(err) {
					e.log.Warn("operation run failed", "err", err)
				} else {
					wait = e.outOps.Fail(err)
					break
				}
			} else if err == nil {
				e.outOps.Succeed()
			}
			if !did || ctx.Err() != nil {
				break
			}
		}
		if wait > 0 {
			// The store did not answer: back off rather than retry at
			// every tick or wake-up.
			if !outage.Sleep(ctx, wait) {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.opsWake:
		}
	}
}

// RunOperation takes one pending or interrupted operation and drives it to
// its end (or until ctx ends). It reports whether it found one. Commands
// that act on a store with no engine running call it themselves.
func (e *Engine) RunOperation(ctx context.Context) (bool, error) {
	lease, err := e.store.OperationClaim(ctx, &backend.OperationClaimParams{Holder: e.cfg.WorkerID, TTL: e.operationLeaseTTL()})
	if err != nil {
		return false, fmt.Errorf("claim operation: %w", err)
	}
	if lease == nil {
		return false, nil
	}
	op := lease.Operation
	// A plan's cutoff, when the operation was started from one, rides on
	// its persisted selector; it never reaches the store as a filter.
	cutoff := op.CreatedAt
	if c := op.Selector.PlanCutoff; c != nil && c.Before(cutoff) {
		cutoff = *c
	}
	op = liftCutoff(op)
	finish := func(status OperationStatus, msg string) error {
		done, err := e.store.OperationFinish(ctx, &backend.OperationFinishParams{
			ID: op.ID, Holder: lease.Holder, Fence: lease.Fence, Status: status, Error: msg,
		})
		if errors.Is(err, ErrLeaseLost) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("operation %s: %w", op.ID, err)
		}
		e.publish(Change{Kind: ChangeOperation, Operation: done.ID})
		if status != OperationRunning {
			e.wakeAll()
		}
		return nil
	}
	spec, err := backend.SpecFor(op.Action)
	if err != nil {
		return true, finish(OperationFailed, err.Error())
	}
	sel, any := spec.Narrow(op.Selector)
	if !any {
		// No state the action changes is selected: nothing to do.
		return true, finish(OperationCompleted, "")
	}
	batch := e.cfg.OperationBatch
	if op.Rate > 0 {
		// A tenth of a second's worth of jobs per batch: the rate then
		// holds within a tenth of a second, not in bursts of a second's.
		batch = min(batch, max(1, op.Rate/10))
	}
	event := backend.EventWrite{Kind: spec.Event, Actor: op.CreatedBy, To: spec.To,
		Message: "bulk " + string(op.Action) + " (operation " + op.ID + ")"}
	var canary *canaryRun
	if op.Canary != nil {
		canary = &canaryRun{e: e, lease: lease, op: op, spec: spec, sel: sel, cutoff: cutoff, event: event}
		if err := canary.prelude(ctx); err != nil {
			return true, canary.ended(err)
		}
		op = canary.op
		batch = min(batch, canary.batch())
	}
	cursor := lease.Cursor
	start := time.Now()
	// The rate counts from what this run processed: the operation's own
	// progress, not an estimate.
	from := op.Processed
	// The refusals of this run whose unique key a live job holds, for the
	// operation's error: how many, and the last one's holder.
	uniqueHeld := 0
	var lastHeld *UniqueHeldError
	for {
		if op.Rate > 0 {
			// Keep under the rate: a batch starts once the jobs done so
			// far and this batch's are all due at op.Rate per second, so
			// the rate measured from the run's start never exceeds it.
			due := start.Add(time.Duration(float64(op.Processed-from+int64(batch)) / float64(op.Rate) * float64(time.Second)))
			select {
			case <-ctx.Done():
				return true, ctx.Err()
			case <-time.After(time.Until(due)):
			}
		}
		recent := 0
		if canary != nil {
			canary.op = op
			if err := canary.gate(ctx); err != nil {
				return true, canary.ended(err)
			}
			op, recent = canary.op, op.Canary.Window
		}
		res, err := e.store.OperationProcessBatch(ctx, &backend.OperationProcessBatchParams{
			ID: op.ID, Holder: lease.Holder, Fence: lease.Fence, After: cursor,
			Spec: spec, Selector: storeFilter(sel), Cutoff: cutoff,
			Limit: batch, Window: operationWindow * batch, Event: event, TTL: e.operationLeaseTTL(),
			Recent: recent,
		})
		switch {
		case errors.Is(err, ErrLeaseLost):
			return true, nil
		case errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnsupported):
			// This store can never run the selector: fail rather than
			// have every runner retry it forever.
			return true, finish(OperationFailed, err.Error())
		case err != nil:
			return true, fmt.Errorf("operation %s: %w", op.ID, err)
		}
		op = liftCutoff(res.Operation)
		e.publish(Change{Kind: ChangeOperation, Operation: op.ID})
		if op.Status != OperationRunning && op.Status != OperationPending {
			// Cancelled (or ended) meanwhile.
			e.wakeAll()
			return true, nil
		}
		cursor = res.Cursor
		msg := ""
		for _, r := range res.Refused {
			var held *UniqueHeldError
			if errors.As(r, &held) {
				uniqueHeld++
				lastHeld = held
			}
		}
		if n := len(res.Refused); n > 0 {
			msg = fmt.Sprintf("%d jobs refused so far; the last: %v", op.Failed, res.Refused[n-1])
			if uniqueHeld > 0 {
				msg += fmt.Sprintf(" (%d refused by this run because a live job holds their unique key; the last: %s held by %s)",
					uniqueHeld, lastHeld.ID, lastHeld.HolderID)
			}
		}
		if res.Exhausted {
			return true, finish(OperationCompleted, msg)
		}
		if msg != "" {
			if err := finish(OperationRunning, msg); err != nil {
				return true, err
			}
		}
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
	}
}

// operationWindow bounds, in multiples of the batch size, how many jobs (in
// id order) one batch looks at: a selector that matches few jobs of a big
// table is walked over several short transactions rather than one long
// one that would hold up the workers' writes.
const operationWindow = 10
