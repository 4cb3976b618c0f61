package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Limits: concurrency limits across processes (backend.LimitStore).

const sqlLimitList = `SELECT scope, name, concurrency, partition_key, rate, rate_window, updated_at, updated_by FROM {s}.limits ORDER BY scope, name`

// limitRunningSQL counts the running jobs a limit covers ($1 its name):
// a claim under a limit reads as many rows as run, under the partial
// index of running jobs.
func limitRunningSQL(scope sluicetype.LimitScope) string {
	col := "kind"
	if scope == sluicetype.LimitQueue {
		col = "queue"
	}
	return `SELECT count(*) FROM {s}.jobs WHERE state = 'running' AND ` + col + ` = $1`
}

// A rate limit's starts: $1 scope, $2 name, $3 the window (ns); a row
// holds a claim's n starts (backend.RateStarts).
const (
	sqlLimitStarts = `SELECT coalesce(sum(n), 0)::bigint FROM {s}.limit_starts WHERE scope = $1 AND name = $2 AND at > ` + sqlNow + ` - $3`
	sqlLimitPrune  = `DELETE FROM {s}.limit_starts WHERE scope = $1 AND name = $2 AND at <= ` + sqlNow + ` - $3`
	sqlLimitStart  = `INSERT INTO {s}.limit_starts (scope, name, at, n) VALUES ($1, $2, $3, $4)`
)

func (s *Store) readLimits(ctx context.Context) ([]sluicetype.Limit, error) {
	rows, err := s.pool.Query(ctx, s.sql(sqlLimitList))
	if err != nil {
		return nil, fmt.Errorf("postgres: list limits: %w", err)
	}
	defer rows.Close()
	var out []sluicetype.Limit
	for rows.Next() {
		var l sluicetype.Limit
		var scope string
		var at, window int64
		if err := rows.Scan(&scope, &l.Name, &l.Concurrency, &l.Key, &l.Rate, &window, &at, &l.UpdatedBy); err != nil {
			return nil, fmt.Errorf("postgres: list limits: %w", err)
		}
		l.Scope, l.UpdatedAt, l.RateWindow = sluicetype.LimitScope(scope), fromNanos(at), time.Duration(window)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list limits: %w", err)
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
		if err := s.pool.QueryRow(ctx, s.sql(limitRunningSQL(ls[i].Scope)), ls[i].Name).Scan(&ls[i].Running); err != nil {
			return nil, fmt.Errorf("postgres: limit %s: %w", ls[i], err)
		}
		if ls[i].Rate == 0 {
			continue
		}
		if err := s.pool.QueryRow(ctx, s.sql(sqlLimitStarts), string(ls[i].Scope), ls[i].Name,
			int64(ls[i].Window())).Scan(&ls[i].Starts); err != nil {
			return nil, fmt.Errorf("postgres: limit %s: %w", ls[i], err)
		}
	}
	return ls, nil
}

// LimitSet sets a limit, or removes it when Concurrency is 0.
func (s *Store) LimitSet(ctx context.Context, p *backend.LimitSetParams) error {
	if !p.Valid() {
		return fmt.Errorf("postgres: set limit %s %q to %d: %w", p.Scope, p.Name, p.Concurrency, sluicetype.ErrInvalid)
	}
	defer s.limits.Forget()
	return s.writeTx(ctx, func(tx *wtx) error {
		var err error
		if p.Removes() {
			_, err = tx.Exec(ctx, s.sql(`DELETE FROM {s}.limits WHERE scope = $1 AND name = $2`), string(p.Scope), p.Name)
		} else {
			_, err = tx.Exec(ctx, s.sql(`INSERT INTO {s}.limits (scope, name, concurrency, updated_at, updated_by, partition_key,
					rate, rate_window)
				VALUES ($1, $2, $3, `+sqlNow+`, $4, $5, $6, $7)
				ON CONFLICT (scope, name) DO UPDATE SET concurrency = excluded.concurrency,
					updated_at = excluded.updated_at, updated_by = excluded.updated_by, partition_key = excluded.partition_key,
					rate = excluded.rate, rate_window = excluded.rate_window`),
				string(p.Scope), p.Name, p.Concurrency, p.Actor, p.Key, p.Rate, int64(p.RateWindow))
		}
		if err != nil {
			return fmt.Errorf("postgres: set limit %s %s: %w", p.Scope, p.Name, err)
		}
		return nil
	})
}

