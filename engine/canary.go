package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// A canary run (BulkParams.Canary) is a bulk retry that tests the fix
// before it bets on it. Its stages, kept with the operation so that a
// runner taking it over after a restart resumes where it was:
//
//   - sample: the engine picks Size jobs spread evenly across the
//     selection (by the order the preview lists them, newest death first)
//     and redrives them one by one, recording how far it got;
//   - waiting: it reads the sample's outcomes until none is running or
//     the wait's deadline (the store's clock) passes, then goes on only if
//     at least MinSuccess of the sample succeeded, else halts;
//   - watching: the rest is redriven by the operation's batches, each at
//     most a quarter of the window, and the store appends each batch's
//     ids to the window in the batch's transaction. Before each batch the
//     engine reads the window's outcomes and halts when more than
//     HaltFailureRate of it failed again; it takes a batch only while the
//     window's jobs still running and the batch's fit in half the window,
//     so it never runs more than half a window ahead of what it has seen.
//
// A halted operation is claimed by no runner; ResumeOperation sets it
// pending again watching a fresh window, CancelOperation ends it.

// checkCanary fills a canary request's defaults and refuses one no run
// can honour.
func checkCanary(p *BulkParams) error {
	c := p.Canary
	if c == nil {
		return nil
	}
	if p.Action != ActionRetry {
		return fmt.Errorf("%w: a canary runs only with a retry, not %s", ErrInvalid, p.Action)
	}
	if p.DryRun {
		return nil
	}
	if c.Size < 1 || c.Size > sluicetype.MaxCanarySize {
		return fmt.Errorf("%w: canary size %d outside 1–%d", ErrInvalid, c.Size, sluicetype.MaxCanarySize)
	}
	if c.MinSuccess == 0 {
		c.MinSuccess = sluicetype.DefaultCanaryMinSuccess
	}
	if c.HaltFailureRate == 0 {
		c.HaltFailureRate = sluicetype.DefaultHaltFailureRate
	}
	if c.Window == 0 {
		c.Window = sluicetype.DefaultCanaryWindow
	}
	if c.Timeout == 0 {
		c.Timeout = sluicetype.DefaultCanaryTimeout
	}
	switch {
	case c.MinSuccess < 0 || c.MinSuccess > 1 || math.IsNaN(c.MinSuccess):
		return fmt.Errorf("%w: canary minimum success %v outside 0–1", ErrInvalid, c.MinSuccess)
	case c.HaltFailureRate <= 0 || c.HaltFailureRate >= 1 || math.IsNaN(c.HaltFailureRate):
		return fmt.Errorf("%w: halt failure rate %v outside 0–1 (exclusive)", ErrInvalid, c.HaltFailureRate)
	case c.Window < 4 || c.Window > sluicetype.MaxCanarySize:
		return fmt.Errorf("%w: canary window %d outside 4–%d", ErrInvalid, c.Window, sluicetype.MaxCanarySize)
	case c.Timeout < time.Second || c.Timeout > 24*time.Hour:
		return fmt.Errorf("%w: canary timeout %s outside 1s–24h", ErrInvalid, c.Timeout)
	}
	return nil
}

// canaryOf is a canary run's first state: the sample is still to pick.
func canaryOf(p *sluicetype.CanaryParams) *sluicetype.Canary {
	if p == nil {
		return nil
	}
	return &sluicetype.Canary{CanaryParams: *p, Stage: sluicetype.CanarySample}
}

// canaryRun is one runner's hold on a canary operation.
type canaryRun struct {
	e      *Engine
	lease  *backend.OperationLease
	op     *Operation
	spec   backend.ActionSpec
	sel    Filter
	cutoff time.Time
	event  backend.EventWrite
	// written is when the state was last written: a wait writes again
	// (which extends the lease) only on news or after a third of the
	// lease.
	written time.Time
}

// errCanaryStop ends a run quietly: the operation halted, was cancelled,
// or another runner took it.
var errCanaryStop = errors.New("canary run stops")

