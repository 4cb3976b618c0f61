package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The embedded engine's Control: the operator surface over its own store.

var _ Control = (*Engine)(nil)

// Meta describes this engine; embedded callers are admins.
func (e *Engine) Meta(ctx context.Context) (*Meta, error) {
	m := &Meta{Backend: e.store.Backend(), Role: RoleAdmin, Actor: ActorFrom(ctx), Retention: e.Retention()}
	m.Capabilities = capabilityNames(e.store.Capabilities())
	if w, ok := backend.DurabilityWarnerOf(e.store); ok {
		m.Warnings = w.DurabilityWarnings(ctx)
	}
	return m, nil
}

// ListJobs pages payload-free rows newest first by state_changed_at.
func (e *Engine) ListJobs(ctx context.Context, p ListJobsParams) (*JobPage, error) {
	limit := p.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("%w: limit %d outside 1–%d", ErrInvalid, limit, MaxListLimit)
	}
	if err := p.Filter.Validate(); err != nil {
		return nil, err
	}
	var after *Cursor
	reverse := false
	if p.Cursor != "" {
		c, err := DecodeCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		after = &c
		reverse = c.Dir == CursorPrev
	}
	if err := e.resolveExpiry(ctx, &p.Filter); err != nil {
		return nil, err
	}
	var scan ScanReport
	rows, err := e.store.JobListPage(ctx, &backend.JobListPageParams{Filter: storeFilter(p.Filter), After: after, Reverse: reverse, Limit: limit + 1, Scan: &scan})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	if reverse {
		slices.Reverse(rows)
	}
	if err := e.markHeld(ctx, rows); err != nil {
		return nil, err
	}
	page := &JobPage{Jobs: rows}
	if scan.Bounded && !more && scan.Stop != nil {
		// The budget ran out first: the cursor goes on from the last job
		// examined, not the last one shown, so the next page scans on.
		page.Scan = &scan
		stop := *scan.Stop
		if reverse {
			stop.Dir = CursorPrev
			page.Prev = stop.Encode()
		} else {
			stop.Dir = CursorNext
			page.Next = stop.Encode()
		}
	}
	if len(rows) == 0 {
		return page, nil
	}
	first, last := rows[0], rows[len(rows)-1]
	olderExist := (!reverse && more) || (reverse && after != nil)
	newerExist := (reverse && more) || (!reverse && after != nil)
	if olderExist && page.Next == "" {
		page.Next = Cursor{At: last.StateChangedAt, ID: last.ID, Dir: CursorNext}.Encode()
	}
	if newerExist && page.Prev == "" {
		page.Prev = Cursor{At: first.StateChangedAt, ID: first.ID, Dir: CursorPrev}.Encode()
	}
	return page, nil
}

// GetJob returns a job with its timeline.
func (e *Engine) GetJob(ctx context.Context, id string, includePayload bool) (*JobDetail, error) {
	if err := sluicetype.NoSuchID("job", id); err != nil {
		return nil, err
	}
	j, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id, IncludePayload: includePayload})
	if err != nil {
		return nil, err
	}
	ev, err := e.store.JobEventList(ctx, &backend.JobEventListParams{JobID: id})
	if err != nil {
		return nil, fmt.Errorf("job %s timeline: %w", id, err)
	}
	d := &JobDetail{Job: j, Timeline: Timeline(j, ev), DeleteAt: e.deleteAt(j)}
	d.Expiring = d.DeleteAt != nil && slices.Contains(ExpiringStates, j.State) && time.Until(*d.DeleteAt) < e.cfg.ExpiryWarning
	d.DeadLetter, err = e.deadLetterOf(ctx, j)
	if err != nil {
		return nil, err
	}
	if d.HeldBy, err = e.heldBy(ctx, j); err != nil {
		return nil, err
	}
	return d, nil
}

// Counts reads the maintained counters.
func (e *Engine) Counts(ctx context.Context, queue string) (*Counts, error) {
	if queue != "" {
		if err := sluicetype.ValidateName("queue", queue); err != nil {
			return nil, err
		}
	}
	byQueue, err := e.store.JobCountByQueue(ctx, &backend.JobCountByQueueParams{Queue: queue})
	if err != nil {
		return nil, fmt.Errorf("counts: %w", err)
	}
	c := &Counts{Queues: byQueue, Total: map[State]int64{}}
	for _, states := range byQueue {
		for s, n := range states {
			c.Total[s] += n
		}
	}
	return c, nil
}