// claimLimited is a claim some limits cover, in one transaction: it takes
// a transaction-scoped advisory lock per limit (in LimitsFor's order, so
// two claims never wait on each other crosswise), then counts the running
// jobs each covers and claims in parts within what they leave. Under READ
// COMMITTED each statement reads a snapshot taken when it starts, so the
// count follows the lock: the claim before it has committed its jobs, and
// two claims cannot both see N-1. A job leaving running takes no lock; it
// only lowers the count. The claim cursor is not used: a limited claim
// takes few jobs.
func (s *Store) claimLimited(ctx context.Context, p *backend.JobClaimParams, lim []sluicetype.Limit) (*backend.JobClaimResult, error) {
	res := &backend.JobClaimResult{}
	err := s.writeTx(ctx, func(tx *wtx) error {
		running, starts, err := s.lockAndCount(ctx, tx, lim)
		if err != nil {
			return err
		}
		r, err := backend.ClaimUnderLimits(p, lim, running, starts, func(part *backend.JobClaimParams) (*backend.JobClaimResult, error) {
			pr := &backend.JobClaimResult{}
			kinds, versions := kindArrays(part.Kinds)
			if err := s.claimIn(ctx, tx, part, pr, kinds, versions, false, claimCursor{}, nil, nil); err != nil {
				return nil, err
			}
			if part.PastDeadline.DeadLetter != nil {
				if err := s.claimDeadLetters(ctx, tx, &part.PastDeadline, pr.Dead); err != nil {
					return nil, err
				}
			}
			return pr, nil
		})
		if err != nil {
			return err
		}
		for _, ls := range backend.RateStarts(lim, r.Jobs) {
			l := ls.Limit
			if _, err := tx.Exec(ctx, s.sql(sqlLimitStart), string(l.Scope), l.Name, r.Now.UnixNano(), ls.N); err != nil {
				return fmt.Errorf("record the starts of %s: %w", l, err)
			}
		}
		*res = *r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim %s: %w", p.Queue, err)
	}
	if res.Now.IsZero() {
		if res.Now, err = s.Now(ctx); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// sqlLimitLock takes a limit's lock ($1 limitLockKey) until the end of
// the transaction, the implicit one of a pipeline included.
const sqlLimitLock = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`

// limitLockKey names l's advisory lock, apart from every other schema's.
func (s *Store) limitLockKey(l sluicetype.Limit) string {
	return "sluice-limit:" + s.schema + ":" + string(l.Scope) + ":" + l.Name
}

// lockAndCount takes each limit's advisory lock and reads its running
// jobs (and its rate window's starts) in one round trip: the statements go
// as one pipeline, and the server runs them in order, each on a snapshot
// taken when it starts, so every count still follows every lock.
func (s *Store) lockAndCount(ctx context.Context, tx *wtx, lim []sluicetype.Limit) (running, starts []int64, err error) {
	b := &pgx.Batch{}
	for _, l := range lim {
		b.Queue(sqlLimitLock, s.limitLockKey(l))
	}
	for _, l := range lim {
		b.Queue(s.sql(limitRunningSQL(l.Scope)), l.Name)
		if l.Rate > 0 {
			b.Queue(s.sql(sqlLimitPrune), string(l.Scope), l.Name, int64(l.Window()))
			b.Queue(s.sql(sqlLimitStarts), string(l.Scope), l.Name, int64(l.Window()))
		}
	}
	br := tx.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("limits: %w", cerr)
		}
	}()
	for _, l := range lim {
		if _, err := br.Exec(); err != nil {
			return nil, nil, fmt.Errorf("lock limit %s: %w", l, err)
		}
	}
	running, starts = make([]int64, len(lim)), make([]int64, len(lim))
	for i, l := range lim {
		if err := br.QueryRow().Scan(&running[i]); err != nil {
			return nil, nil, fmt.Errorf("count limit %s: %w", l, err)
		}
		if l.Rate == 0 {
			continue
		}
		if _, err := br.Exec(); err != nil {
			return nil, nil, fmt.Errorf("prune starts of %s: %w", l, err)
		}
		if err := br.QueryRow().Scan(&starts[i]); err != nil {
			return nil, nil, fmt.Errorf("count starts of %s: %w", l, err)
		}
	}
	return running, starts, nil
}
