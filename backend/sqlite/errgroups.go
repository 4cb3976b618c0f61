package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

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
