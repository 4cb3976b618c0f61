package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Enqueue writes one job.
func (e *Engine) Enqueue(ctx context.Context, p EnqueueParams) (*Job, error) {
	res, err := e.EnqueueMany(ctx, []EnqueueParams{p})
	if err != nil {
		return nil, err
	}
	return res[0].Job, res[0].Err
}

// EnqueueMany writes many jobs in one store call; each is accepted or
// refused on its own. The error is for the call as a whole (store down).
//
// An enqueue that came through an operator surface (its context names
// an Origin other than SurfaceEmbedded: POST /jobs) is an operator's
// action and recorded in the audit trail, in the insert's transaction; a
// program's own enqueues are not.
func (e *Engine) EnqueueMany(ctx context.Context, ps []EnqueueParams) ([]EnqueueResult, error) {
	if OriginFrom(ctx).Surface == SurfaceEmbedded {
		return e.enqueueIntercepted(ctx, ps)
	}
	a := ActionInfo{Name: "enqueue", IDs: len(ps)}
	if len(ps) == 1 {
		a.JobID = ps[0].ID
	}
	return intercepted(ctx, e, a, func(ctx context.Context) ([]EnqueueResult, error) {
		res, err := e.enqueueIntercepted(ctx, ps)
		refused := 0
		for _, r := range res {
			if r.Err != nil {
				refused++
			}
		}
		if refused > 0 {
			auditNote(ctx, func(r *AuditRecord) { r.Detail = fmt.Sprintf("%d of %d refused", refused, len(ps)) })
		}
		return res, err
	})
}

func (e *Engine) enqueueIntercepted(ctx context.Context, ps []EnqueueParams) ([]EnqueueResult, error) {
	if ic := e.cfg.Interceptor; ic != nil {
		return ic.InterceptEnqueue(ctx, ps, e.enqueueMany)
	}
	return e.enqueueMany(ctx, ps)
}

func (e *Engine) enqueueMany(ctx context.Context, ps []EnqueueParams) ([]EnqueueResult, error) {
	out := make([]EnqueueResult, len(ps))
	ins := make([]*backend.JobInsertParams, 0, len(ps))
	idx := make([]int, 0, len(ps))
	clock := &batchClock{store: e.store}
	for i := range ps {
		jp, err := e.insertParams(ctx, &ps[i], clock)
		if err != nil {
			out[i].Err = err
			continue
		}
		ins = append(ins, jp)
		idx = append(idx, i)
	}
	if len(ins) == 0 {
		return out, nil
	}
	res, replay, err := replayed[[]backend.JobInsertResult](ctx)
	if err != nil {
		return nil, err
	}
	if !replay {
		auditNote(ctx, func(r *AuditRecord) {
			if len(ins) == 1 {
				r.JobID = ins[0].ID
				return
			}
			for _, jp := range ins {
				r.IDs = append(r.IDs, jp.ID)
			}
		})
		res, err = e.store.JobInsertMany(auditCtx(ctx), &backend.JobInsertManyParams{Jobs: ins, RefuseQuarantined: true})
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
	}
	if replay && len(res) != len(ins) {
		return nil, fmt.Errorf("enqueue: the idempotency record holds %d results for %d jobs", len(res), len(ins))
	}
	queues := map[string]bool{}
	for k, r := range res {
		out[idx[k]] = EnqueueResult(r)
		if r.Err == nil && !r.Existing && r.Job != nil && r.Job.State == StateAvailable {
			queues[r.Job.Queue] = true
		}
	}
	for q := range queues {
		e.wake(q)
	}
	return out, nil
}

// batchClock reads the store's clock once for a batch, and only when a
// unique job's period needs it.
type batchClock struct {
	store backend.Store
	now   time.Time
	read  bool
}

func (c *batchClock) Now(ctx context.Context) (time.Time, error) {
	if !c.read {
		now, err := c.store.Now(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("enqueue: store clock: %w", err)
		}
		c.now, c.read = now, true
	}
	return c.now, nil
}

func (e *Engine) insertParams(ctx context.Context, p *EnqueueParams, clock *batchClock) (*backend.JobInsertParams, error) {
	if p.Queue == "" {
		p.Queue = "default"
	}
	if err := sluicetype.ValidateName("queue", p.Queue); err != nil {
		return nil, err
	}
	if err := sluicetype.ValidateName("kind", p.Kind); err != nil {
		return nil, err
	}
	id := p.ID
	if id == "" {
		v7, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("new job id: %w", err)
		}
		id = v7.String()
	} else if err := ValidateJobID(id); err != nil {
		return nil, err
	}
	raw := p.Payload
	if raw == nil && p.Args != nil {
		b, err := json.Marshal(p.Args)
		if err != nil {
			return nil, fmt.Errorf("%w: args do not marshal: %v", ErrInvalid, err)
		}
		raw = b
	}
	if raw == nil {
		raw = json.RawMessage(`{}`)
	}
	payload, err := ValidatePayload(raw, e.cfg.PayloadLimit)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	fp, err := FingerprintOf(p.Kind, payload)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	meta := p.Metadata
	if len(meta) > 0 {
		if meta, err = ValidatePayload(meta, e.cfg.PayloadLimit); err != nil {
			return nil, fmt.Errorf("job %s: metadata: %w", id, err)
		}
	}
	version := p.SchemaVersion
	maxAttempts := p.MaxAttempts
	timeout := p.Timeout
	if k := e.kind(p.Kind); k != nil {
		if version == 0 {
			version = k.Version
		}
		if maxAttempts == 0 {
			maxAttempts = k.MaxAttempts
		}
		if timeout == 0 {
			timeout = k.Timeout
		}
	}
	if version <= 0 {
		version = 1
	}
	if maxAttempts <= 0 {
		maxAttempts = e.cfg.MaxAttempts
	}
	for _, t := range p.Tags {
		if err := sluicetype.ValidateName("tag", t); err != nil {
			return nil, err
		}
	}
	jp := &backend.JobInsertParams{
		ID: id, Queue: p.Queue, Kind: p.Kind, Payload: payload,
		SchemaVersion: version, Metadata: meta, Tags: p.Tags,
		Priority: p.Priority, MaxAttempts: maxAttempts, Fingerprint: fp,
		Delay: p.Delay, ScheduledAt: p.ScheduledAt, Deadline: p.Deadline,
		Timeout: timeout,
	}
	if p.Unique != nil {
		if !backend.Declares(e.store, backend.CapabilityUnique) {
			return nil, fmt.Errorf("job %s: unique enqueue: %w: the %s store does not hold unique keys", id, ErrUnsupported, e.store.Backend())
		}
		// The period bucket is read from the job's due time by the
		// store's clock, so that every process puts a job due at the
		// same moment in the same bucket.
		var due time.Time
		if p.Unique.Period > 0 {
			if p.ScheduledAt != nil {
				due = *p.ScheduledAt
			} else {
				now, err := clock.Now(ctx)
				if err != nil {
					return nil, err
				}
				due = now.Add(p.Delay)
			}
		}
		key, mask, err := sluicetype.UniqueKeyOf(p.Unique, id, p.Kind, p.Queue, payload, due)
		if err != nil {
			return nil, err
		}
		jp.UniqueKey, jp.UniqueStates = key, mask
	}
	return jp, nil
}

// wake tells this process's runner of queue q that work is waiting.
func (e *Engine) wake(q string) {
	if r, ok := e.queues[q]; ok {
		r.wake()
	}
}

// wakeAll wakes every queue runner of this process.
func (e *Engine) wakeAll() {
	for _, r := range e.queues {
		r.wake()
	}
}