// CountJobs counts what the filter matches in each state, one bounded
// count per state: the list under the filter shows as many (ListJobs
// keeps superseded jobs, so the counts do).
func (e *Engine) CountJobs(ctx context.Context, p CountJobsParams) (*JobCounts, error) {
	if err := p.Filter.Validate(); err != nil {
		return nil, err
	}
	limit := p.Max
	if limit == 0 {
		limit = DefaultCountJobsMax
	}
	if limit < 1 || limit > MaxCountJobsMax {
		return nil, fmt.Errorf("%w: count bound %d outside 1–%d", ErrInvalid, limit, MaxCountJobsMax)
	}
	states := AllStates
	if len(p.Filter.States) > 0 {
		states = p.Filter.States
	}
	if err := e.resolveExpiry(ctx, &p.Filter); err != nil {
		return nil, err
	}
	out := &JobCounts{States: make(map[State]int64, len(states)), Max: limit}
	for _, s := range states {
		if _, done := out.States[s]; done {
			continue
		}
		if p.Filter.ExpiresWithin != nil && !slices.Contains(p.Filter.States, s) {
			out.States[s] = 0 // no cut names it
			continue
		}
		f := p.Filter
		f.States = []State{s}
		var scan ScanReport
		q := &backend.JobCountMatchingParams{Filter: storeFilter(f), Max: limit, Scan: &scan}
		if p.Whole {
			q.Scan = nil // no budget: the store reads on to the end
		}
		n, capped, err := e.store.JobCountMatching(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("count jobs in %s: %w", s, err)
		}
		out.States[s] = n
		if scan.Bounded {
			capped = true
			if out.Scans == nil {
				out.Scans = map[State]*ScanReport{}
			}
			out.Scans[s] = &scan
		}
		if capped {
			out.Capped = append(out.Capped, s)
		}
	}
	return out, nil
}

// deadStates are the states ErrorGroups looks at by default.
var deadStates = []State{StateArchived}

// countNearSingletons sets each group's NearSingletons.
func countNearSingletons(groups []ErrorGroup) {
	for i, near := range NearSingletons(groups) {
		groups[i].NearSingletons = len(near)
	}
}

// NearSingletons says, for each of groups, which other groups sit beside
// it: the indexes, in order, of the groups of one job with the same queue
// and kind whose pattern has as many words as its own and differs from it
// in exactly one. Such a singleton is most likely the same failure with
// an id the normaliser did not recognise, so it counts toward the group
// it is near (ErrorGroup.NearSingletons is the count; singletons near one
// another count each other too). A bulk action on a group's Selector
// leaves these behind.
func NearSingletons(groups []ErrorGroup) [][]int {
	words := make([][]string, len(groups))
	for i := range groups {
		words[i] = strings.Fields(groups[i].Pattern)
	}
	out := make([][]int, len(groups))
	for i, g := range groups {
		for k, h := range groups {
			if k == i || h.Count != 1 || h.Queue != g.Queue || h.Kind != g.Kind {
				continue
			}
			if oneWordApart(words[i], words[k]) {
				out[i] = append(out[i], k)
			}
		}
	}
	return out
}

// oneWordApart reports whether a and b have as many words and differ in
// exactly one.
func oneWordApart(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	diff := 0
	for i := range a {
		if a[i] != b[i] {
			diff++
		}
	}
	return diff == 1
}

// groupSelector selects the jobs a group of f counts: f (its dates,
// tags, text and payload conditions included) narrowed to the group's
// queue, kind and pattern, so that a bulk action on the group takes what
// its row counted and no more.
func groupSelector(f Filter, g *ErrorGroup) Filter {
	sel := f
	sel.States = slices.Clone(f.States)
	sel.Queues = []string{g.Queue}
	sel.Kinds = []string{g.Kind}
	sel.ErrorPattern = g.Pattern
	sel.IDs = slices.Clone(f.IDs)
	sel.Tags = slices.Clone(f.Tags)
	sel.Payload = slices.Clone(f.Payload)
	sel.Meta = slices.Clone(f.Meta)
	return sel
}

