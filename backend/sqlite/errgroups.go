package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// JobErrorGroups groups the jobs matching the filter by queue, kind and
// error pattern, the largest groups first. Jobs with no error pattern
// (dead without a handler error, or from before migration 0002) form no
// group: a group's selector names its pattern, and an empty pattern in a
// Filter would match every error.
func (s *Store) JobErrorGroups(ctx context.Context, p *backend.JobErrorGroupsParams) ([]sluicetype.ErrorGroup, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	q, args, err := errorGroupsQuery(p)
	if err != nil {
		return nil, err
	}
	rows, err := s.queryRead(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: error groups: %w", err)
	}
	defer rows.Close()
	var out []sluicetype.ErrorGroup
	for rows.Next() {
		var g sluicetype.ErrorGroup
		var first, last int64
		var sample sql.NullString
		if err := rows.Scan(&g.Queue, &g.Kind, &g.Pattern, &g.Count, &first, &last, &sample); err != nil {
			return nil, fmt.Errorf("sqlite: error groups: %w", err)
		}
		g.FirstSeen, g.LastSeen, g.Sample = fromNanos(first), fromNanos(last), sample.String
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: error groups: %w", err)
	}
	return out, nil
}

// errorGroupsQuery builds JobErrorGroups' query.
func errorGroupsQuery(p *backend.JobErrorGroupsParams) (string, []any, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 200
	}
	w := &where{}
	if err := w.addFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	w.addStates(p.Filter.States)
	w.add("error_pattern != ''")
	cond := w.sql()
	// The sample is the newest matching job's message; its subquery comes
	// first in the text, so its arguments are bound first.
	q := `SELECT g.queue, g.kind, g.error_pattern, g.n, g.first_seen, g.last_seen,
		(SELECT last_error FROM jobs WHERE ` + cond + ` AND queue = g.queue AND kind = g.kind
			AND error_pattern = g.error_pattern ORDER BY state_changed_at DESC LIMIT 1)
	FROM (SELECT queue, kind, error_pattern, count(*) AS n, min(state_changed_at) AS first_seen,
			max(state_changed_at) AS last_seen
		FROM jobs WHERE ` + cond + `
		GROUP BY queue, kind, error_pattern
		ORDER BY n DESC, queue, kind, error_pattern LIMIT ?) AS g
	ORDER BY g.n DESC, g.queue, g.kind, g.error_pattern`
	return q, slices.Concat(w.args, w.args, []any{limit}), nil
}

const (
	sqlTriageList = `SELECT queue, kind, pattern, status, note, actor, at FROM error_group_triage
	ORDER BY queue, kind, pattern`
	sqlTriageUpsert = `INSERT INTO error_group_triage (queue, kind, pattern, status, note, actor, at)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
	ON CONFLICT (queue, kind, pattern) DO UPDATE SET status = excluded.status, note = excluded.note,
		actor = excluded.actor, at = excluded.at`
	sqlTriageDelete = `DELETE FROM error_group_triage WHERE queue = ?1 AND kind = ?2 AND pattern = ?3`
)

// ErrorGroupTriageSet writes an operator's verdict on one error group,
// or removes it for Status open, in one write transaction.
func (s *Store) ErrorGroupTriageSet(ctx context.Context, p *backend.ErrorGroupTriageSetParams) (*backend.ErrorGroupTriage, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("sqlite: error group %s %s %q: status %q: %w", p.Queue, p.Kind, p.Pattern, p.Status, sluicetype.ErrInvalid)
	}
	st, err := s.stmts(ctx, sqlTriageUpsert, sqlTriageDelete)
	if err != nil {
		return nil, err
	}
	var out *backend.ErrorGroupTriage
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		var err error
		if p.Status == sluicetype.GroupOpen {
			_, err = tx.StmtContext(ctx, st[1]).ExecContext(ctx, p.Queue, p.Kind, p.Pattern)
		} else {
			_, err = tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.Queue, p.Kind, p.Pattern, string(p.Status), p.Note, p.Actor,
				now.UnixNano())
			out = &backend.ErrorGroupTriage{Queue: p.Queue, Kind: p.Kind, Pattern: p.Pattern, Status: p.Status,
				Note: p.Note, Actor: p.Actor, At: fromNanos(now.UnixNano())}
		}
		if err != nil {
			return fmt.Errorf("sqlite: error group %s %s: %w", p.Queue, p.Kind, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ErrorGroupTriageList returns every verdict.
func (s *Store) ErrorGroupTriageList(ctx context.Context) ([]backend.ErrorGroupTriage, error) {
	st, err := s.readStmt(ctx, sqlTriageList)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: error group verdicts: %w", err)
	}
	defer rows.Close()
	var out []backend.ErrorGroupTriage
	for rows.Next() {
		var t backend.ErrorGroupTriage
		var status string
		var at int64
		if err := rows.Scan(&t.Queue, &t.Kind, &t.Pattern, &status, &t.Note, &t.Actor, &at); err != nil {
			return nil, fmt.Errorf("sqlite: error group verdicts: %w", err)
		}
		t.Status, t.At = sluicetype.GroupStatus(status), fromNanos(at)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: error group verdicts: %w", err)
	}
	return out, nil
}