// ended is RunOperation's answer to a stage's error: none for a run
// that stopped on purpose (halted, cancelled, or taken over).
func (r *canaryRun) ended(err error) error {
	if errors.Is(err, errCanaryStop) {
		r.e.wakeAll()
		return nil
	}
	return err
}

// batch is the most jobs one batch of the watching stage redrives.
func (r *canaryRun) batch() int { return max(1, r.op.Canary.Window/4) }

// set writes c (halting with reason when it is not ""), fenced on the
// lease. A lost lease or an operation no longer running is errCanaryStop.
func (r *canaryRun) set(ctx context.Context, c *sluicetype.Canary, reason string) error {
	op, err := r.e.store.OperationCanarySet(ctx, &backend.OperationCanarySetParams{
		ID: r.op.ID, Holder: r.lease.Holder, Fence: r.lease.Fence, Canary: c,
		Halt: reason != "", Error: reason, TTL: r.e.operationLeaseTTL(),
	})
	if errors.Is(err, ErrLeaseLost) {
		return errCanaryStop
	}
	if err != nil {
		return fmt.Errorf("operation %s: canary: %w", r.op.ID, err)
	}
	r.op = liftCutoff(op)
	r.written = time.Now()
	r.e.publish(Change{Kind: ChangeOperation, Operation: op.ID})
	if reason != "" {
		r.e.log.Info("canary run halted", "operation", op.ID, "reason", reason)
		return errCanaryStop
	}
	return nil
}

// halt halts the run with reason.
func (r *canaryRun) halt(ctx context.Context, c *sluicetype.Canary, reason string) error {
	c.Stage, c.Reason = sluicetype.CanaryHalted, reason
	return r.set(ctx, c, reason)
}

// state is a copy of the operation's canary state to change and write.
func (r *canaryRun) state() *sluicetype.Canary {
	c := *r.op.Canary
	return &c
}

// prelude runs the sample and waiting stages, as far as the persisted
// stage says they are left; it returns nil once the run goes on watching.
func (r *canaryRun) prelude(ctx context.Context) error {
	if r.op.Canary.Stage == sluicetype.CanarySample {
		if err := r.sample(ctx); err != nil {
			return err
		}
	}
	if r.op.Canary.Stage == sluicetype.CanaryWaiting {
		return r.wait(ctx)
	}
	return nil
}

// sample picks the sample once (a runner taking over keeps the one
// recorded) and redrives what of it is left.
func (r *canaryRun) sample(ctx context.Context) error {
	c := r.state()
	if c.Sample == nil {
		ids, err := r.pick(ctx, c.Size)
		if err != nil {
			return err
		}
		c.Sample, c.SampleSize, c.SampleDone = ids, len(ids), 0
		if c.Sample == nil {
			c.Sample = []string{}
		}
		if err := r.set(ctx, c, ""); err != nil {
			return err
		}
		c = r.state()
	}
	// One by one, recording progress every 20: a runner that takes over
	// redoes at most those, and JobAction refuses a job no longer in the
	// state it was picked in; one that changed since the cutoff is left.
	const chunk = 20
	for c.SampleDone < len(c.Sample) {
		end := min(c.SampleDone+chunk, len(c.Sample))
		kept, err := r.redrive(ctx, c.Sample[c.SampleDone:end])
		if err != nil {
			return err
		}
		c.Sample = append(append(c.Sample[:c.SampleDone:c.SampleDone], kept...), c.Sample[end:]...)
		c.SampleDone += len(kept)
		c.SampleSize = len(c.Sample)
		if err := r.set(ctx, c, ""); err != nil {
			return err
		}
		c = r.state()
	}
	now, err := r.e.store.Now(ctx)
	if err != nil {
		return fmt.Errorf("operation %s: canary: store clock: %w", r.op.ID, err)
	}
	until := now.Add(c.Timeout)
	c.Stage, c.WaitUntil = sluicetype.CanaryWaiting, &until
	return r.set(ctx, c, "")
}