// Queues lists queues with their counts and pause state.
func (e *Engine) Queues(ctx context.Context) ([]QueueInfo, error) {
	return e.store.QueueList(ctx)
}

// pauseQueue is PauseQueue without the Interceptor.
func (e *Engine) pauseQueue(ctx context.Context, queue string) error {
	if _, ok, err := replayed[struct{}](ctx); ok {
		return err
	}
	if err := sluicetype.ValidateName("queue", queue); err != nil {
		return err
	}
	return e.store.QueuePause(auditCtx(ctx), &backend.QueuePauseParams{Queue: queue, Actor: ActorFrom(ctx)})
}

// resumeQueue is ResumeQueue without the Interceptor.
func (e *Engine) resumeQueue(ctx context.Context, queue string) error {
	if _, ok, err := replayed[struct{}](ctx); ok {
		return err
	}
	if err := sluicetype.ValidateName("queue", queue); err != nil {
		return err
	}
	if err := e.store.QueueResume(auditCtx(ctx), &backend.QueuePauseParams{Queue: queue, Actor: ActorFrom(ctx)}); err != nil {
		return err
	}
	e.wake(queue)
	return nil
}

// act applies action a to one job through its spec, with the event the
// engine writes for it.
func (e *Engine) act(ctx context.Context, a Action, id string, p backend.JobActionParams) (*Job, error) {
	if err := sluicetype.NoSuchID("job", id); err != nil {
		return nil, err
	}
	spec, err := backend.SpecFor(a)
	if err != nil {
		return nil, err
	}
	p.ID, p.Spec = id, spec
	p.Event = backend.EventWrite{Kind: spec.Event, Actor: ActorFrom(ctx), To: spec.To, Message: p.Event.Message}
	return e.store.JobAction(auditCtx(ctx), &p)
}

// retry is Retry without the Interceptor.
func (e *Engine) retry(ctx context.Context, id string, opts RetryOptions) (*Job, error) {
	if err := sluicetype.NoSuchID("job", id); err != nil {
		return nil, err
	}
	if j, ok, err := replayed[*Job](ctx); ok {
		return j, err
	}
	p := backend.JobActionParams{Force: opts.Force, Deadline: opts.Deadline}
	if opts.Force {
		// The text names what the force passed; superseded_by is set once
		// and never changes, so reading it first is safe.
		cur, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			return nil, err
		}
		if cur.SupersededBy != "" {
			p.Event.Message = "forced: superseded by " + cur.SupersededBy
		}
	}
	j, err := e.act(ctx, ActionRetry, id, p)
	if err != nil {
		return nil, err
	}
	e.wake(j.Queue)
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: j.State})
	return j, nil
}

// cancel is Cancel without the Interceptor.
func (e *Engine) cancel(ctx context.Context, id string) (*Job, error) {
	if j, ok, err := replayed[*Job](ctx); ok {
		return j, err
	}
	j, err := e.act(ctx, ActionCancel, id, backend.JobActionParams{})
	if err != nil {
		return nil, err
	}
	if r := e.running.get(id); r != nil {
		r.lost()
	}
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: j.State})
	return j, nil
}

// deleteJob is Delete without the Interceptor.
func (e *Engine) deleteJob(ctx context.Context, id string) error {
	if _, ok, err := replayed[struct{}](ctx); ok {
		return err
	}
	if _, err := e.act(ctx, ActionDelete, id, backend.JobActionParams{}); err != nil {
		return err
	}
	e.publish(Change{Kind: ChangeJob, JobID: id, State: StateDeleted})
	return nil
}

// releaseJob is ReleaseJob without the Interceptor.
func (e *Engine) releaseJob(ctx context.Context, id string) (*Job, error) {
	if j, ok, err := replayed[*Job](ctx); ok {
		return j, err
	}
	j, err := e.act(ctx, ActionRelease, id, backend.JobActionParams{Event: backend.EventWrite{Message: "job released"}})
	if err != nil {
		return nil, err
	}
	e.wake(j.Queue)
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: j.State})
	return j, nil
}

