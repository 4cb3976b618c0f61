package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// fakeCtl is an in-memory engine.Control (and Enqueuer) for the server's
// tests: small, deterministic, and observable (it records the actor of
// each mutation and counts the mutations it applied).
type fakeCtl struct {
	mu        sync.Mutex
	jobs      map[string]*engine.Job
	ops       map[string]*engine.Operation
	opPolls   map[string]int
	paused    map[string]bool
	fps       map[string]*engine.Fingerprint
	subs      []chan engine.Change
	mutations int
	actors    []string
	// down, when set, is returned by every call: the store is down.
	down error
	// gate, when set, holds every mutation until it is closed.
	gate chan struct{}
}

func newFake() *fakeCtl {
	f := &fakeCtl{
		jobs: map[string]*engine.Job{}, ops: map[string]*engine.Operation{}, opPolls: map[string]int{},
		paused: map[string]bool{}, fps: map[string]*engine.Fingerprint{},
	}
	now := time.Date(2026, 8, 31, 12, 0, 0, 0, time.UTC)
	add := func(id, queue string, st engine.State, fp string) {
		f.jobs[id] = &engine.Job{
			ID: id, Queue: queue, Kind: "charge", State: st, Version: 1, Fingerprint: fp,
			Payload: json.RawMessage(`{"customer":42,"secret":"s3cr3t"}`), Metadata: json.RawMessage(`{"tenant":"acme"}`),
			CreatedAt: now, StateChangedAt: now, ScheduledAt: now, MaxAttempts: 1, Attempt: 1,
			Errors: []engine.AttemptError{{Attempt: 1, At: now, Message: "card declined"}},
		}
	}
	for i := range 5 {
		add(fmt.Sprintf("JOB_%d", i+1), "billing", engine.StateArchived, "fp-ok")
	}
	add("EMAIL_1", "email", engine.StateArchived, "fp-ok")
	add("WAIT_1", "billing", engine.StateScheduled, "fp-ok")
	add("PILL_1", "billing", engine.StateArchived, "fp-pill")
	add("HELD_1", "billing", engine.StateQuarantined, "fp-pill")
	f.fps["fp-pill"] = &engine.Fingerprint{Fingerprint: "fp-pill", Kind: "charge", Status: "quarantined", Held: 1}
	return f
}

func (f *fakeCtl) mutate(ctx context.Context) error {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return f.down
	}
	f.mutations++
	f.actors = append(f.actors, engine.ActorFrom(ctx))
	return nil
}

func (f *fakeCtl) lastActor() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.actors) == 0 {
		return ""
	}
	return f.actors[len(f.actors)-1]
}

func (f *fakeCtl) read() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

func (f *fakeCtl) publish(c engine.Change) {
	for _, s := range f.subs {
		select {
		case s <- c:
		default:
		}
	}
}

func copyJob(j *engine.Job, payload bool) *engine.Job {
	c := *j
	if !payload {
		c.Payload = nil
	}
	return &c
}

func (f *fakeCtl) matches(fl engine.Filter, j *engine.Job) bool {
	return (len(fl.States) == 0 || slices.Contains(fl.States, j.State)) &&
		(len(fl.Queues) == 0 || slices.Contains(fl.Queues, j.Queue)) &&
		(len(fl.Kinds) == 0 || slices.Contains(fl.Kinds, j.Kind)) &&
		(len(fl.IDs) == 0 || slices.Contains(fl.IDs, j.ID))
}