// pick chooses n jobs spread evenly across what the run would take: the
// jobs the preview's order lists (newest state change first, from the
// cutoff down), one from the middle of each of n equal stretches, so an
// outage's first and last victims are both tried.
func (r *canaryRun) pick(ctx context.Context, n int) ([]string, error) {
	total, _, err := r.e.store.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: storeFilter(r.sel),
		ExcludeSuperseded: !r.sel.IncludeSuperseded, AsOf: &r.cutoff})
	if err != nil {
		return nil, fmt.Errorf("operation %s: canary count: %w", r.op.ID, err)
	}
	n = int(min(int64(n), total))
	if n == 0 {
		return nil, nil
	}
	at := func(i int) int64 { return (2*int64(i) + 1) * total / (2 * int64(n)) }
	var out []string
	after := &Cursor{At: r.cutoff.Add(time.Nanosecond), Dir: CursorNext}
	var pos int64
	for len(out) < n {
		page, err := r.e.store.JobListPage(ctx, &backend.JobListPageParams{Filter: storeFilter(r.sel),
			ExcludeSuperseded: !r.sel.IncludeSuperseded, After: after, Limit: MaxListLimit})
		if err != nil {
			return nil, fmt.Errorf("operation %s: canary sample: %w", r.op.ID, err)
		}
		for _, j := range page {
			if len(out) < n && pos == at(len(out)) {
				out = append(out, j.ID)
			}
			pos++
		}
		if len(page) < MaxListLimit {
			break
		}
		last := page[len(page)-1]
		after = &Cursor{At: last.StateChangedAt, ID: last.ID, Dir: CursorNext}
	}
	return out, nil
}

// redrive retries ids one by one as the operation's batches would, and
// returns those it retried or found retried by an earlier runner (left
// their state since the cutoff); a job the spec refuses (quarantined, or
// its unique key held) is left out of the sample.
func (r *canaryRun) redrive(ctx context.Context, ids []string) ([]string, error) {
	jobs, err := r.read(ctx, ids)
	if err != nil {
		return nil, err
	}
	var kept []string
	for _, id := range ids {
		j := jobs[id]
		if j == nil {
			continue // gone: nothing to learn from it
		}
		if j.StateChangedAt.After(r.cutoff) || !r.spec.Allows(j.State) {
			kept = append(kept, id)
			continue
		}
		_, err := r.e.store.JobAction(ctx, &backend.JobActionParams{ID: id, Spec: r.spec, Force: r.sel.IncludeSuperseded, Event: r.event})
		var state *StateError
		switch {
		case err == nil, errors.As(err, &state):
			kept = append(kept, id)
		case errors.Is(err, ErrNotFound) || isRefusal(err):
		default:
			return nil, fmt.Errorf("operation %s: canary redrive %s: %w", r.op.ID, id, err)
		}
	}
	r.e.wakeAll()
	return kept, nil
}

// isRefusal tells the spec's refusals of one job apart from failures.
func isRefusal(err error) bool {
	var q *QuarantinedError
	var u *UniqueHeldError
	var s *SupersededError
	return errors.As(err, &q) || errors.As(err, &u) || errors.As(err, &s)
}

// read returns the summaries of ids that still exist, by id.
func (r *canaryRun) read(ctx context.Context, ids []string) (map[string]*Job, error) {
	out := make(map[string]*Job, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), MaxListLimit)
		page, err := r.e.store.JobListPage(ctx, &backend.JobListPageParams{Filter: Filter{IDs: ids[:n]}, Limit: n})
		if err != nil {
			return nil, fmt.Errorf("operation %s: canary outcomes: %w", r.op.ID, err)
		}
		for _, j := range page {
			out[j.ID] = j
		}
		ids = ids[n:]
	}
	return out, nil
}

