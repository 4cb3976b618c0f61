package engine

import (
	"context"
	"encoding/json"
)

// The operator actions of Control, each run inside the Interceptor's
// InterceptAction (intercept.go); the work is in the lowercase method
// beside the one named here (operator.go, workflow_control.go).

// Retry makes a dead job available again with one more attempt.
func (e *Engine) Retry(ctx context.Context, id string, opts RetryOptions) (*Job, error) {
	return intercepted(ctx, e, ActionInfo{Name: "retry", JobID: id}, func(ctx context.Context) (*Job, error) {
		return e.retry(ctx, id, opts)
	})
}

// Cancel stops a job that has not finished; a running one's handler has
// its context cancelled when its worker next renews the lease.
func (e *Engine) Cancel(ctx context.Context, id string) (*Job, error) {
	return intercepted(ctx, e, ActionInfo{Name: "cancel", JobID: id}, func(ctx context.Context) (*Job, error) {
		return e.cancel(ctx, id)
	})
}

// Delete removes a job that is not running.
func (e *Engine) Delete(ctx context.Context, id string) error {
	_, err := intercepted(ctx, e, ActionInfo{Name: "delete", JobID: id}, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, e.deleteJob(ctx, id)
	})
	return err
}

// ReleaseJob returns one quarantined job to available.
func (e *Engine) ReleaseJob(ctx context.Context, id string) (*Job, error) {
	return intercepted(ctx, e, ActionInfo{Name: "release", JobID: id}, func(ctx context.Context) (*Job, error) {
		return e.releaseJob(ctx, id)
	})
}

// UpdatePayload replaces a job's payload if nobody changed it since the
// editor read version.
func (e *Engine) UpdatePayload(ctx context.Context, id string, payload json.RawMessage, version int64) (*Job, error) {
	return intercepted(ctx, e, ActionInfo{Name: "patch", JobID: id}, func(ctx context.Context) (*Job, error) {
		return e.updatePayload(ctx, id, payload, version)
	})
}

// RetryWithInput enqueues a corrected copy of a job, linked both ways.
func (e *Engine) RetryWithInput(ctx context.Context, id string, p RetryWithInputParams) (*Job, error) {
	return intercepted(ctx, e, ActionInfo{Name: "retry_with_input", JobID: id}, func(ctx context.Context) (*Job, error) {
		return e.retryWithInput(ctx, id, p)
	})
}

// Apply runs action on each id on its own and reports each outcome.
func (e *Engine) Apply(ctx context.Context, action Action, ids []string) ([]ActionResult, error) {
	return intercepted(ctx, e, ActionInfo{Name: "apply", Action: action, IDs: len(ids)}, func(ctx context.Context) ([]ActionResult, error) {
		return e.apply(ctx, action, ids)
	})
}

// Bulk previews or starts an operation over every job the selector matches.
// A dry run counts the jobs that entered their state by the store's now and
// returns that as a plan; a run given the plan takes only those (see
// BulkPlan), a run without one those that entered it by the operation's
// creation. A destructive action (Action.Destructive) runs only from a
// plan: whatever its selector, nothing is cancelled or deleted in bulk
// that a preview did not count first.
func (e *Engine) Bulk(ctx context.Context, p BulkParams) (*BulkResult, error) {
	return intercepted(ctx, e, bulkInfo(p), func(ctx context.Context) (*BulkResult, error) {
		return e.bulk(ctx, p)
	})
}

// ReleaseFingerprint lifts a quarantine and returns how many held jobs
// went back to available.
func (e *Engine) ReleaseFingerprint(ctx context.Context, fingerprint string) (int, error) {
	return intercepted(ctx, e, ActionInfo{Name: "release_fingerprint", Fingerprint: fingerprint}, func(ctx context.Context) (int, error) {
		return e.releaseFingerprint(ctx, fingerprint)
	})
}

// ReplayFromStep creates a new job that keeps the original's checkpoint
// before p.Step and runs from it on, linked both ways (forked_from on the
// new job, the fork on the original's checkpoint). The original must be
// terminal; it keeps its state and is superseded by the new job, as by a
// retry with new input: bulk selections leave it out unless they include
// superseded jobs, and a retry of it alone needs Force, so the steps the
// replay runs again do not run twice.
func (e *Engine) ReplayFromStep(ctx context.Context, id string, p ReplayParams) (*Job, error) {
	return intercepted(ctx, e, ActionInfo{Name: "replay", JobID: id}, func(ctx context.Context) (*Job, error) {
		return e.replayFromStep(ctx, id, p)
	})
}

// PauseQueue stops workers claiming from queue.
func (e *Engine) PauseQueue(ctx context.Context, queue string) error {
	_, err := intercepted(ctx, e, ActionInfo{Name: "pause", Queue: queue}, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, e.pauseQueue(ctx, queue)
	})
	return err
}

// ResumeQueue lets workers claim from queue again.
func (e *Engine) ResumeQueue(ctx context.Context, queue string) error {
	_, err := intercepted(ctx, e, ActionInfo{Name: "resume", Queue: queue}, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, e.resumeQueue(ctx, queue)
	})
	return err
}

// CancelOperation stops a pending, running or halted operation after its
// current batch.
func (e *Engine) CancelOperation(ctx context.Context, id string) (*Operation, error) {
	return intercepted(ctx, e, ActionInfo{Name: "cancel_operation", Operation: id}, func(ctx context.Context) (*Operation, error) {
		return e.cancelOperation(ctx, id)
	})
}

// ResumeOperation sets a halted canary run going again (see canary.go).
func (e *Engine) ResumeOperation(ctx context.Context, id string) (*Operation, error) {
	return intercepted(ctx, e, ActionInfo{Name: "resume_operation", Operation: id}, func(ctx context.Context) (*Operation, error) {
		return e.resumeOperation(ctx, id)
	})
}

// ResolveErrorGroup closes an error group with a note; it reopens by
// itself when one of its jobs dies after the resolution.
func (e *Engine) ResolveErrorGroup(ctx context.Context, p ErrorGroupResolveParams) (*ErrorGroup, error) {
	return intercepted(ctx, e, ActionInfo{Name: "resolve_error_group", ErrorGroup: p.ID}, func(ctx context.Context) (*ErrorGroup, error) {
		return e.resolveErrorGroup(ctx, p)
	})
}

// IgnoreErrorGroup takes an error group out of the default listings; its
// jobs still die, are archived and counted as before.
func (e *Engine) IgnoreErrorGroup(ctx context.Context, p ErrorGroupIgnoreParams) (*ErrorGroup, error) {
	return intercepted(ctx, e, ActionInfo{Name: "ignore_error_group", ErrorGroup: p.ID}, func(ctx context.Context) (*ErrorGroup, error) {
		return e.ignoreErrorGroup(ctx, p)
	})
}

// UnignoreErrorGroup brings an ignored error group back, open.
func (e *Engine) UnignoreErrorGroup(ctx context.Context, p ErrorGroupUnignoreParams) (*ErrorGroup, error) {
	return intercepted(ctx, e, ActionInfo{Name: "unignore_error_group", ErrorGroup: p.ID}, func(ctx context.Context) (*ErrorGroup, error) {
		return e.unignoreErrorGroup(ctx, p)
	})
}

// bulkInfo is what an Interceptor is told of a bulk action.
func bulkInfo(p BulkParams) ActionInfo {
	a := ActionInfo{Name: "bulk", Action: p.Action, Selector: p.Selector.String(), DryRun: p.DryRun}
	if p.Plan != nil && a.Action == "" {
		a.Action, a.Selector = p.Plan.Action, p.Plan.Selector.String()
	}
	return a
}
