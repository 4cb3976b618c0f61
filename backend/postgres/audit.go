package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The audit trail (backend.AuditStore): one row per operator action,
// appended in the action's write transaction by audited, or on its own.

const (
	// $1 at, $2 actor, $3 action, $4 job id, $5 operation id, $6 record.
	sqlAuditInsert = `INSERT INTO {s}.audit_log (at, actor, action, job_id, operation_id, record)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`
	// $1 cutoff (exclusive), $2 limit: the oldest first, by the at index.
	sqlAuditDeleteExpired = `WITH gone AS (DELETE FROM {s}.audit_log WHERE id IN (
		SELECT id FROM {s}.audit_log WHERE at < $1 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1)
		SELECT count(*) FROM gone`
)

// audited returns fn unchanged when ctx carries no audit record: one
// context lookup. With one it returns fn followed, in the same
// transaction, by the record's insert, so that a refusal or a rollback
// takes the record with the action.
func (s *Store) audited(ctx context.Context, fn func(*wtx) error) func(*wtx) error {
	r, ok := backend.AuditWriteFrom(ctx)
	if !ok {
		return fn
	}
	return func(tx *wtx) error {
		if err := fn(tx); err != nil {
			return err
		}
		_, err := insertAudit(ctx, tx, r)
		return err
	}
}

// insertAudit inserts r at the transaction's now and returns its id.
func insertAudit(ctx context.Context, tx *wtx, r *sluicetype.AuditRecord) (int64, error) {
	rec := *r
	rec.ID, rec.At = "", tx.now
	b, err := json.Marshal(&rec)
	if err != nil {
		return 0, fmt.Errorf("postgres: audit record: %w", err)
	}
	var id int64
	if err := tx.QueryRow(ctx, tx.q(sqlAuditInsert), tx.nowNs, rec.Actor, rec.Action, rec.JobID, rec.Operation, string(b)).Scan(&id); err != nil {
		return 0, fmt.Errorf("postgres: audit record: %w", err)
	}
	return id, nil
}

// AuditAppend appends one record in a transaction of its own.
func (s *Store) AuditAppend(ctx context.Context, p *backend.AuditAppendParams) (*sluicetype.AuditRecord, error) {
	ctx = backend.WithoutAuditWrite(backend.WithoutIdempotencyWrite(ctx))
	out := p.Record
	err := s.writeTx(ctx, func(tx *wtx) error {
		id, err := insertAudit(ctx, tx, &p.Record)
		out.ID, out.At = strconv.FormatInt(id, 10), tx.now
		tx.cursorsKept = true
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditList pages the records the query selects, newest first.
func (s *Store) AuditList(ctx context.Context, p *backend.AuditListParams) ([]*sluicetype.AuditRecord, error) {
	q := p.Query
	var where []string
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if q.Actor != "" {
		arg("actor = ?", q.Actor)
	}
	if q.Action != "" {
		arg("action = ?", q.Action)
	}
	if q.JobID != "" {
		// The job, or one of the jobs of an action given several.
		arg("(job_id = ? OR record->'ids' @> jsonb_build_array(?::text))", q.JobID)
	}
	if q.Operation != "" {
		arg("operation_id = ?", q.Operation)
	}
	if !q.Since.IsZero() {
		arg("at >= ?", q.Since.UnixNano())
	}
	if !q.Until.IsZero() {
		arg("at < ?", q.Until.UnixNano())
	}
	if q.After != "" {
		after, err := strconv.ParseInt(q.After, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("audit cursor %q: %w", q.After, sluicetype.ErrInvalid)
		}
		arg("id < ?", after)
	}
	query := `SELECT id, at, record FROM {s}.audit_log`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, auditLimit(q.Limit))
	query += ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, s.sql(query), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: audit list: %w", err)
	}
	defer rows.Close()
	var out []*sluicetype.AuditRecord
	for rows.Next() {
		var id, at int64
		var rec []byte
		if err := rows.Scan(&id, &at, &rec); err != nil {
			return nil, fmt.Errorf("postgres: audit list: %w", err)
		}
		r := &sluicetype.AuditRecord{}
		if err := json.Unmarshal(rec, r); err != nil {
			return nil, fmt.Errorf("postgres: audit record %d: %w", id, err)
		}
		r.ID, r.At = strconv.FormatInt(id, 10), fromNanos(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: audit list: %w", err)
	}
	return out, nil
}

// auditLimit is a page's size: MaxAuditPage at most, 50 when unset.
func auditLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > backend.MaxAuditPage:
		return backend.MaxAuditPage
	}
	return n
}

// AuditDeleteExpired deletes up to Limit records older than Retention.
func (s *Store) AuditDeleteExpired(ctx context.Context, p *backend.AuditDeleteExpiredParams) (int, error) {
	ctx = backend.WithoutAuditWrite(ctx)
	if p.Retention <= 0 {
		return 0, fmt.Errorf("postgres: audit retention %v: %w", p.Retention, sluicetype.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	var n int
	err := s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true
		if err := tx.QueryRow(ctx, tx.q(sqlAuditDeleteExpired), tx.nowNs-p.Retention.Nanoseconds(), limit).Scan(&n); err != nil {
			return fmt.Errorf("postgres: audit retention: %w", err)
		}
		return nil
	})
	return n, err
}