// outcomes reads what became of ids, and the latest error of one that
// failed again.
func (r *canaryRun) outcomes(ctx context.Context, ids []string) (sluicetype.Outcomes, string, error) {
	var o sluicetype.Outcomes
	jobs, err := r.read(ctx, ids)
	if err != nil {
		return o, "", err
	}
	var lastErr string
	var lastAt time.Time
	for _, id := range ids {
		j := jobs[id]
		if j == nil {
			continue
		}
		v, gone := sluicetype.Outcome(j.State)
		switch {
		case gone:
		case v > 0:
			o.OK++
		case v < 0:
			o.Failed++
			if n := len(j.Errors); n > 0 && !j.Errors[n-1].At.Before(lastAt) {
				lastErr, lastAt = j.Errors[n-1].Message, j.Errors[n-1].At
			}
		default:
			o.Running++
		}
	}
	return o, lastErr, nil
}

// canaryPoll is the longest a canary run waits between two reads of
// its outcomes: the watching stage takes a batch only once outcomes
// came in, so its pace is about a quarter window a poll (100/s with the
// default window of 100); a maintenance tick of a second would make it
// 25/s.
const canaryPoll = 200 * time.Millisecond

// pause waits one poll (the maintenance tick, at most canaryPoll), or
// returns ctx's error.
func (r *canaryRun) pause(ctx context.Context) error {
	d := r.e.cfg.MaintenanceInterval
	if d <= 0 || d > canaryPoll {
		d = canaryPoll
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// keep writes c when its outcomes changed or a third of the lease went
// by since the last write, which keeps the lease while the run waits.
func (r *canaryRun) keep(ctx context.Context, c *sluicetype.Canary, changed bool) error {
	if !changed && time.Since(r.written) < r.e.operationLeaseTTL()/3 {
		return nil
	}
	return r.set(ctx, c, "")
}

// wait reads the sample's outcomes until none is running or the wait's
// deadline passes, then goes on watching or halts.
func (r *canaryRun) wait(ctx context.Context) error {
	for {
		c := r.state()
		o, lastErr, err := r.outcomes(ctx, c.Sample)
		if err != nil {
			return err
		}
		changed := o != c.SampleOutcomes
		c.SampleOutcomes = o
		now, err := r.e.store.Now(ctx)
		if err != nil {
			return fmt.Errorf("operation %s: canary: store clock: %w", r.op.ID, err)
		}
		if o.Running == 0 || (c.WaitUntil != nil && !now.Before(*c.WaitUntil)) {
			n := len(c.Sample)
			if n > 0 && float64(o.OK) < c.MinSuccess*float64(n) {
				return r.halt(ctx, c, SampleHaltReason(c, lastErr))
			}
			c.Stage = sluicetype.CanaryWatching
			c.Recent = lastN(c.Sample, c.Window)
			return r.set(ctx, c, "")
		}
		if err := r.keep(ctx, c, changed); err != nil {
			return err
		}
		if err := r.pause(ctx); err != nil {
			return err
		}
	}
}

// gate runs before each batch of the watching stage: it halts the run
// when the window failed past the threshold, and waits while taking a
// batch would run more than half a window ahead of the outcomes seen.
func (r *canaryRun) gate(ctx context.Context) error {
	started := time.Now()
	for {
		c := r.state()
		o, lastErr, err := r.outcomes(ctx, c.Recent)
		if err != nil {
			return err
		}
		changed := o != c.WindowOutcomes
		c.WindowOutcomes = o
		if n := len(c.Recent); n > 0 && float64(o.Failed) > c.HaltFailureRate*float64(n) {
			return r.halt(ctx, c, WindowHaltReason(c, lastErr))
		}
		if o.Running+r.batch() <= max(1, c.Window/2) {
			return r.keep(ctx, c, changed)
		}
		if time.Since(started) > c.Timeout {
			return r.halt(ctx, c, fmt.Sprintf("halted: %d of the last %d redriven still without an outcome after %s",
				o.Running, len(c.Recent), c.Timeout))
		}
		if err := r.keep(ctx, c, changed); err != nil {
			return err
		}
		if err := r.pause(ctx); err != nil {
			return err
		}
	}
}

// SampleHaltReason is a halted sample's reason: "halted: canary sample
// 50: 3 ok, 45 failed, 2 running (90% needed) — dial tcp …".
func SampleHaltReason(c *sluicetype.Canary, lastErr string) string {
	o := c.SampleOutcomes
	s := fmt.Sprintf("halted: canary sample %d: %d ok, %d failed, %d running (%s needed)",
		len(c.Sample), o.OK, o.Failed, o.Running, percent(c.MinSuccess))
	return withError(s, lastErr)
}

// WindowHaltReason is a halted window's reason: "halted: 23 of the last
// 100 redriven failed again — dial tcp …".
func WindowHaltReason(c *sluicetype.Canary, lastErr string) string {
	return withError(fmt.Sprintf("halted: %d of the last %d redriven failed again", c.WindowOutcomes.Failed, len(c.Recent)), lastErr)
}

// withError appends a failed job's error to a halt's reason, on one line
// and cut at 200 bytes.
func withError(s, e string) string {
	if e == "" {
		return s
	}
	return s + " — " + oneLine(e, 200)
}

func oneLine(s string, n int) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\n' || r == '\r' || r == '\t' {
			r = ' '
		}
		out = append(out, r)
	}
	if len(string(out)) <= n {
		return string(out)
	}
	b := []byte(string(out))[:n]
	for len(b) > 0 && b[len(b)-1]&0xC0 == 0x80 {
		b = b[:len(b)-1]
	}
	if len(b) > 0 && b[len(b)-1] >= 0xC0 {
		b = b[:len(b)-1]
	}
	return string(b) + "…"
}