// updatePayload is UpdatePayload without the Interceptor.
func (e *Engine) updatePayload(ctx context.Context, id string, payload json.RawMessage, version int64) (*Job, error) {
	if err := sluicetype.NoSuchID("job", id); err != nil {
		return nil, err
	}
	if j, ok, err := replayed[*Job](ctx); ok {
		return j, err
	}
	clean, err := ValidatePayload(payload, e.cfg.PayloadLimit)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	cur, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id, IncludePayload: true})
	if err != nil {
		return nil, err
	}
	if cur.Version != version {
		return nil, &VersionError{ID: id, Have: cur.Version, Want: version}
	}
	fp, err := FingerprintOf(cur.Kind, clean)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	// The store applies the edit only at this version, so cur's
	// fingerprint is the one replaced.
	var parts []string
	if d := payloadDiff(cur.Payload, clean); d != "" {
		parts = append(parts, d)
	}
	if cur.Fingerprint != fp {
		parts = append(parts, "fingerprint "+cur.Fingerprint+" → "+fp)
	}
	msg := strings.Join(parts, "; ")
	auditNote(ctx, func(r *AuditRecord) { r.Paths = changedPaths(cur.Payload, clean) })
	j, err := e.store.JobUpdatePayload(auditCtx(ctx), &backend.JobUpdatePayloadParams{
		ID: id, Payload: clean, Fingerprint: fp, Version: version,
		Event: backend.EventWrite{Kind: EventPayloadEdited, Actor: ActorFrom(ctx), Message: msg},
	})
	if err != nil {
		return nil, err
	}
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: j.State})
	return j, nil
}

// retryWithInput is RetryWithInput without the Interceptor.
func (e *Engine) retryWithInput(ctx context.Context, id string, p RetryWithInputParams) (*Job, error) {
	if err := sluicetype.NoSuchID("job", id); err != nil {
		return nil, err
	}
	if j, ok, err := replayed[*Job](ctx); ok {
		return j, err
	}
	clean, err := ValidatePayload(p.Payload, e.cfg.PayloadLimit)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	orig, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id, IncludePayload: true})
	if err != nil {
		return nil, err
	}
	newID := p.ID
	if newID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		newID = id + "~retry~" + hex.EncodeToString(b[:])
	}
	if err := ValidateJobID(newID); err != nil {
		return nil, err
	}
	fp, err := FingerprintOf(orig.Kind, clean)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	actor := ActorFrom(ctx)
	auditNote(ctx, func(r *AuditRecord) { r.Paths = changedPaths(orig.Payload, clean); r.Target = newID })
	j, err := e.store.JobRetryCopy(auditCtx(ctx), &backend.JobRetryCopyParams{
		ID: id, NewID: newID, Payload: clean, Fingerprint: fp,
		OriginalEvent: backend.EventWrite{Kind: EventRetried, Actor: actor, Message: "retried with new input as " + newID},
		CopyEvent:     backend.EventWrite{Kind: EventRetried, Actor: actor, To: StateAvailable, Message: "retry of " + id + " with new input"},
	})
	if err != nil {
		return nil, err
	}
	e.wake(j.Queue)
	e.publish(Change{Kind: ChangeJob, JobID: j.ID, Queue: j.Queue, State: j.State})
	return j, nil
}

// apply is Apply without the Interceptor.
func (e *Engine) apply(ctx context.Context, action Action, ids []string) ([]ActionResult, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no ids given", ErrInvalid)
	}
	if len(ids) > MaxApplyIDs {
		return nil, fmt.Errorf("%w: %d ids, at most %d per call; use a bulk operation", ErrInvalid, len(ids), MaxApplyIDs)
	}
	do, err := e.actionFunc(action)
	if err != nil {
		return nil, err
	}
	out := make([]ActionResult, len(ids))
	for i, id := range ids {
		out[i] = ActionResult{ID: id, OK: true}
		if err := do(withIdempotencyStep(ctx, applyStep(i)), id); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ErrIdempotencyInFlight) {
				return nil, err
			}
			out[i] = ActionResult{ID: id, Error: err.Error(), Reason: ReasonCode(err)}
		}
	}
	// One record for the call, after its writes (each id is its own):
	// how many ids, and how many of them were refused.
	refused := 0
	for _, r := range out {
		if !r.OK {
			refused++
		}
	}
	auditNote(ctx, func(r *AuditRecord) {
		r.IDs = slices.Clone(ids)
		if len(ids) == 1 {
			r.JobID, r.IDs = ids[0], nil
		}
		if refused > 0 {
			r.Detail = fmt.Sprintf("%d of %d refused", refused, len(ids))
		}
	})
	return out, nil
}

