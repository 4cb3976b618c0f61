package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Maintenance, fingerprints, queues, workers and leaders.

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

// sqlScheduleDue moves the due jobs of one state ($3) to $4, at most $2,
// in scheduled_at order: $1 now. SKIP LOCKED: two maintenance runs (a
// leader handing over) pass each other by.
const sqlScheduleDue = `UPDATE {s}.jobs j SET state = $4, state_changed_at = $1, version = j.version + 1
	FROM (SELECT id FROM {s}.jobs WHERE state IN ('scheduled', 'retryable') AND state = $3 AND scheduled_at <= $1
		ORDER BY scheduled_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
	WHERE j.id = d.id
	RETURNING j.queue, j.priority, j.scheduled_at`

// JobScheduleDue makes due scheduled and retryable jobs available and
// returns the queues that got work, sorted; one notification wakes their
// workers in every process.
func (s *Store) JobScheduleDue(ctx context.Context, p *backend.JobScheduleDueParams) ([]string, error) {
	if p.To == "" {
		return nil, fmt.Errorf("schedule due: %w: no target state", sluicetype.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	var queues []string
	first := map[string]orderKey{} // per queue, the first promoted job in claim order
	err := s.writeTx(ctx, func(tx *wtx) error {
		queues = queues[:0]
		clear(first)
		seen := map[string]bool{}
		counts := countDeltas{}
		moved := 0
		for _, from := range p.From {
			if moved >= limit {
				break
			}
			rows, err := tx.Query(ctx, tx.q(sqlScheduleDue), tx.nowNs, limit-moved, string(from), string(p.To))
			if err != nil {
				return fmt.Errorf("postgres: schedule due: %w", err)
			}
			for rows.Next() {
				var q string
				var k orderKey
				if err := rows.Scan(&q, &k.priority, &k.scheduled); err != nil {
					rows.Close()
					return fmt.Errorf("postgres: schedule due: %w", err)
				}
				moved++
				counts.move(q, from, p.To, 1)
				if f, ok := first[q]; !ok || k.before(f) {
					first[q] = k
				}
				if !seen[q] {
					seen[q] = true
					queues = append(queues, q)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("postgres: schedule due: %w", err)
			}
		}
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		// The promoted jobs keep their scheduled_at: the cursors move
		// back to them below.
		tx.cursorsKept = true
		if p.To == sluicetype.StateAvailable {
			return s.notifyQueues(ctx, tx, seen)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.To == sluicetype.StateAvailable {
		for q, k := range first {
			s.cursorBack(q, k)
		}
	}
	sort.Strings(queues)
	return queues, nil
}

// sqlDeleteExpired deletes terminal jobs of state $1 finalized before $2
// in queues $3 (NULL: all but those in $4), at most $5, and returns their
// queues.
//
// It runs in the simple protocol, planned for its values, and in
// jobs_state_changed's order: the generic plan of the prepared statement
// was a sequential scan of every job, once a second for each state (the
// retention tick): 170,000 buffers and 2 s a sweep on scripts/bench
// pressure's 1.4 million jobs, for an empty range of a day ago.
const sqlDeleteExpired = `DELETE FROM {s}.jobs j
	USING (SELECT id FROM {s}.jobs
		WHERE state = $1 AND state NOT IN ('available', 'running') AND state_changed_at < $2 AND finalized_at < $2
		AND ($3::text IS NULL OR queue = $3) AND NOT (queue = ANY($4::text[]))
		ORDER BY state_changed_at, id LIMIT $5 FOR UPDATE SKIP LOCKED) d
	WHERE j.id = d.id
	RETURNING j.queue`

// JobDeleteExpired deletes terminal jobs past their retention (with their
// events), at most Limit in all. A retention of 0 deletes at once; a
// negative one, like a missing state, keeps the jobs.
func (s *Store) JobDeleteExpired(ctx context.Context, p *backend.JobDeleteExpiredParams) (int, error) {
	return s.jobDeleteExpired(ctx, p, time.Time{})
}

// jobDeleteExpired is JobDeleteExpired; a non-zero evictAt stands for the
// store's now as the archive's eviction time (tests of months gone by).
func (s *Store) jobDeleteExpired(ctx context.Context, p *backend.JobDeleteExpiredParams, evictAt time.Time) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	overriding := map[sluicetype.State][]string{}
	queues := make([]string, 0, len(p.QueueRetention))
	for q, m := range p.QueueRetention {
		queues = append(queues, q)
		for state := range m {
			overriding[state] = append(overriding[state], q)
		}
	}
	sort.Strings(queues)
	states := func(m map[sluicetype.State]time.Duration) []sluicetype.State {
		out := make([]sluicetype.State, 0, len(m))
		for _, st := range sluicetype.AllStates {
			if d, ok := m[st]; ok && st.Terminal() && d >= 0 {
				out = append(out, st)
			}
		}
		return out
	}
	total := 0
	err := s.writeTx(ctx, func(tx *wtx) error {
		total = 0
		tx.cursorsKept = true // retention deletes; it makes nothing available
		counts := countDeltas{}
		evicted := tx.now
		if !evictAt.IsZero() {
			evicted = evictAt
		}
		query := sqlDeleteExpired
		if s.archives() {
			query = sqlDeleteExpiredArchiving
			if err := s.ensurePartitions(ctx, tx, evicted); err != nil {
				return err
			}
			if _, err := s.dropClosedPartitions(ctx, tx, evicted, s.archiveRetention); err != nil {
				return err
			}
		}
		cut := func(d time.Duration) int64 {
			if d == 0 {
				return tx.nowNs + 1
			}
			return tx.now.Add(-d).UnixNano()
		}
		del := func(state sluicetype.State, d time.Duration, queue *string, skip []string) error {
			if skip == nil {
				skip = []string{}
			}
			// The simple protocol: the sweep is planned for its values.
			a := []any{pgx.QueryExecModeSimpleProtocol, string(state), cut(d), queue, skip, limit - total}
			if s.archives() {
				a = append(a, evicted.UnixNano(), s.archiveQueues)
			}
			qs, err := queryStrings(ctx, tx, tx.q(query), a...)
			if err != nil {
				return fmt.Errorf("postgres: delete expired %s jobs: %w", state, err)
			}
			for _, q := range qs {
				counts.move(q, state, sluicetype.StateDeleted, 1)
				total++
			}
			return nil
		}
		for _, state := range states(p.Retention) {
			if total >= limit {
				break
			}
			if err := del(state, p.Retention[state], nil, overriding[state]); err != nil {
				return err
			}
		}
		for _, q := range queues {
			m := p.QueueRetention[q]
			for _, state := range states(m) {
				if total >= limit {
					break
				}
				if err := del(state, m[state], &q, nil); err != nil {
					return err
				}
			}
		}
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}

var fingerprintColumns = `f.fingerprint, f.kind, f.status, f.since, f.crashes, f.last_error, f.last_job_id,
	(SELECT count(*) FROM {s}.jobs WHERE ` + fingerprintIs("{s}.job_fingerprints", "jobs.", "f.fingerprint") + ` AND jobs.state = 'quarantined')`

func scanFingerprint(row pgx.Row) (*sluicetype.Fingerprint, error) {
	var f sluicetype.Fingerprint
	var status string
	var since int64
	var crashes int32
	var held int64
	if err := row.Scan(&f.Fingerprint, &f.Kind, &status, &since, &crashes, &f.LastError, &f.LastJobID, &held); err != nil {
		return nil, err
	}
	f.Status, f.Since, f.Crashes, f.Held = sluicetype.FingerprintStatus(status), fromNanos(since), int(crashes), int(held)
	return &f, nil
}

// FingerprintGet returns a quarantine record or ErrNotFound.
func (s *Store) FingerprintGet(ctx context.Context, p *backend.FingerprintGetParams) (*sluicetype.Fingerprint, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	f, err := scanFingerprint(s.pool.QueryRow(ctx, s.sql(`SELECT `+fingerprintColumns+` FROM {s}.fingerprints f WHERE f.fingerprint = $1`), p.Fingerprint))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: fingerprint %s: %w", p.Fingerprint, err)
	}
	if err := s.addStepCrashes(ctx, []*sluicetype.Fingerprint{f}); err != nil {
		return nil, err
	}
	return f, nil
}

// FingerprintList lists quarantined and probationary fingerprints, the most
// recently quarantined first.
func (s *Store) FingerprintList(ctx context.Context, p *backend.FingerprintListParams) ([]*sluicetype.Fingerprint, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+fingerprintColumns+` FROM {s}.fingerprints f
		WHERE f.status IN ('quarantined', 'probation')
		ORDER BY f.since DESC, f.fingerprint LIMIT $1::bigint`), limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list fingerprints: %w", err)
	}
	defer rows.Close()
	var out []*sluicetype.Fingerprint
	for rows.Next() {
		f, err := scanFingerprint(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list fingerprints: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list fingerprints: %w", err)
	}
	if err := s.addStepCrashes(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// FingerprintRelease puts the record on probation and returns its held
// jobs to available with their crash counters reset, each with its event.
func (s *Store) FingerprintRelease(ctx context.Context, p *backend.FingerprintReleaseParams) (int, error) {
	if p.Spec.Has(backend.EffectDelete) || len(p.Spec.From) == 0 {
		return 0, fmt.Errorf("release fingerprint %s: %w: the spec must move jobs", p.Fingerprint, sluicetype.ErrInvalid)
	}
	n := 0
	err := s.writeTx(ctx, func(tx *wtx) error {
		n = 0
		tag, err := tx.Exec(ctx, tx.q(`UPDATE {s}.fingerprints SET status = 'probation' WHERE fingerprint = $1`), p.Fingerprint)
		if err != nil {
			return fmt.Errorf("postgres: release fingerprint %s: %w", p.Fingerprint, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
		}
		b := argBase(p.Spec)
		q := tx.q(`WITH old AS (SELECT id, state, queue FROM {s}.jobs WHERE ` + fingerprintIs("{s}.job_fingerprints", "", fmt.Sprintf("$%d", b)) +
			` AND state = ANY(` + fmt.Sprintf("$%d", b+1) + `::text[]) ORDER BY id FOR UPDATE),
		moved AS (UPDATE {s}.jobs SET ` + specSet(p.Spec) + ` FROM old WHERE jobs.id = old.id
			RETURNING jobs.id, jobs.attempt, old.state, old.queue),
		ev AS (INSERT INTO {s}.job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
			SELECT id, ` + fmt.Sprintf("$%d, $1, $%d, state, $%d, attempt, $%d", b+2, b+3, b+4, b+5) + ` FROM moved)
		SELECT queue, state, count(*) FROM moved GROUP BY queue, state`)
		a := append(setArgs(p.Spec, tx.nowNs, nil), p.Fingerprint, stateNames(p.Spec.From),
			string(p.Event.Kind), p.Event.Actor, string(p.Event.To), p.Event.Message)
		rows, err := tx.Query(ctx, q, a...)
		if err != nil {
			return fmt.Errorf("postgres: release fingerprint %s: %w", p.Fingerprint, err)
		}
		counts := countDeltas{}
		wake := map[string]bool{}
		for rows.Next() {
			var queue, state string
			var c int64
			if err := rows.Scan(&queue, &state, &c); err != nil {
				rows.Close()
				return fmt.Errorf("postgres: release fingerprint %s: %w", p.Fingerprint, err)
			}
			counts.move(queue, sluicetype.State(state), p.Spec.To, c)
			n += int(c)
			wake[queue] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: release fingerprint %s: %w", p.Fingerprint, err)
		}
		tx.keep(n)
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		if p.Spec.To == sluicetype.StateAvailable {
			return s.notifyQueues(ctx, tx, wake)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// QueueList names every queue with jobs (per the counters) or a pause
// record, sorted, with its counts.
func (s *Store) QueueList(ctx context.Context) ([]sluicetype.QueueInfo, error) {
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT name, paused FROM {s}.queues`))
	if err != nil {
		return nil, fmt.Errorf("postgres: list queues: %w", err)
	}
	defer rows.Close()
	paused := map[string]bool{}
	for rows.Next() {
		var name string
		var p bool
		if err := rows.Scan(&name, &p); err != nil {
			return nil, fmt.Errorf("postgres: list queues: %w", err)
		}
		paused[name] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list queues: %w", err)
	}
	names := make([]string, 0, len(counts)+len(paused))
	for q := range counts {
		names = append(names, q)
	}
	for q := range paused {
		if _, ok := counts[q]; !ok {
			names = append(names, q)
		}
	}
	sort.Strings(names)
	out := make([]sluicetype.QueueInfo, len(names))
	for i, q := range names {
		c := counts[q]
		if c == nil {
			c = map[sluicetype.State]int64{}
		}
		out[i] = sluicetype.QueueInfo{Name: q, Paused: paused[q], Counts: c}
	}
	return out, nil
}

func (s *Store) queueSetPaused(ctx context.Context, p *backend.QueuePauseParams, paused bool) error {
	return s.writeTx(ctx, func(tx *wtx) error {
		var at *int64
		if paused {
			at = &tx.nowNs
		}
		if _, err := tx.Exec(ctx, tx.q(`INSERT INTO {s}.queues AS q (name, paused, paused_at, paused_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, paused_at = excluded.paused_at,
				paused_by = excluded.paused_by`), p.Queue, paused, at, p.Actor); err != nil {
			return fmt.Errorf("postgres: pause queue %s: %w", p.Queue, err)
		}
		if !paused {
			return s.notifyQueues(ctx, tx, map[string]bool{p.Queue: true})
		}
		return nil
	})
}

// QueuePause stops claims from the queue (running jobs finish).
func (s *Store) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	return s.queueSetPaused(ctx, p, true)
}

// QueueResume lets workers claim from the queue again.
func (s *Store) QueueResume(ctx context.Context, p *backend.QueuePauseParams) error {
	return s.queueSetPaused(ctx, p, false)
}

const defaultTTL = 15 * time.Second

// WorkerHeartbeat records that a worker process lives until TTL from now.
func (s *Store) WorkerHeartbeat(ctx context.Context, p *backend.WorkerHeartbeatParams) error {
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultTTL
	}
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	return s.single(ctx, func(q querier) error {
		if _, err := q.Exec(ctx, s.sql(`WITH n AS MATERIALIZED (SELECT `+sqlNow+` AS t)
			INSERT INTO {s}.workers AS w (id, host, pid, queues, started_at, heartbeat_at, expires_at)
			SELECT $1, $2, $3, $4, n.t, n.t, n.t + $5 FROM n
			ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
				heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at`),
			p.ID, p.Host, p.PID, queues, int64(ttl)); err != nil {
			return fmt.Errorf("postgres: heartbeat of worker %s: %w", p.ID, err)
		}
		return nil
	})
}

// WorkerDelete removes a worker's record.
func (s *Store) WorkerDelete(ctx context.Context, p *backend.WorkerDeleteParams) error {
	return s.single(ctx, func(q querier) error {
		if _, err := q.Exec(ctx, s.sql(`DELETE FROM {s}.workers WHERE id = $1`), p.ID); err != nil {
			return fmt.Errorf("postgres: delete worker %s: %w", p.ID, err)
		}
		return nil
	})
}

// LeaderAttempt takes or renews the named lease for holder and reports
// whether holder leads until TTL from now.
func (s *Store) LeaderAttempt(ctx context.Context, p *backend.LeaderAttemptParams) (bool, error) {
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultTTL
	}
	var lead bool
	err := s.single(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, s.sql(`WITH n AS MATERIALIZED (SELECT `+sqlNow+` AS t)
			INSERT INTO {s}.leaders AS l (name, holder, expires_at) SELECT $1, $2, n.t + $3 FROM n
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE l.holder = excluded.holder OR l.expires_at <= (SELECT t FROM n)`), p.Name, p.Holder, int64(ttl))
		if err != nil {
			return fmt.Errorf("postgres: leader %s: %w", p.Name, err)
		}
		lead = tag.RowsAffected() > 0
		return nil
	})
	if err != nil {
		return false, err
	}
	return lead, nil
}

// LeaderResign gives the lease up if holder has it.
func (s *Store) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	return s.single(ctx, func(q querier) error {
		if _, err := q.Exec(ctx, s.sql(`DELETE FROM {s}.leaders WHERE name = $1 AND holder = $2`), p.Name, p.Holder); err != nil {
			return fmt.Errorf("postgres: resign leader %s: %w", p.Name, err)
		}
		return nil
	})
}

// Capabilities: every filter field, error groups, bulk operations,
// maintained counts, queue pausing and idempotency keys committed with
// the mutation, the cold archive; LISTEN/NOTIFY wake-ups unless opened with NoListen.
func (s *Store) Capabilities() []backend.Capability {
	cs := []backend.Capability{
		backend.CapabilityFilterPayload, backend.CapabilityFilterMeta, backend.CapabilityFilterTags,
		backend.CapabilityFilterError, backend.CapabilityErrorGroups, backend.CapabilityOperations,
		backend.CapabilityCounts, backend.CapabilityQueuePause, backend.CapabilityIdempotency,
		backend.CapabilityArchive,
	}
	if s.notify != nil {
		cs = append(cs, backend.CapabilityWakeups)
	}
	return cs
}