func percent(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }

// lastN is the last n of ids.
func lastN(ids []string, n int) []string {
	if len(ids) > n {
		ids = ids[len(ids)-n:]
	}
	return append([]string(nil), ids...)
}

// CanaryStageText says where a canary run is, for :operations and
// sluice operations: "sample 50: 48 ok, 2 failed, 0 running → continuing".
func CanaryStageText(op *Operation) string {
	c := op.Canary
	if c == nil {
		return ""
	}
	s := c.SampleOutcomes
	sample := fmt.Sprintf("sample %d: %d ok, %d failed, %d running", c.SampleSize, s.OK, s.Failed, s.Running)
	switch c.Stage {
	case sluicetype.CanarySample:
		if c.SampleSize == 0 {
			return "canary: picking a sample of " + fmt.Sprint(c.Size)
		}
		return fmt.Sprintf("canary: redriving sample %d/%d", c.SampleDone, c.SampleSize)
	case sluicetype.CanaryWaiting:
		return sample + " → waiting"
	case sluicetype.CanaryWatching:
		w := c.WindowOutcomes
		return fmt.Sprintf("%s → continuing; last %d: %d ok, %d failed, %d running (halt above %s)",
			sample, len(c.Recent), w.OK, w.Failed, w.Running, percent(c.HaltFailureRate))
	case sluicetype.CanaryHalted:
		return c.Reason
	}
	return ""
}

// resumeOperation is ResumeOperation without the Interceptor.
func (e *Engine) resumeOperation(ctx context.Context, id string) (*Operation, error) {
	if err := sluicetype.NoSuchID("operation", id); err != nil {
		return nil, err
	}
	if op, ok, err := replayed[*Operation](ctx); ok {
		return liftCutoff(op), err
	}
	op, err := e.store.OperationGet(ctx, &backend.OperationGetParams{ID: id})
	if err != nil {
		return nil, err
	}
	if op.Status != OperationHalted || op.Canary == nil {
		return nil, fmt.Errorf("resume operation %s: %w: it is %s; only a halted canary run resumes", id, ErrWrongState, op.Status)
	}
	// The operator overrides the halt: the run goes on watching a fresh
	// window, under the same threshold.
	c := *op.Canary
	c.Stage, c.Reason, c.Recent, c.WindowOutcomes = sluicetype.CanaryWatching, "", nil, sluicetype.Outcomes{}
	op, err = e.store.OperationResume(ctx, &backend.OperationResumeParams{ID: id, Canary: &c})
	if err != nil {
		return nil, err
	}
	e.wakeOperations()
	e.publish(Change{Kind: ChangeOperation, Operation: op.ID})
	return liftCutoff(op), nil
}
