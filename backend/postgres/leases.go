package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Leases: their renewal, and the listing of expired ones for the reaper.

// reapFloor is where the listing of expired leases starts its scan of
// jobs_running, so that it does not walk the entries of the jobs claimed
// and finished before: each claim leaves one, and while a transaction
// holds an old snapshot (an idle transaction holding an XID) none can be
// vacuumed or marked dead. Under one held for ten minutes at 2,000
// jobs/s the listing, once a second, read 85,000 buffers and took 425 ms
// on a core of two (scripts/bench pressure).
//
// A lease is set at its writer's now plus a duration, never in the past,
// so a running job that a listing at t did not see either expired at or
// after t, or was written by a transaction that had not committed at t.
// The next listing starts at t less reapFloorMargin, or at the oldest
// expired lease the listing returned (the engine may leave it, to be
// found again: its worker lives, or the store was away), whichever is
// earlier. A writer that committed later than the margin after its lease
// expired is found by the listing from the start, which runs every
// reapFullEvery, or a hundred times its own last time if that is longer
// (at the end of the ten minutes one took 1.3 s). Every entry in the
// margin is walked, and costs a visit of its row's page: with a margin
// of a minute the listing still read 25,700 buffers, 147 ms.
type reapFloor struct {
	from     int64         // unix ns; used while full is recent
	full     time.Time     // when the last listing from the start began
	fullTook time.Duration // and how long it took
}

const (
	reapFloorMargin = int64(5 * time.Second)
	reapFullEvery   = 30 * time.Second
	reapFullShare   = 100
)

// reapFrom returns where a listing beginning now starts (0: from the
// start).
func (s *Store) reapFrom(now time.Time) int64 {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	f := s.reap
	if f.full.IsZero() || now.Sub(f.full) >= max(reapFullEvery, reapFullShare*f.fullTook) {
		return 0
	}
	return f.from
}

// firstStatsPages is the size of the jobs table (8 kB pages, about 5,000
// small jobs) past which a table never analyzed is analyzed (firstStats).
const firstStatsPages = 128

// sqlFirstStats reads whether the jobs table was never analyzed (nor
// vacuumed: reltuples is -1 until then) and whether it has grown past $1
// pages.
const sqlFirstStats = `SELECT c.reltuples < 0, pg_relation_size(c.oid) >= $1::bigint * current_setting('block_size')::bigint
	FROM pg_class c WHERE c.oid = '{s}.jobs'::regclass`

// firstStats gives a new store's jobs table its first statistics once it
// has grown, rather than a minute later at autovacuum's first visit. The
// hot path's statements are planned generically once per connection, and
// those of a new store when the table is a few pages: the lease renewal
// then scanned every job for its ids (TestFirstStatsReplanHotPath), and
// under scripts/bench pressure the first minute fell 60,000 jobs behind.
// An ANALYZE changes the table's statistics, which makes every session
// plan again. It runs with the leader's maintenance (JobListExpiredLeases)
// until the table has statistics, whoever gave them.
func (s *Store) firstStats(ctx context.Context) {
	if s.statsGiven.Load() {
		return
	}
	var never, grown bool
	if err := s.pool.QueryRow(ctx, s.sql(sqlFirstStats), firstStatsPages).Scan(&never, &grown); err != nil {
		return // the listing reports an outage; this waits for the next tick
	}
	switch {
	case !never:
		s.statsGiven.Store(true)
	case grown:
		if _, err := s.pool.Exec(ctx, s.sql(`ANALYZE {s}.jobs`)); err != nil {
			s.log.Warn("postgres: first ANALYZE of jobs", "err", err)
			return
		}
		s.statsGiven.Store(true)
	}
}

// sqlExpiredLeases lists at most $1 (NULL: all) running jobs whose lease
// expired by the store's now and at or after $2 (see reapFloor), with
// whether their worker still heartbeats and the store's now.
const sqlExpiredLeases = `WITH n AS MATERIALIZED (SELECT ` + sqlNow + ` AS t)
	SELECT ` + jobColumnsNoPayload + `,
		EXISTS(SELECT 1 FROM {s}.workers w WHERE w.id = jobs.lease_worker AND w.expires_at >= n.t), n.t
	FROM {s}.jobs, n
	WHERE state = 'running' AND lease_expires_at < n.t AND lease_expires_at >= $2::bigint
	ORDER BY lease_expires_at, id LIMIT $1::bigint`

