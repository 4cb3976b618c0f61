package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The audit trail: every operator action of Control (each runs through
// intercepted) leaves one record. The record rides in the context of the
// one store write that is the action (auditCtx), so the store commits
// both together; an action refused or failed records on its own, with
// the reason; one that spans several writes (Apply) or none (a replayed
// idempotent request) records on its own after it.

// Origin is how a caller reached the engine: the role it acted with,
// the surface and its source (a remote address, an SSH key's
// fingerprint). The API server sets it per request; a program calling
// the engine itself is SurfaceEmbedded, with no role.
type Origin struct {
	Role    Role
	Surface Surface
	Source  string
}

type originKey struct{}

// WithOrigin names how the caller in ctx reached the engine; the audit
// trail records it beside the actor (WithActor).
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginFrom returns the origin named in ctx, SurfaceEmbedded when none.
func OriginFrom(ctx context.Context) Origin {
	if o, ok := ctx.Value(originKey{}).(Origin); ok {
		if o.Surface == "" {
			o.Surface = SurfaceEmbedded
		}
		return o
	}
	return Origin{Surface: SurfaceEmbedded}
}

// AuditAppender is what a Control that keeps the audit trail itself
// (the Engine) offers a server in front of it: a record of an action the
// server refused before it reached the engine (a role short of it, a
// read-only server). The actor and origin come from ctx when the record
// leaves them empty.
type AuditAppender interface {
	AppendAudit(ctx context.Context, r AuditRecord) error
}

// auditPlan is the record of the action running in a context.
type auditPlan struct {
	rec AuditRecord
	// used: a store write carried the record; off: record nothing (a
	// dry run, an action inside another, a store without a trail).
	used, off bool
}

type auditPlanKey struct{}

// auditBegin returns ctx carrying the plan of action a's record. An
// action inside another (Apply's retries) records nothing of its own:
// the outer one is the operator's.
func (e *Engine) auditBegin(ctx context.Context, a ActionInfo) (context.Context, *auditPlan) {
	if _, nested := ctx.Value(auditPlanKey{}).(*auditPlan); nested || a.DryRun {
		p := &auditPlan{off: true}
		return context.WithValue(ctx, auditPlanKey{}, p), p
	}
	if _, err := backend.AuditStoreOf(e.store); err != nil {
		p := &auditPlan{off: true}
		return context.WithValue(ctx, auditPlanKey{}, p), p
	}
	o := OriginFrom(ctx)
	p := &auditPlan{rec: AuditRecord{
		Actor: ActorFrom(ctx), Role: o.Role, Surface: o.Surface, Source: o.Source,
		Action: a.Name, JobID: a.JobID, Operation: a.Operation, Applied: a.Action, Selector: a.Selector,
		Count: int64(a.IDs), Result: AuditOK,
	}}
	switch {
	case a.Fingerprint != "":
		p.rec.Target = a.Fingerprint
	case a.Queue != "":
		p.rec.Target = a.Queue
	case a.ErrorGroup != "":
		p.rec.Target = a.ErrorGroup
	case a.Schedule != "":
		p.rec.Target = a.Schedule
	case a.Limit != nil:
		p.rec.Target = a.Limit.String()
	case a.Signal != "":
		p.rec.Target = a.Signal
	}
	return context.WithValue(ctx, auditPlanKey{}, p), p
}

// auditCtx is ctx for the store write that is the running action: it
// carries the action's record, which the store appends in the write's
// transaction. Every action hands it to exactly one write.
func auditCtx(ctx context.Context) context.Context {
	p, ok := ctx.Value(auditPlanKey{}).(*auditPlan)
	if !ok || p.off {
		return ctx
	}
	p.used = true
	return backend.WithAuditWrite(ctx, &p.rec)
}

// auditNote lets the running action add to its record what only it
// knows (an operation's id, a count, an edit's paths), before the write
// that carries it.
func auditNote(ctx context.Context, fn func(r *AuditRecord)) {
	if p, ok := ctx.Value(auditPlanKey{}).(*auditPlan); ok && !p.off {
		fn(&p.rec)
	}
}

// auditEnd records the action on its own when no write carried its
// record or the action failed (its write, if any, rolled the record back
// with it). A failure to record is logged: the action stands or fell
// already.
func (e *Engine) auditEnd(ctx context.Context, p *auditPlan, err error) {
	if p.off || (err == nil && p.used) {
		return
	}
	r := p.rec
	if err != nil {
		r.Result, r.Detail = auditReason(err), err.Error()
	}
	if aerr := e.appendAudit(context.WithoutCancel(ctx), r); aerr != nil {
		e.log.Error("audit record not written", "action", r.Action, "actor", r.Actor, "err", aerr)
	}
}

// auditReason is the Result of an action that err ended.
func auditReason(err error) string {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.Is(err, ErrIdempotencyInFlight):
		return "in_flight"
	}
	return sluicetype.ReasonCode(err)
}