func (f *fakeCtl) sortedJobs() []*engine.Job {
	out := make([]*engine.Job, 0, len(f.jobs))
	for _, j := range f.jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

func (f *fakeCtl) Meta(ctx context.Context) (*engine.Meta, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	return &engine.Meta{Backend: "fake", Role: engine.RoleAdmin, Actor: engine.ActorFrom(ctx)}, nil
}

func (f *fakeCtl) ListJobs(_ context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	if p.Limit < 0 || p.Limit > engine.MaxListLimit {
		return nil, fmt.Errorf("%w: limit %d", engine.ErrInvalid, p.Limit)
	}
	if p.Cursor != "" {
		if _, err := engine.DecodeCursor(p.Cursor); err != nil {
			return nil, err
		}
	}
	if err := p.Filter.Validate(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	page := &engine.JobPage{}
	for _, j := range f.sortedJobs() {
		if f.matches(p.Filter, j) {
			page.Jobs = append(page.Jobs, copyJob(j, false))
		}
	}
	return page, nil
}

func (f *fakeCtl) GetJob(_ context.Context, id string, includePayload bool) (*engine.JobDetail, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	return &engine.JobDetail{Job: copyJob(j, includePayload), Timeline: []engine.Event{{JobID: id, Kind: engine.EventEnqueued}}}, nil
}

func (f *fakeCtl) Counts(_ context.Context, queue string) (*engine.Counts, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &engine.Counts{Queues: map[string]map[engine.State]int64{}, Total: map[engine.State]int64{}}
	for _, j := range f.jobs {
		if queue != "" && j.Queue != queue {
			continue
		}
		if c.Queues[j.Queue] == nil {
			c.Queues[j.Queue] = map[engine.State]int64{}
		}
		c.Queues[j.Queue][j.State]++
		c.Total[j.State]++
	}
	return c, nil
}

func (f *fakeCtl) CountJobs(_ context.Context, p engine.CountJobsParams) (*engine.JobCounts, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &engine.JobCounts{States: map[engine.State]int64{}, Max: engine.DefaultCountJobsMax}
	for _, j := range f.jobs {
		if f.matches(p.Filter, j) {
			out.States[j.State]++
		}
	}
	return out, nil
}

func (f *fakeCtl) ErrorGroups(_ context.Context, fl engine.Filter) ([]engine.ErrorGroup, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	return []engine.ErrorGroup{{Queue: "billing", Kind: "charge", Pattern: "card declined", Count: 5,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"}}}}, nil
}

func (f *fakeCtl) Queues(context.Context) ([]engine.QueueInfo, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return []engine.QueueInfo{{Name: "billing", Paused: f.paused["billing"]}, {Name: "email", Paused: f.paused["email"]}}, nil
}

func (f *fakeCtl) setPaused(ctx context.Context, q string, p bool) error {
	if err := f.mutate(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused[q] = p
	return nil
}

func (f *fakeCtl) PauseQueue(ctx context.Context, q string) error  { return f.setPaused(ctx, q, true) }
func (f *fakeCtl) ResumeQueue(ctx context.Context, q string) error { return f.setPaused(ctx, q, false) }

// transition moves a job from one of from to to.
func (f *fakeCtl) transition(ctx context.Context, id string, to engine.State, from ...engine.State) (*engine.Job, error) {
	if err := f.mutate(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	if !slices.Contains(from, j.State) {
		return nil, fmt.Errorf("job %s is %s: %w", id, j.State, engine.ErrWrongState)
	}
	if to == engine.StateAvailable && j.State != engine.StateQuarantined && f.fps[j.Fingerprint] != nil {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrQuarantined)
	}
	j.State = to
	j.Version++
	f.publish(engine.Change{Kind: engine.ChangeJob, JobID: id, Queue: j.Queue, State: to})
	return copyJob(j, false), nil
}

func (f *fakeCtl) Retry(ctx context.Context, id string, _ engine.RetryOptions) (*engine.Job, error) {
	return f.transition(ctx, id, engine.StateAvailable, engine.StateArchived, engine.StateCancelled)
}

func (f *fakeCtl) Cancel(ctx context.Context, id string) (*engine.Job, error) {
	return f.transition(ctx, id, engine.StateCancelled, engine.StateScheduled, engine.StateAvailable)
}

// Signal counts as a mutation and refuses what the engine refuses: a
// missing job, a terminal one. It buffers nothing: the server's part is
// the route, the roles and the reply.
func (f *fakeCtl) Signal(ctx context.Context, id, name string, payload json.RawMessage) (*engine.Signal, error) {
	if err := f.mutate(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	if j.State.Terminal() {
		return nil, fmt.Errorf("job %s is %s: %w", id, j.State, engine.ErrWrongState)
	}
	return &engine.Signal{JobID: id, Name: name, Seq: int64(f.mutations), Payload: payload, SentAt: j.StateChangedAt}, nil
}

func (f *fakeCtl) ReleaseJob(ctx context.Context, id string) (*engine.Job, error) {
	return f.transition(ctx, id, engine.StateAvailable, engine.StateQuarantined)
}

func (f *fakeCtl) Delete(ctx context.Context, id string) error {
	if err := f.mutate(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[id]; !ok {
		return fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	delete(f.jobs, id)
	return nil
}

func (f *fakeCtl) UpdatePayload(ctx context.Context, id string, payload json.RawMessage, version int64) (*engine.Job, error) {
	clean, err := engine.ValidatePayload(payload, 1<<20)
	if err != nil {
		return nil, err
	}
	if err := f.mutate(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	if j.Version != version {
		return nil, fmt.Errorf("job %s is at version %d: %w", id, j.Version, engine.ErrConflict)
	}
	j.Payload = clean
	j.Version++
	return copyJob(j, true), nil
}

func (f *fakeCtl) RetryWithInput(ctx context.Context, id string, p engine.RetryWithInputParams) (*engine.Job, error) {
	clean, err := engine.ValidatePayload(p.Payload, 1<<20)
	if err != nil {
		return nil, err
	}
	if err := f.mutate(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	orig, ok := f.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	nid := p.ID
	if nid == "" {
		nid = id + "~retry~00000000"
	}
	n := copyJob(orig, true)
	n.ID, n.Payload, n.State, n.RetryOf, n.Version = nid, clean, engine.StateAvailable, id, 1
	f.jobs[nid] = n
	orig.SupersededBy = nid
	return copyJob(n, false), nil
}

func (f *fakeCtl) Apply(ctx context.Context, a engine.Action, ids []string) ([]engine.ActionResult, error) {
	if len(ids) == 0 || len(ids) > engine.MaxApplyIDs {
		return nil, fmt.Errorf("%w: %d ids", engine.ErrInvalid, len(ids))
	}
	var do func(string) error
	switch a {
	case engine.ActionRetry:
		do = func(id string) error { _, err := f.Retry(ctx, id, engine.RetryOptions{}); return err }
	case engine.ActionCancel:
		do = func(id string) error { _, err := f.Cancel(ctx, id); return err }
	case engine.ActionRelease:
		do = func(id string) error { _, err := f.ReleaseJob(ctx, id); return err }
	case engine.ActionDelete:
		do = func(id string) error { return f.Delete(ctx, id) }
	default:
		return nil, fmt.Errorf("%w: unknown action %q", engine.ErrInvalid, a)
	}
	out := make([]engine.ActionResult, len(ids))
	for i, id := range ids {
		out[i] = engine.ActionResult{ID: id, OK: true}
		if err := do(id); err != nil {
			out[i] = engine.ActionResult{ID: id, Error: err.Error(), Reason: engine.ReasonCode(err)}
		}
	}
	return out, nil
}

func (f *fakeCtl) Bulk(ctx context.Context, p engine.BulkParams) (*engine.BulkResult, error) {
	if _, err := backend.SpecFor(p.Action); err != nil {
		return nil, fmt.Errorf("%w: unknown action %q", engine.ErrInvalid, p.Action)
	}
	if p.Selector.IsEmpty() {
		return nil, fmt.Errorf("%w: empty selector", engine.ErrInvalid)
	}
	if err := p.Selector.Validate(); err != nil {
		return nil, err
	}
	sel, _ := engine.BulkSelector(p.Action, p.Selector)
	if !p.DryRun {
		if err := f.mutate(ctx); err != nil {
			return nil, err
		}
	} else if err := f.read(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &engine.BulkResult{}
	for _, j := range f.sortedJobs() {
		if f.matches(sel, j) {
			res.Matched++
			if len(res.Sample) < engine.BulkSampleSize {
				res.Sample = append(res.Sample, copyJob(j, false))
			}
		}
	}
	if p.DryRun {
		return res, nil
	}
	res.Sample = nil
	id := fmt.Sprintf("op-%d", len(f.ops)+1)
	op := &engine.Operation{ID: id, Action: p.Action, Selector: p.Selector, Status: engine.OperationPending,
		CreatedBy: engine.ActorFrom(ctx), Matched: res.Matched, CreatedAt: time.Now().UTC()}
	f.ops[id] = op
	cp := *op
	res.Operation = &cp
	return res, nil
}

// Operation reports a new operation running at the first poll and runs
// it to completion at the second.
func (f *fakeCtl) Operation(_ context.Context, id string) (*engine.Operation, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	op, ok := f.ops[id]
	if !ok {
		return nil, fmt.Errorf("operation %s: %w", id, engine.ErrNotFound)
	}
	f.opPolls[id]++
	switch {
	case op.Status == engine.OperationPending:
		op.Status = engine.OperationRunning
	case op.Status == engine.OperationRunning && f.opPolls[id] > 1:
		sel, _ := engine.BulkSelector(op.Action, op.Selector)
		for _, j := range f.sortedJobs() {
			if f.matches(sel, j) {
				if op.Action == engine.ActionRetry {
					j.State = engine.StateAvailable
				}
				op.Processed++
				op.Succeeded++
			}
		}
		op.Status = engine.OperationCompleted
	}
	cp := *op
	return &cp, nil
}

func (f *fakeCtl) Operations(_ context.Context, limit int, cursor string) (*engine.OperationPage, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	if cursor != "" {
		if _, err := engine.DecodeOperationCursor(cursor); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	page := &engine.OperationPage{}
	for _, op := range f.ops {
		cp := *op
		page.Operations = append(page.Operations, &cp)
	}
	sort.Slice(page.Operations, func(a, b int) bool { return page.Operations[a].ID > page.Operations[b].ID })
	return page, nil
}

func (f *fakeCtl) CancelOperation(ctx context.Context, id string) (*engine.Operation, error) {
	if err := f.mutate(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	op, ok := f.ops[id]
	if !ok {
		return nil, fmt.Errorf("operation %s: %w", id, engine.ErrNotFound)
	}
	if op.Status != engine.OperationPending && op.Status != engine.OperationRunning {
		return nil, fmt.Errorf("operation %s is %s: %w", id, op.Status, engine.ErrWrongState)
	}
	op.Status = engine.OperationCancelled
	cp := *op
	return &cp, nil
}

func (f *fakeCtl) Quarantine(context.Context) ([]*engine.Fingerprint, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*engine.Fingerprint
	for _, fp := range f.fps {
		cp := *fp
		out = append(out, &cp)
	}
	return out, nil
}

func (f *fakeCtl) ReleaseFingerprint(ctx context.Context, fp string) (int, error) {
	if err := f.mutate(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.fps[fp]; !ok {
		return 0, fmt.Errorf("fingerprint %s: %w", fp, engine.ErrNotFound)
	}
	delete(f.fps, fp)
	n := 0
	for _, j := range f.jobs {
		if j.Fingerprint == fp && j.State == engine.StateQuarantined {
			j.State = engine.StateAvailable
			n++
		}
	}
	return n, nil
}

// publishToOne waits for one subscription, then sends it the changes in
// order, as the engine's stream would.
func (f *fakeCtl) publishToOne(t *testing.T, cs ...engine.Change) {
	t.Helper()
	f.waitSubscriptions(t, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		f.publish(c)
	}
}

// waitSubscriptions waits until the fake has n subscriptions open, and
// fails t when that has not happened within 5 s.
func (f *fakeCtl) waitSubscriptions(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		have := len(f.subs)
		f.mu.Unlock()
		if have == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions open, want %d", have, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fakeCtl) Subscribe(ctx context.Context) (<-chan engine.Change, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	in := make(chan engine.Change, 16)
	f.mu.Lock()
	f.subs = append(f.subs, in)
	f.mu.Unlock()
	out := make(chan engine.Change)
	go func() {
		defer close(out)
		defer func() {
			f.mu.Lock()
			f.subs = slices.DeleteFunc(f.subs, func(c chan engine.Change) bool { return c == in })
			f.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-in:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (f *fakeCtl) EnqueueMany(ctx context.Context, ps []engine.EnqueueParams) ([]engine.EnqueueResult, error) {
	if err := f.mutate(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]engine.EnqueueResult, len(ps))
	for i, p := range ps {
		if p.Kind == "" {
			out[i].Err = fmt.Errorf("%w: kind required", engine.ErrInvalid)
			continue
		}
		if p.Kind == "pill" {
			out[i].Err = fmt.Errorf("job %s: %w", p.ID, engine.ErrQuarantined)
			continue
		}
		id := p.ID
		if id == "" {
			id = fmt.Sprintf("new-%d", len(f.jobs))
		}
		if j, ok := f.jobs[id]; ok {
			out[i] = engine.EnqueueResult{Job: copyJob(j, false), Existing: true}
			continue
		}
		q := p.Queue
		if q == "" {
			q = "default"
		}
		j := &engine.Job{ID: id, Queue: q, Kind: p.Kind, Payload: p.Payload, State: engine.StateAvailable, Version: 1, Timeout: p.Timeout}
		f.jobs[id] = j
		out[i] = engine.EnqueueResult{Job: copyJob(j, false)}
	}
	return out, nil
}

// state reads a job's state; "" when it is gone.
func (f *fakeCtl) state(id string) engine.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	if j, ok := f.jobs[id]; ok {
		return j.State
	}
	return ""
}

var (
	_ engine.Control = (*fakeCtl)(nil)
	_ Enqueuer       = (*fakeCtl)(nil)
)
