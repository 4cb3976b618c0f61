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

// ErrorGroupTriageSet writes an operator's verdict on one error group,
// or removes it for Status open, at the server's clock.
func (s *Store) ErrorGroupTriageSet(ctx context.Context, p *backend.ErrorGroupTriageSetParams) (*backend.ErrorGroupTriage, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("postgres: error group %s %s %q: status %q: %w", p.Queue, p.Kind, p.Pattern, p.Status, sluicetype.ErrInvalid)
	}
	var out *backend.ErrorGroupTriage
	err := s.writeTx(ctx, func(tx *wtx) error {
		if p.Status == sluicetype.GroupOpen {
			_, err := tx.Exec(ctx, s.sql(`DELETE FROM {s}.error_group_triage WHERE queue = $1 AND kind = $2 AND pattern = $3`),
				p.Queue, p.Kind, p.Pattern)
			if err != nil {
				return fmt.Errorf("postgres: error group %s %s: %w", p.Queue, p.Kind, err)
			}
			return nil
		}
		var at int64
		err := tx.QueryRow(ctx, s.sql(`INSERT INTO {s}.error_group_triage (queue, kind, pattern, status, note, actor, at)
			VALUES ($1, $2, $3, $4, $5, $6, `+sqlNow+`)
			ON CONFLICT (queue, kind, pattern) DO UPDATE SET status = excluded.status, note = excluded.note,
				actor = excluded.actor, at = excluded.at
			RETURNING at`), p.Queue, p.Kind, p.Pattern, string(p.Status), p.Note, p.Actor).Scan(&at)
		if err != nil {
			return fmt.Errorf("postgres: error group %s %s: %w", p.Queue, p.Kind, err)
		}
		out = &backend.ErrorGroupTriage{Queue: p.Queue, Kind: p.Kind, Pattern: p.Pattern, Status: p.Status,
			Note: p.Note, Actor: p.Actor, At: fromNanos(at)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ErrorGroupTriageList returns every verdict.
func (s *Store) ErrorGroupTriageList(ctx context.Context) ([]backend.ErrorGroupTriage, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT queue, kind, pattern, status, note, actor, at
		FROM {s}.error_group_triage ORDER BY queue, kind, pattern`))
	if err != nil {
		return nil, fmt.Errorf("postgres: error group verdicts: %w", err)
	}
	defer rows.Close()
	var out []backend.ErrorGroupTriage
	for rows.Next() {
		var t backend.ErrorGroupTriage
		var status string
		var at int64
		if err := rows.Scan(&t.Queue, &t.Kind, &t.Pattern, &status, &t.Note, &t.Actor, &at); err != nil {
			return nil, fmt.Errorf("postgres: error group verdicts: %w", err)
		}
		t.Status, t.At = sluicetype.GroupStatus(status), fromNanos(at)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: error group verdicts: %w", err)
	}
	return out, nil
}