func (e *Engine) actionFunc(a Action) (func(context.Context, string) error, error) {
	switch a {
	case ActionRetry:
		return func(ctx context.Context, id string) error { _, err := e.Retry(ctx, id, RetryOptions{}); return err }, nil
	case ActionCancel:
		return func(ctx context.Context, id string) error { _, err := e.Cancel(ctx, id); return err }, nil
	case ActionDelete:
		return e.Delete, nil
	case ActionRelease:
		return func(ctx context.Context, id string) error { _, err := e.ReleaseJob(ctx, id); return err }, nil
	}
	return nil, fmt.Errorf("%w: unknown action %q (retry, cancel, delete, release)", ErrInvalid, a)
}

// bulk is Bulk without the Interceptor.
func (e *Engine) bulk(ctx context.Context, p BulkParams) (*BulkResult, error) {
	if p.Plan != nil {
		if err := checkPlan(&p); err != nil {
			return nil, err
		}
	}
	spec, err := backend.SpecFor(p.Action)
	if err != nil {
		return nil, err
	}
	if p.Selector.IsEmpty() {
		return nil, fmt.Errorf("%w: empty selector: a bulk action needs at least one condition", ErrInvalid)
	}
	if err := p.Selector.Validate(); err != nil {
		return nil, err
	}
	if p.Selector.ExpiresWithin != nil {
		// An operation's selector is kept and run later, by any process:
		// a window that moves with the clock would take other jobs than
		// its preview counted.
		return nil, fmt.Errorf("%w: expires< lists and counts, it does not select for a bulk action: mark the jobs, or select them by finalized<", ErrInvalid)
	}
	if p.RatePerSecond < 0 {
		return nil, fmt.Errorf("%w: negative rate", ErrInvalid)
	}
	if !p.DryRun && p.Plan == nil && p.Action.Destructive() {
		return nil, fmt.Errorf("%w: a bulk %s runs only from a dry run's plan: dry-run it first (dry_run), check what it matched, then run it with the plan the dry run returned", ErrInvalid, p.Action)
	}
	if err := e.checkStartAt(ctx, &p); err != nil {
		return nil, err
	}
	if p.Canary != nil {
		c := *p.Canary
		p.Canary = &c
		if err := checkCanary(&p); err != nil {
			return nil, err
		}
	}
	if !p.DryRun {
		if op, ok, err := replayed[*Operation](ctx); ok {
			if err != nil {
				return nil, err
			}
			// The recorded operation is the store's, as persisted: lift its
			// cutoff as the first answer did.
			return &BulkResult{Matched: op.Matched, Estimated: op.Matched >= DryRunExactLimit, Operation: liftCutoff(op)}, nil
		}
	}
	if p.Plan != nil && !p.DryRun {
		if p.Plan, err = e.appliedPlan(ctx, p.Plan); err != nil {
			return nil, err
		}
	}
	sel, any := spec.Narrow(p.Selector)
	res := &BulkResult{}
	var cutoff *time.Time
	switch {
	case p.Plan != nil:
		c := p.Plan.Cutoff
		cutoff = &c
	case p.DryRun:
		// The preview's store time, read before the count, which counts
		// as of it: the run given the plan takes what the count saw, less
		// what left its state since. The one window: a state change whose
		// store time precedes the cutoff but whose transaction commits
		// after the count (the length of one write transaction) is taken
		// without having been counted; no store call closes it today.
		now, err := e.store.Now(ctx)
		if err != nil {
			return nil, fmt.Errorf("bulk: store clock: %w", err)
		}
		cutoff = &now
	}
	if any {
		n, capped, err := e.store.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: storeFilter(sel), ExcludeSuperseded: !sel.IncludeSuperseded,
			Max: DryRunExactLimit, AsOf: cutoff})
		if err != nil {
			return nil, fmt.Errorf("bulk count: %w", err)
		}
		res.Matched, res.Estimated = n, capped
	}
	if p.DryRun {
		if any {
			res.Plan = &BulkPlan{Action: p.Action, Selector: sel, Cutoff: *cutoff}
		}
		if any && res.Matched > 0 {
			// Newest first from just past the cutoff: the sample shows
			// only jobs the plan covers.
			after := &Cursor{At: cutoff.Add(time.Nanosecond), Dir: CursorNext}
			sample, err := e.store.JobListPage(ctx, &backend.JobListPageParams{Filter: storeFilter(sel), ExcludeSuperseded: !sel.IncludeSuperseded,
				After: after, Limit: BulkSampleSize})
			if err != nil {
				return nil, fmt.Errorf("bulk sample: %w", err)
			}
			res.Sample = sample
			if spec.MayTakeUniqueKey() {
				held, err := e.store.JobCountUniqueHeld(ctx, &backend.JobCountUniqueHeldParams{Filter: storeFilter(sel),
					ExcludeSuperseded: !sel.IncludeSuperseded, AsOf: cutoff, To: spec.To})
				if err != nil {
					return nil, fmt.Errorf("bulk unique keys: %w", err)
				}
				res.UniqueHeld, res.UniqueHolder = held.Held, held.Holder
			}
		}
		return res, nil
	}
	v7, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	stored := p.Selector
	if p.Plan != nil {
		stored = p.Plan.Selector
		c := p.Plan.Cutoff.UTC()
		stored.PlanCutoff = &c
	}
	var startAt *time.Time
	if p.StartAt != nil {
		// The plan's cutoff, not the start, bounds what the run takes:
		// a run that starts hours after its preview still takes only
		// the jobs the preview counted.
		t := p.StartAt.UTC()
		startAt = &t
	}
	auditNote(ctx, func(r *AuditRecord) {
		r.Operation, r.Applied, r.Selector, r.Count = v7.String(), p.Action, stored.String(), res.Matched
		r.PlanCutoff, r.StartAt = stored.PlanCutoff, startAt
	})
	op, err := e.store.OperationInsert(auditCtx(ctx), &backend.OperationInsertParams{
		ID: v7.String(), Action: p.Action, Selector: stored,
		CreatedBy: ActorFrom(ctx), Matched: res.Matched, Rate: p.RatePerSecond, StartAt: startAt, Canary: canaryOf(p.Canary),
	})
	if err != nil {
		return nil, fmt.Errorf("bulk: %w", err)
	}
	res.Operation = liftCutoff(op)
	e.wakeOperations()
	e.publish(Change{Kind: ChangeOperation, Operation: op.ID})
	return res, nil
}

