package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The maintained counters (job_counts): every write that inserts, deletes
// or moves jobs adds its deltas in its own transaction (or statement),
// one row per (queue, state) it touched, in one of countShards shards. The
// shard is random per write, so two transactions moving jobs of one queue
// rarely wait for each other's counter row; the rows are written in key
// order, so they never deadlock on them.

const countShards = 64

type countKey struct {
	queue string
	state sluicetype.State
}

// countDeltas are one write's changes to job_counts.
type countDeltas map[countKey]int64

func (d countDeltas) add(queue string, state sluicetype.State, n int64) {
	if n != 0 {
		d[countKey{queue, state}] += n
	}
}

// move counts n jobs of queue leaving from and entering to; an empty or
// StateDeleted side is no state (an insert or a delete).
func (d countDeltas) move(queue string, from, to sluicetype.State, n int64) {
	if from == to {
		return
	}
	if from != "" && from != sluicetype.StateDeleted {
		d.add(queue, from, -n)
	}
	if to != "" && to != sluicetype.StateDeleted {
		d.add(queue, to, n)
	}
}

func countsOf(ds []backend.CountDelta) countDeltas {
	c := countDeltas{}
	for _, d := range ds {
		c.move(d.Queue, d.From, d.To, d.N)
	}
	return c
}

// sqlCountsApply adds the deltas of arrays $1 queues, $2 states, $3 deltas
// (in key order) to shard $4.
const sqlCountsApply = `INSERT INTO {s}.job_counts (queue, state, shard, n)
	SELECT q, st, $4, d FROM unnest($1::text[], $2::text[], $3::bigint[]) AS c(q, st, d)
	ON CONFLICT (queue, state, shard) DO UPDATE SET n = job_counts.n + excluded.n`

// applyCounts writes d in tx.
func (s *Store) applyCounts(ctx context.Context, q querier, d countDeltas) error {
	keys := make([]countKey, 0, len(d))
	for k, n := range d {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].queue != keys[j].queue {
			return keys[i].queue < keys[j].queue
		}
		return keys[i].state < keys[j].state
	})
	qs, sts, ns := make([]string, len(keys)), make([]string, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		qs[i], sts[i], ns[i] = k.queue, string(k.state), d[k]
	}
	if _, err := q.Exec(ctx, s.sql(sqlCountsApply), qs, sts, ns, rand.IntN(countShards)); err != nil {
		return fmt.Errorf("postgres: job counts: %w", err)
	}
	return nil
}

