package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The audit trail (backend.AuditStore): one row per operator action,
// appended in the action's write transaction by audited, or on its own.

const (
	sqlAuditInsert = `INSERT INTO audit_log (at, actor, action, job_id, operation_id, record)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6)`
	// ?1 cutoff (exclusive), ?2 limit: the oldest first, by the at index.
	sqlAuditDeleteExpired = `DELETE FROM audit_log WHERE id IN (
		SELECT id FROM audit_log WHERE at < ?1 ORDER BY at LIMIT ?2)`
)

// audited returns fn unchanged when ctx carries no audit record: one
// context lookup. With one it returns fn followed, in the same
// transaction, by the record's insert, so that a refusal or a rollback
// takes the record with the action. writeTx calls it before it begins
// the transaction (statements cannot be prepared inside one).
func (s *Store) audited(ctx context.Context, fn func(*wtx, time.Time) error) (func(*wtx, time.Time) error, error) {
	r, ok := backend.AuditWriteFrom(ctx)
	if !ok {
		return fn, nil
	}
	st, err := s.stmts(ctx, sqlAuditInsert)
	if err != nil {
		return nil, err
	}
	return func(tx *wtx, now time.Time) error {
		if err := fn(tx, now); err != nil {
			return err
		}
		_, err := insertAudit(ctx, tx, st[0], r, now)
		return err
	}, nil
}

// insertAudit inserts r at now and returns its id.
func insertAudit(ctx context.Context, tx *wtx, st *sql.Stmt, r *sluicetype.AuditRecord, now time.Time) (int64, error) {
	rec := *r
	rec.ID, rec.At = "", fromNanos(now.UnixNano())
	b, err := json.Marshal(&rec)
	if err != nil {
		return 0, fmt.Errorf("sqlite: audit record: %w", err)
	}
	res, err := tx.StmtContext(ctx, st).ExecContext(ctx, now.UnixNano(), rec.Actor, rec.Action, rec.JobID, rec.Operation, string(b))
	if err != nil {
		return 0, fmt.Errorf("sqlite: audit record: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("sqlite: audit record: %w", err)
	}
	return id, nil
}

// AuditAppend appends one record in a transaction of its own.
func (s *Store) AuditAppend(ctx context.Context, p *backend.AuditAppendParams) (*sluicetype.AuditRecord, error) {
	ctx = backend.WithoutAuditWrite(backend.WithoutIdempotencyWrite(ctx))
	st, err := s.stmts(ctx, sqlAuditInsert)
	if err != nil {
		return nil, err
	}
	out := p.Record
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		id, err := insertAudit(ctx, tx, st[0], &p.Record, now)
		out.ID, out.At = strconv.FormatInt(id, 10), fromNanos(now.UnixNano())
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
		where = append(where, strings.ReplaceAll(cond, "?", "?"+strconv.Itoa(len(args))))
	}
	if q.Actor != "" {
		arg("actor = ?", q.Actor)
	}
	if q.Action != "" {
		arg("action = ?", q.Action)
	}
	if q.JobID != "" {
		// The job, or one of the jobs of an action given several.
		arg("(job_id = ? OR EXISTS (SELECT 1 FROM json_each(record, '$.ids') WHERE value = ?))", q.JobID)
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
	query := `SELECT id, at, record FROM audit_log`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, auditLimit(q.Limit))
	query += ` ORDER BY id DESC LIMIT ?` + strconv.Itoa(len(args))
	st, err := s.readStmt(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: audit list: %w", err)
	}
	defer rows.Close()
	var out []*sluicetype.AuditRecord
	for rows.Next() {
		var id, at int64
		var rec string
		if err := rows.Scan(&id, &at, &rec); err != nil {
			return nil, fmt.Errorf("sqlite: audit list: %w", err)
		}
		r := &sluicetype.AuditRecord{}
		if err := json.Unmarshal([]byte(rec), r); err != nil {
			return nil, fmt.Errorf("sqlite: audit record %d: %w", id, err)
		}
		r.ID, r.At = strconv.FormatInt(id, 10), fromNanos(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: audit list: %w", err)
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
		return 0, fmt.Errorf("sqlite: audit retention %v: %w", p.Retention, sluicetype.ErrInvalid)
	}
	st, err := s.stmts(ctx, sqlAuditDeleteExpired)
	if err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	var n int64
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		res, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, now.Add(-p.Retention).UnixNano(), limit)
		if err != nil {
			return fmt.Errorf("sqlite: audit retention: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
