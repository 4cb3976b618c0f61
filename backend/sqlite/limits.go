package sqlite

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Limits: concurrency limits across processes (backend.LimitStore).

const sqlLimitList = `SELECT scope, name, concurrency, partition_key, rate, rate_window, updated_at, updated_by FROM limits ORDER BY scope, name`

// Running jobs a limit covers, counted through the partial index of
// running jobs: a claim under a limit reads as many rows as run.
const (
	sqlLimitRunningKind  = `SELECT count(*) FROM jobs INDEXED BY jobs_running WHERE state = 'running' AND kind = ?1`
	sqlLimitRunningQueue = `SELECT count(*) FROM jobs INDEXED BY jobs_running WHERE state = 'running' AND queue = ?1`
	// A rate limit's starts: ?1 scope, ?2 name, ?3 the window's start.
	sqlLimitStarts      = `SELECT coalesce(sum(n), 0) FROM limit_starts WHERE scope = ?1 AND name = ?2 AND at > ?3`
	sqlLimitStartsPrune = `DELETE FROM limit_starts WHERE scope = ?1 AND name = ?2 AND at <= ?3`
	sqlLimitStart       = `INSERT INTO limit_starts (scope, name, at, n) VALUES (?1, ?2, ?3, ?4)`
)

func (s *Store) readLimits(ctx context.Context) ([]sluicetype.Limit, error) {
	st, err := s.readStmt(ctx, sqlLimitList)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list limits: %w", err)
	}
	defer rows.Close()
	var out []sluicetype.Limit
	for rows.Next() {
		var l sluicetype.Limit
		var at int64
		if err := rows.Scan(&l.Scope, &l.Name, &l.Concurrency, &l.Key, &l.Rate, &l.RateWindow, &at, &l.UpdatedBy); err != nil {
			return nil, fmt.Errorf("sqlite: list limits: %w", err)
		}
		l.UpdatedAt = fromNanos(at)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list limits: %w", err)
	}
	return out, nil
}

// LimitList returns every limit with the jobs it counts running now.
func (s *Store) LimitList(ctx context.Context) ([]sluicetype.Limit, error) {
	ls, err := s.readLimits(ctx)
	if err != nil {
		return nil, err
	}
	for i := range ls {
		st, err := s.readStmt(ctx, limitRunningSQL(ls[i].Scope))
		if err != nil {
			return nil, err
		}
		if err := st.QueryRowContext(ctx, ls[i].Name).Scan(&ls[i].Running); err != nil {
			return nil, fmt.Errorf("sqlite: limit %s: %w", ls[i], err)
		}
		if ls[i].Rate == 0 {
			continue
		}
		st, err = s.readStmt(ctx, sqlLimitStarts)
		if err != nil {
			return nil, err
		}
		from := time.Now().Add(-ls[i].Window()).UnixNano()
		if err := st.QueryRowContext(ctx, string(ls[i].Scope), ls[i].Name, from).Scan(&ls[i].Starts); err != nil {
			return nil, fmt.Errorf("sqlite: limit %s: %w", ls[i], err)
		}
	}
	return ls, nil
}

func limitRunningSQL(scope sluicetype.LimitScope) string {
	if scope == sluicetype.LimitQueue {
		return sqlLimitRunningQueue
	}
	return sqlLimitRunningKind
}

const (
	sqlLimitUpsert = `INSERT INTO limits (scope, name, concurrency, updated_at, updated_by, partition_key, rate, rate_window)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
	ON CONFLICT (scope, name) DO UPDATE SET concurrency = excluded.concurrency,
		updated_at = excluded.updated_at, updated_by = excluded.updated_by, partition_key = excluded.partition_key,
		rate = excluded.rate, rate_window = excluded.rate_window`
	sqlLimitDelete = `DELETE FROM limits WHERE scope = ?1 AND name = ?2`
)