// JobCountByQueue sums the shards of the maintained counters of one queue
// or all. States with no jobs are left out.
func (s *Store) JobCountByQueue(ctx context.Context, p *backend.JobCountByQueueParams) (map[string]map[sluicetype.State]int64, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT queue, state, sum(n)::bigint FROM {s}.job_counts
		WHERE ($1 = '' OR queue = $1) GROUP BY queue, state HAVING sum(n) <> 0`), p.Queue)
	if err != nil {
		return nil, fmt.Errorf("postgres: job counts: %w", err)
	}
	defer rows.Close()
	out := map[string]map[sluicetype.State]int64{}
	for rows.Next() {
		var queue, state string
		var n int64
		if err := rows.Scan(&queue, &state, &n); err != nil {
			return nil, fmt.Errorf("postgres: job counts: %w", err)
		}
		m := out[queue]
		if m == nil {
			m = map[sluicetype.State]int64{}
			out[queue] = m
		}
		m[sluicetype.State(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: job counts: %w", err)
	}
	return out, nil
}

// JobCountReconcile recounts job_counts from the jobs in one transaction.
// It locks job_counts against writers while it counts (SHARE ROW
// EXCLUSIVE lets reads through), so no delta committed meanwhile is lost
// or counted twice.
func (s *Store) JobCountReconcile(ctx context.Context) error {
	return s.writeTx(backend.WithoutIdempotencyWrite(ctx), func(tx *wtx) error {
		tx.cursorsKept = true
		if _, err := tx.Exec(ctx, tx.q(`LOCK TABLE {s}.job_counts IN SHARE ROW EXCLUSIVE MODE`)); err != nil {
			return fmt.Errorf("postgres: reconcile job counts: %w", err)
		}
		if _, err := tx.Exec(ctx, tx.q(`DELETE FROM {s}.job_counts`)); err != nil {
			return fmt.Errorf("postgres: reconcile job counts: %w", err)
		}
		if _, err := tx.Exec(ctx, tx.q(`INSERT INTO {s}.job_counts (queue, state, shard, n)
			SELECT queue, state, 0, count(*) FROM {s}.jobs GROUP BY queue, state`)); err != nil {
			return fmt.Errorf("postgres: reconcile job counts: %w", err)
		}
		return nil
	})
}

// countsServe reports whether the maintained counters can answer a count
// of f: states, and queues at most, nothing the counters do not split by.
func countsServe(f *sluicetype.Filter) bool {
	return len(f.States) > 0 && len(f.Kinds) == 0 && len(f.IDs) == 0 && f.Fingerprint == "" && f.UniqueKey == "" &&
		len(f.Tags) == 0 && f.Error == "" && f.ErrorPattern == "" && len(f.Payload) == 0 && len(f.Meta) == 0 &&
		f.CreatedAfter == nil && f.CreatedBefore == nil && f.FinalizedAfter == nil && f.FinalizedBefore == nil && f.ExpiresWithin == nil &&
		f.PlanCutoff == nil
}

// countCorrectionCap bounds each correction of a counted count in its
// first form (see countByCountersQuery).
const countCorrectionCap = 1000

// jobCountByCounters counts the jobs of a states-and-queues filter exactly
// from the maintained counters, in one statement (one snapshot): the
// counters, less the jobs that entered their state after AsOf (a short
// range at the end of the state_changed_at indexes), less the superseded
// ones when excluded. A count(*) at a million rows reads the whole index
// (and, before a vacuum has set the visibility map, the heap): seconds.
//
// The corrections are first read capped (countCorrectionCap rows each,
// in index order): a plan that walks the index and stops is then the
// cheapest whatever the planner believes. Uncapped, with no statistics
// (autovacuum off, or a mass death not analyzed yet) or in a generic
// plan, state_changed_at > $n looks like a third of the table and a
// non-empty superseded_by like nearly all of it: both were read by a
// sequential scan of every job (100 ms at 100,000 jobs, seconds at a
// million) to find none. Only when a correction fills its cap is the
// count taken again uncapped.
func (s *Store) jobCountByCounters(ctx context.Context, p *backend.JobCountMatchingParams) (int64, bool, error) {
	n, full, err := s.countByCounters(ctx, p, countCorrectionCap)
	if err == nil && full {
		n, _, err = s.countByCounters(ctx, p, 0)
	}
	if err != nil {
		return 0, false, err
	}
	if p.Max > 0 && n > p.Max {
		return p.Max, true, nil
	}
	return n, false, nil
}

// countByCounters runs countByCountersQuery; full reports a correction
// that reached its cap (never when capAt is 0).
func (s *Store) countByCounters(ctx context.Context, p *backend.JobCountMatchingParams, capAt int) (n int64, full bool, err error) {
	q, a, err := s.countByCountersQuery(p, capAt)
	if err != nil {
		return 0, false, err
	}
	var counted int64
	var corr []int64
	if err := s.pool.QueryRow(ctx, q, a...).Scan(&counted, &corr); err != nil {
		return 0, false, fmt.Errorf("postgres: count jobs: %w", err)
	}
	n = counted
	// corr holds, per correction, the jobs it takes away and the rows it
	// read.
	for i := 0; i+1 < len(corr); i += 2 {
		n -= corr[i]
		if capAt > 0 && corr[i+1] >= int64(capAt) {
			full = true
		}
	}
	return n, full, nil
}

// countByCountersQuery is the statement of jobCountByCounters: the
// counters' sum and an array of (taken away, rows read) per correction,
// each correction reading at most capAt rows (0: all).
func (s *Store) countByCountersQuery(p *backend.JobCountMatchingParams, capAt int) (string, []any, error) {
	base := s.newWhere(nil)
	if err := base.addFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	var q strings.Builder
	cw := base.clone()
	cw.addStates(p.Filter.States)
	q.WriteString(s.sql("SELECT (SELECT coalesce(sum(n), 0) FROM {s}.job_counts WHERE ") + cw.sql() + ")::bigint, ARRAY[]::bigint[]")
	// The queue condition stays out of the WHERE of the two corrections
	// (a FILTER of the count instead): given (state, queue), the planner
	// takes jobs_error_groups, where state_changed_at comes after kind and
	// pattern, and reads every job of the state (7 s at a million);
	// without it, the range on the state_changed_at indexes.
	// Its argument is added only when a correction uses it: an argument
	// no statement names is an error to PostgreSQL.
	queues := "true"
	if len(p.Filter.Queues) > 0 && (p.AsOf != nil || p.ExcludeSuperseded) {
		qw := s.newWhere(base.a)
		qw.in("queue", p.Filter.Queues)
		queues = qw.sql()
	}
	// The cap is a literal: a LIMIT $n is planned as a tenth of the rows.
	limit := " LIMIT " + strconv.Itoa(capAt)
	// correction takes away the rows of inner for which cond holds.
	correction := func(cond, cols, from, order string) {
		q.WriteString(" || (SELECT ARRAY[count(*) FILTER (WHERE " + cond + "), count(*)] FROM (SELECT " + cols +
			s.sql(" FROM {s}.jobs WHERE ") + from)
		if capAt > 0 {
			q.WriteString(" ORDER BY " + order + limit)
		}
		q.WriteString(") x)")
	}
	var asOf string
	if p.AsOf != nil {
		asOf = base.a.add(p.AsOf.UnixNano())
		for _, b := range branches(s.newWhere(base.a), p.Filter.States) {
			b.add("state_changed_at > " + asOf)
			correction(queues, "queue", b.sql(), "state_changed_at DESC")
		}
	}
	if p.ExcludeSuperseded {
		w := s.newWhere(base.a)
		w.addStates(p.Filter.States)
		w.add(queues)
		if asOf != "" {
			w.add("state_changed_at <= " + asOf)
		}
		// The superseded jobs are few: their partial index, then the rest.
		correction(w.sql(), "state, queue, state_changed_at", "superseded_by <> ''", "superseded_by")
	}
	return q.String(), base.a.vals, nil
}