// JobListExpiredLeases lists running jobs whose lease has expired by the
// store's clock, oldest expiry first.
func (s *Store) JobListExpiredLeases(ctx context.Context, p *backend.JobListExpiredLeasesParams) ([]backend.ExpiredLease, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	s.firstStats(ctx)
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	began := time.Now()
	from := s.reapFrom(began)
	rows, err := s.pool.Query(ctx, s.sql(sqlExpiredLeases), limit, from)
	if err != nil {
		return nil, fmt.Errorf("postgres: expired leases: %w", err)
	}
	defer rows.Close()
	var out []backend.ExpiredLease
	var now int64
	for rows.Next() {
		var alive bool
		j, err := scanJob(rows, &alive, &now)
		if err != nil {
			return nil, fmt.Errorf("postgres: expired leases: %w", err)
		}
		out = append(out, backend.ExpiredLease{Job: j, WorkerAlive: alive})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: expired leases: %w", err)
	}
	if now == 0 {
		// No row carried the store's now. If it cannot be read, the
		// floor stays where it was.
		t, err := s.Now(ctx)
		if err != nil {
			return out, nil
		}
		now = t.UnixNano()
	}
	next := now - reapFloorMargin
	if len(out) > 0 && out[0].Job.Lease != nil {
		next = min(next, out[0].Job.Lease.ExpiresAt.UnixNano())
	}
	s.reapMu.Lock()
	if from == 0 {
		s.reap.full, s.reap.fullTook = began, time.Since(began)
	}
	s.reap.from = next
	s.reapMu.Unlock()
	return out, nil
}

// sqlRenew extends the leases of $1 ids, $2 lease ids, $3 fences by $4
// ns.
//
// It locks its rows in id order and passes by those another write holds
// (SKIP LOCKED): a renewal of the hundreds of jobs an engine holds waited
// on their completions, which waited on it in turn — 6 s per renewal,
// and the completions with it, under scripts/bench pressure's backlog. A
// row passed by whose lease still matched in the statement's snapshot
// comes back with busy = true (ErrBusy: renewed next round); a row whose
// lease does not match is not returned (ErrLeaseLost).
//
// Each row is matched to its items through a jsonb object of them (id ->
// ["lease:fence", …]: an id may come twice, once stale), a lookup per row, and written through one probe
// of the primary key for all the ids: joined to the items instead, its
// generic plan probed the whole array once per item (TestBatchWrites-
// GrowLinearly: 409,809 buffers for 400 jobs, 5,804 for 40). The state
// is an InitPlan's value, not a literal, so that the planner cannot walk
// jobs_running (which keeps an entry for every job claimed since the last
// VACUUM).
var sqlRenew = `WITH k AS MATERIALIZED (SELECT 'running'::text AS running, jsonb_object_agg(g.id, g.refs) AS items
		FROM (SELECT x.id, jsonb_agg(x.lease_id || ':' || x.fence) AS refs
			FROM unnest($1::text[], $2::text[], $3::bigint[]) AS x(id, lease_id, fence) GROUP BY x.id) g),
	m AS MATERIALIZED (SELECT j.id, j.fence, j.lease_id FROM {s}.jobs j
		WHERE j.id = ANY($1::text[]) AND j.state = (SELECT running FROM k)
			AND (SELECT items FROM k) -> j.id ? (j.lease_id || ':' || j.fence)),
	l AS MATERIALIZED (SELECT j.id FROM {s}.jobs j
		WHERE j.id = ANY(ARRAY(SELECT id FROM m)) AND j.state = (SELECT running FROM k)
			AND (SELECT items FROM k) -> j.id ? (j.lease_id || ':' || j.fence)
		ORDER BY j.id FOR UPDATE OF j SKIP LOCKED),
	u AS (UPDATE {s}.jobs j SET lease_expires_at = ` + sqlNow + ` + $4, version = j.version + 1
		WHERE j.id = ANY(ARRAY(SELECT id FROM l))
		RETURNING j.id, j.fence, j.lease_id)
	SELECT id, fence, lease_id, false FROM u
	UNION ALL SELECT m.id, m.fence, m.lease_id, true FROM m WHERE m.id NOT IN (SELECT id FROM l)`

// JobLeaseRenew extends leases in one statement; each item is fenced on
// its own.
func (s *Store) JobLeaseRenew(ctx context.Context, p *backend.JobLeaseRenewParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	ids, leases, fences := make([]string, len(p.Items)), make([]string, len(p.Items)), make([]int64, len(p.Items))
	for i, it := range p.Items {
		ids[i], leases[i], fences[i] = it.ID, it.LeaseID, it.Fence
	}
	renewed, busy := map[refKey]bool{}, map[refKey]bool{}
	err := s.single(ctx, func(q querier) error {
		clear(renewed)
		clear(busy)
		rows, err := q.Query(ctx, s.sql(sqlRenew), ids, leases, fences, int64(lease))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k refKey
			var b bool
			if err := rows.Scan(&k.id, &k.fence, &k.lease, &b); err != nil {
				return err
			}
			if b {
				busy[k] = true
			} else {
				renewed[k] = true
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: renew leases: %w", err)
	}
	for i, it := range p.Items {
		k := refKey{it.ID, it.LeaseID, it.Fence}
		switch {
		case renewed[k]:
		case busy[k]:
			out[i] = fmt.Errorf("renew lease of job %s: %w", it.ID, sluicetype.ErrBusy)
		default:
			out[i] = fmt.Errorf("renew lease of job %s: %w", it.ID, sluicetype.ErrLeaseLost)
		}
	}
	return out, nil
}
