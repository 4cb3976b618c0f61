package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// AuditStore is the capability of a store that keeps the audit trail
// (CapabilityAudit). It keeps these rules (backend/backendtest's Audit
// group checks them):
//
//   - Every write transaction (every script, on Redis) whose context
//     carries a record (AuditWriteFrom) appends that record in the same
//     transaction, after the write's own statements: the action and its
//     record are committed together or not at all. A write that fails
//     (a refusal, a lost lease) rolls its record back with it. The
//     engine hands a record to exactly one write per action.
//   - Records are append-only: nothing but AuditDeleteExpired removes
//     one, and nothing changes one.
//   - The record's time is the store's clock at the write; its ID orders
//     records newest first in AuditList.
type AuditStore interface {
	// AuditAppend appends a record on its own: an action refused before
	// any write or whose write failed (its Result says why), or one that
	// spans several transactions (Apply) and is recorded after them.
	AuditAppend(ctx context.Context, p *AuditAppendParams) (*sluicetype.AuditRecord, error)
	// AuditList pages the records Query selects, newest first, at most
	// Query.Limit (1–500), continuing past Query.After.
	AuditList(ctx context.Context, p *AuditListParams) ([]*sluicetype.AuditRecord, error)
	// AuditDeleteExpired deletes up to Limit records older than Retention
	// by the store's clock, oldest first, and returns how many.
	AuditDeleteExpired(ctx context.Context, p *AuditDeleteExpiredParams) (int, error)
}

type AuditAppendParams struct {
	Record sluicetype.AuditRecord
}

type AuditListParams struct {
	Query sluicetype.AuditQuery
}

type AuditDeleteExpiredParams struct {
	Retention time.Duration
	Limit     int
}

// MaxAuditPage is the most records one AuditList returns.
const MaxAuditPage = 500

// AuditStoreOf returns s's audit trail, or an error matching
// ErrUnsupported when s keeps none.
func AuditStoreOf(s Store) (AuditStore, error) {
	a, ok := s.(AuditStore)
	if !ok || !Declares(s, CapabilityAudit) {
		return nil, fmt.Errorf("%w: this store (%s) keeps no audit trail", sluicetype.ErrUnsupported, s.Backend())
	}
	return a, nil
}

type auditWriteKey struct{}

// WithAuditWrite returns ctx whose store writes each append r in their
// transaction (the store sets ID and At). The engine sets it on the one
// write that is an operator's action.
func WithAuditWrite(ctx context.Context, r *sluicetype.AuditRecord) context.Context {
	return context.WithValue(ctx, auditWriteKey{}, r)
}

// WithoutAuditWrite returns ctx whose writes append no record: a store's
// own bookkeeping, or an action's further writes.
func WithoutAuditWrite(ctx context.Context) context.Context {
	if _, ok := ctx.Value(auditWriteKey{}).(*sluicetype.AuditRecord); !ok {
		return ctx
	}
	return context.WithValue(ctx, auditWriteKey{}, (*sluicetype.AuditRecord)(nil))
}

// AuditWriteFrom returns the record a write made with ctx appends, if
// any. It costs one context lookup when there is none.
func AuditWriteFrom(ctx context.Context) (*sluicetype.AuditRecord, bool) {
	r, ok := ctx.Value(auditWriteKey{}).(*sluicetype.AuditRecord)
	return r, ok && r != nil
}