func (e *Engine) appendAudit(ctx context.Context, r AuditRecord) error {
	a, err := backend.AuditStoreOf(e.store)
	if err != nil {
		return nil
	}
	_, err = a.AuditAppend(backend.WithoutAuditWrite(WithoutIdempotency(ctx)), &backend.AuditAppendParams{Record: r})
	return err
}

// AppendAudit records an action a server refused before it reached the
// engine (AuditAppender). Result must say why (not "ok").
func (e *Engine) AppendAudit(ctx context.Context, r AuditRecord) error {
	if r.Action == "" || r.Result == "" || r.Result == AuditOK {
		return fmt.Errorf("%w: an appended audit record names its action and why it was refused", ErrInvalid)
	}
	if r.Actor == "" {
		r.Actor = ActorFrom(ctx)
	}
	if r.Surface == "" {
		o := OriginFrom(ctx)
		r.Role, r.Surface, r.Source = o.Role, o.Surface, o.Source
	}
	return e.appendAudit(ctx, r)
}

// Audit pages the audit trail, newest first (Control).
func (e *Engine) Audit(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	a, err := backend.AuditStoreOf(e.store)
	if err != nil {
		return nil, err
	}
	if q.Limit <= 0 {
		q.Limit = 50
	}
	if q.Limit > backend.MaxAuditPage {
		return nil, fmt.Errorf("%w: limit %d: at most %d records a page", ErrInvalid, q.Limit, backend.MaxAuditPage)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return nil, fmt.Errorf("%w: until must be after since", ErrInvalid)
	}
	rs, err := a.AuditList(ctx, &backend.AuditListParams{Query: q})
	if err != nil {
		return nil, err
	}
	page := &AuditPage{Records: rs}
	if page.Records == nil {
		page.Records = []*AuditRecord{}
	}
	if len(rs) == q.Limit {
		page.Next = rs[len(rs)-1].ID
	}
	return page, nil
}

// AuditRetention is how long the audit trail keeps a record: the
// configured retention, DefaultAuditRetention when unset; negative keeps
// them.
func (e *Engine) AuditRetention() time.Duration { return e.cfg.AuditRetention }

// sweepAudit deletes audit records past their retention, in bounded
// batches.
func (e *Engine) sweepAudit(ctx context.Context) error {
	if e.cfg.AuditRetention < 0 {
		return nil
	}
	a, err := backend.AuditStoreOf(e.store)
	if err != nil {
		return nil
	}
	for range 10 {
		n, err := a.AuditDeleteExpired(ctx, &backend.AuditDeleteExpiredParams{Retention: e.cfg.AuditRetention, Limit: maintenanceBatch})
		if err != nil {
			return fmt.Errorf("audit retention sweep: %w", err)
		}
		if n < maintenanceBatch {
			return nil
		}
	}
	return nil
}