// checkPlan takes a run's action and selector from its plan, or checks
// that those given are the plan's: a plan previewed for one selection
// must not run another.
func checkPlan(p *BulkParams) error {
	pl := p.Plan
	if pl.Cutoff.IsZero() {
		return fmt.Errorf("%w: plan: no cutoff", ErrInvalid)
	}
	if err := sluicetype.CheckQueryTime(pl.Cutoff); err != nil {
		return fmt.Errorf("%w: plan: %v", ErrInvalid, err)
	}
	if err := pl.Selector.Validate(); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if p.Action == "" {
		p.Action = pl.Action
	}
	if p.Action != pl.Action {
		return fmt.Errorf("%w: plan is for %s, not %s", ErrInvalid, pl.Action, p.Action)
	}
	spec, err := backend.SpecFor(pl.Action)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	narrowed, any := spec.Narrow(pl.Selector)
	if !any || len(pl.Selector.States) == 0 || narrowed.String() != pl.Selector.String() {
		return fmt.Errorf("%w: plan: its selector is not narrowed to the states %s changes; use a dry run's plan", ErrInvalid, pl.Action)
	}
	if p.Selector.IsEmpty() {
		p.Selector = pl.Selector
		return nil
	}
	if given, _ := spec.Narrow(p.Selector); given.String() != pl.Selector.String() {
		return fmt.Errorf("%w: plan is for the selection %q, not %q", ErrInvalid, pl.Selector.String(), given.String())
	}
	return nil
}

// liftCutoff moves a plan's cutoff from the persisted selector into
// Operation.Cutoff (the operation's creation when it has none), so that
// callers see the selector they asked for and the cutoff it runs with.
func liftCutoff(op *Operation) *Operation {
	if op == nil {
		return nil
	}
	out := *op
	if c := op.Selector.PlanCutoff; c != nil {
		t := *c
		out.Cutoff = &t
		out.Selector.PlanCutoff = nil
	} else if !op.CreatedAt.IsZero() {
		t := op.CreatedAt
		out.Cutoff = &t
	}
	return &out
}