// LimitSet sets a limit, or removes it when Concurrency is 0.
func (s *Store) LimitSet(ctx context.Context, p *backend.LimitSetParams) error {
	if !p.Valid() {
		return fmt.Errorf("sqlite: set limit %s %q to %d: %w", p.Scope, p.Name, p.Concurrency, sluicetype.ErrInvalid)
	}
	st, err := s.stmts(ctx, sqlLimitUpsert, sqlLimitDelete)
	if err != nil {
		return err
	}
	defer s.limits.Forget()
	return s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		var err error
		if p.Removes() {
			_, err = tx.StmtContext(ctx, st[1]).ExecContext(ctx, string(p.Scope), p.Name)
		} else {
			_, err = tx.StmtContext(ctx, st[0]).ExecContext(ctx, string(p.Scope), p.Name, p.Concurrency, now.UnixNano(),
				p.Actor, p.Key, p.Rate, int64(p.RateWindow))
		}
		if err != nil {
			return fmt.Errorf("sqlite: set limit %s %s: %w", p.Scope, p.Name, err)
		}
		return nil
	})
}

// claimLimited is a claim some limits cover: in its one write transaction
// (SQLite's write lock serialises claims across processes, so no other
// claim counts between this count and this claim) it counts the running
// jobs each limit covers and claims in parts within what they leave.
func (s *Store) claimLimited(ctx context.Context, p *backend.JobClaimParams, lim []sluicetype.Limit) (*backend.JobClaimResult, error) {
	parts := backend.ClaimParts(p, lim)
	prepared := make(map[string]*claimPrepared, len(parts))
	for _, kinds := range parts {
		part := *p
		part.Kinds, part.Partition = kinds, backend.PartitionOf(kinds, lim)
		c, err := s.claimStmts(ctx, &part)
		if err != nil {
			return nil, err
		}
		prepared[kindsKey(kinds)] = c
	}
	count, err := s.stmts(ctx, sqlLimitRunningKind, sqlLimitRunningQueue, sqlLimitStarts, sqlLimitStartsPrune, sqlLimitStart)
	if err != nil {
		return nil, err
	}
	var res *backend.JobClaimResult
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		running, starts := make([]int64, len(lim)), make([]int64, len(lim))
		for i, l := range lim {
			st := count[0]
			if l.Scope == sluicetype.LimitQueue {
				st = count[1]
			}
			if err := tx.StmtContext(ctx, st).QueryRowContext(ctx, l.Name).Scan(&running[i]); err != nil {
				return fmt.Errorf("sqlite: claim %s: count limit %s: %w", p.Queue, l, err)
			}
			if l.Rate == 0 {
				continue
			}
			from := now.Add(-l.Window()).UnixNano()
			if _, err := tx.StmtContext(ctx, count[3]).ExecContext(ctx, string(l.Scope), l.Name, from); err != nil {
				return fmt.Errorf("sqlite: claim %s: prune starts of %s: %w", p.Queue, l, err)
			}
			if err := tx.StmtContext(ctx, count[2]).QueryRowContext(ctx, string(l.Scope), l.Name, from).Scan(&starts[i]); err != nil {
				return fmt.Errorf("sqlite: claim %s: count starts of %s: %w", p.Queue, l, err)
			}
		}
		var err error
		res, err = backend.ClaimUnderLimits(p, lim, running, starts, func(part *backend.JobClaimParams) (*backend.JobClaimResult, error) {
			return s.claimIn(ctx, tx, now, part, prepared[kindsKey(part.Kinds)])
		})
		if err != nil {
			return err
		}
		for _, ls := range backend.RateStarts(lim, res.Jobs) {
			l := ls.Limit
			if _, err := tx.StmtContext(ctx, count[4]).ExecContext(ctx, string(l.Scope), l.Name, now.UnixNano(), ls.N); err != nil {
				return fmt.Errorf("sqlite: claim %s: record the starts of %s: %w", p.Queue, l, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// kindsKey names a claim part's kind set.
func kindsKey(kinds map[string]int) string {
	ks := make([]string, 0, len(kinds))
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, "\x00")
}
