package chaos

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Witness wraps a worker's store and records in the side table every
// fenced write the engine asks for — claims, completions, finishes (the
// worker's own outcomes and its reaper's) — with whether the store
// accepted it. The engine sees the store unchanged: the witness only
// looks.
//
// With defeat set, the witness also breaks fencing on purpose: before a
// completion, finish or renewal it rewrites each lease reference to the
// job's current lease, so a superseded holder's late write lands. It
// records the reference the engine gave, so the checker sees the stale
// fence that got through. This exists to prove the checker can fail
// (TestFaultChaosDefeatedFencing); it lives in the test worker only
// (testworker worker --defeat-fencing), never in the product.
func Witness(s backend.Store, rec *Recorder, process string, defeat bool) backend.Store {
	return &witness{Store: s, rec: rec, process: process, defeat: defeat}
}

type witness struct {
	backend.Store
	rec     *Recorder
	process string
	defeat  bool
}

func (w *witness) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	res, err := w.Store.JobClaim(ctx, p)
	if err != nil || res == nil {
		return res, err
	}
	rows := make([]WriteRow, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		ref := backend.JobRef{ID: j.ID, Fence: j.Fence}
		if j.Lease != nil {
			ref.LeaseID, ref.Fence = j.Lease.ID, j.Lease.Fence
		}
		rows = append(rows, WriteRow{Op: OpClaim, Ref: ref, Process: w.process})
	}
	w.rec.Writes(rows)
	return res, nil
}

// current is the reference of the job's lease now, or ref itself when the
// job holds none.
func (w *witness) current(ctx context.Context, ref backend.JobRef) backend.JobRef {
	j, err := w.Store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: ref.ID})
	if err != nil || j.Lease == nil {
		return ref
	}
	return backend.JobRef{ID: ref.ID, LeaseID: j.Lease.ID, Fence: j.Lease.Fence}
}

func (w *witness) JobCompleteMany(ctx context.Context, p *backend.JobCompleteManyParams) ([]error, error) {
	orig := make([]backend.JobRef, len(p.Items))
	for i, it := range p.Items {
		orig[i] = it.JobRef
	}
	if w.defeat {
		q := *p
		q.Items = make([]backend.JobCompleteItem, len(p.Items))
		for i, it := range p.Items {
			it.JobRef = w.current(ctx, it.JobRef)
			q.Items[i] = it
		}
		p = &q
	}
	errs, err := w.Store.JobCompleteMany(ctx, p)
	if err != nil {
		return errs, err
	}
	rows := make([]WriteRow, len(orig))
	for i, ref := range orig {
		var e error
		if i < len(errs) {
			e = errs[i]
		}
		rows[i] = WriteRow{Op: OpComplete, Ref: ref, Process: w.process, Err: e}
	}
	w.rec.Writes(rows)
	return errs, nil
}

func (w *witness) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*engine.Job, error) {
	orig := p.JobRef
	if w.defeat {
		q := *p
		q.JobRef = w.current(ctx, p.JobRef)
		p = &q
	}
	j, err := w.Store.JobFinish(ctx, p)
	if err == nil || errors.Is(err, engine.ErrLeaseLost) {
		w.rec.Writes([]WriteRow{{Op: OpFinish + ":" + string(p.To), Ref: orig, Process: w.process, Err: err}})
	}
	return j, err
}

func (w *witness) JobLeaseRenew(ctx context.Context, p *backend.JobLeaseRenewParams) ([]error, error) {
	if w.defeat {
		q := *p
		q.Items = make([]backend.JobRef, len(p.Items))
		for i, ref := range p.Items {
			q.Items[i] = w.current(ctx, ref)
		}
		p = &q
	}
	return w.Store.JobLeaseRenew(ctx, p)
}
