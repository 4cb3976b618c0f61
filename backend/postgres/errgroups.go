package postgres

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// JobErrorGroups groups the jobs matching the filter by queue, kind and
// the error pattern stored at death, the largest groups first. Jobs
// without a pattern form no group.
func (s *Store) JobErrorGroups(ctx context.Context, p *backend.JobErrorGroupsParams) ([]sluicetype.ErrorGroup, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 200
	}
	w := s.newWhere(nil)
	if err := w.addFilter(&p.Filter); err != nil {
		return nil, err
	}
	w.addStates(p.Filter.States)
	w.add("error_pattern <> ''")
	cond := w.sql()
	q := s.sql(`SELECT g.queue, g.kind, g.error_pattern, g.n, g.first_seen, g.last_seen,
		(SELECT last_error FROM {s}.jobs WHERE `+cond+` AND queue = g.queue AND kind = g.kind
			AND error_pattern = g.error_pattern ORDER BY state_changed_at DESC LIMIT 1)
	FROM (SELECT queue, kind, error_pattern, count(*) AS n, min(state_changed_at) AS first_seen,
			max(state_changed_at) AS last_seen
		FROM {s}.jobs WHERE `+cond+`
		GROUP BY queue, kind, error_pattern
		ORDER BY n DESC, queue, kind, error_pattern LIMIT `) + w.a.add(limit) + `) AS g
	ORDER BY g.n DESC, g.queue, g.kind, g.error_pattern`
	rows, err := s.pool.Query(ctx, q, withMode(&p.Filter, w.a.vals)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: error groups: %w", err)
	}
	defer rows.Close()
	var out []sluicetype.ErrorGroup
	for rows.Next() {
		var g sluicetype.ErrorGroup
		var first, last int64
		var sample *string
		if err := rows.Scan(&g.Queue, &g.Kind, &g.Pattern, &g.Count, &first, &last, &sample); err != nil {
			return nil, fmt.Errorf("postgres: error groups: %w", err)
		}
		g.FirstSeen, g.LastSeen = fromNanos(first), fromNanos(last)
		if sample != nil {
			g.Sample = *sample
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: error groups: %w", err)
	}
	return out, nil
}
