package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

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