// Operation returns one bulk operation.
func (e *Engine) Operation(ctx context.Context, id string) (*Operation, error) {
	if err := sluicetype.NoSuchID("operation", id); err != nil {
		return nil, err
	}
	op, err := e.store.OperationGet(ctx, &backend.OperationGetParams{ID: id})
	return liftCutoff(op), err
}

// Operations pages bulk operations newest first.
func (e *Engine) Operations(ctx context.Context, limit int, cursor string) (*OperationPage, error) {
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("%w: limit %d outside 1–%d", ErrInvalid, limit, MaxListLimit)
	}
	var after *Cursor
	if cursor != "" {
		c, err := DecodeOperationCursor(cursor)
		if err != nil {
			return nil, err
		}
		after = &Cursor{At: c.CreatedAt, ID: c.ID}
	}
	ops, err := e.store.OperationList(ctx, &backend.OperationListParams{After: after, Limit: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("operations: %w", err)
	}
	for i, op := range ops {
		ops[i] = liftCutoff(op)
	}
	page := &OperationPage{Operations: ops}
	if len(ops) > limit {
		page.Operations = ops[:limit]
		last := ops[limit-1]
		page.Next = OperationCursor{CreatedAt: last.CreatedAt, ID: last.ID}.Encode()
	}
	return page, nil
}

// cancelOperation is CancelOperation without the Interceptor.
func (e *Engine) cancelOperation(ctx context.Context, id string) (*Operation, error) {
	if err := sluicetype.NoSuchID("operation", id); err != nil {
		return nil, err
	}
	if op, ok, err := replayed[*Operation](ctx); ok {
		return liftCutoff(op), err
	}
	msg := "cancelled"
	if a := ActorFrom(ctx); a != "" {
		msg = "cancelled by " + a
	}
	op, err := e.store.OperationCancel(auditCtx(ctx), &backend.OperationCancelParams{ID: id, Message: msg})
	if err != nil {
		return nil, err
	}
	e.publish(Change{Kind: ChangeOperation, Operation: op.ID})
	return liftCutoff(op), nil
}

// Quarantine lists quarantined and probationary fingerprints.
func (e *Engine) Quarantine(ctx context.Context) ([]*Fingerprint, error) {
	fps, err := e.store.FingerprintList(ctx, &backend.FingerprintListParams{Limit: 1000})
	if err != nil {
		return nil, err
	}
	return fps, nil
}

// releaseFingerprint is ReleaseFingerprint without the Interceptor.
func (e *Engine) releaseFingerprint(ctx context.Context, fingerprint string) (int, error) {
	if err := sluicetype.NoSuchID("fingerprint", fingerprint); err != nil {
		return 0, err
	}
	if n, ok, err := replayed[int](ctx); ok {
		return n, err
	}
	spec, err := backend.SpecFor(ActionRelease)
	if err != nil {
		return 0, err
	}
	n, err := e.store.FingerprintRelease(auditCtx(ctx), &backend.FingerprintReleaseParams{Fingerprint: fingerprint, Spec: spec,
		Event: backend.EventWrite{Kind: spec.Event, Actor: ActorFrom(ctx), To: spec.To, Message: "fingerprint released"}})
	if err != nil {
		return 0, err
	}
	e.wakeAll()
	e.publish(Change{Kind: ChangeJob, State: StateAvailable})
	return n, nil
}

// capabilityNames is the wire form of a capability list.
func capabilityNames(cs []backend.Capability) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// BulkSelector narrows a selector to the states its action changes. It
// reports false when none is left or the action is unknown.
func BulkSelector(a sluicetype.Action, f sluicetype.Filter) (sluicetype.Filter, bool) {
	spec, err := backend.SpecFor(a)
	if err != nil {
		return f, false
	}
	return spec.Narrow(f)
}

// ActionFrom is the states a job must be in for a to act on it, from the
// transition table: a screen refuses an action the job's state does not
// take before it asks to confirm it.
func ActionFrom(a Action) ([]State, error) {
	spec, err := backend.SpecFor(a)
	if err != nil {
		return nil, err
	}
	return slices.Clone(spec.From), nil
}
