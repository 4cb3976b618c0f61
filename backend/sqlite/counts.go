package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The maintained counters (job_counts): every write that inserts, deletes
// or moves jobs gathers its changes in a countDeltas while it works and
// applies them before it commits, one upsert per (queue, state) it
// touched, in the same transaction. No per-row triggers: a batch of a
// thousand claims costs two counter writes, not two thousand.

type countKey struct {
	queue string
	state sluicetype.State
}

// countDeltas are the changes of one transaction to job_counts.
type countDeltas map[countKey]int64

func (d countDeltas) add(queue string, state sluicetype.State, n int64) {
	if n != 0 {
		d[countKey{queue, state}] += n
	}
}

// move counts n jobs of queue leaving from and entering to. An empty or
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

// sqlCountsApply adds ?1, a JSON array of [queue, state, delta], to the
// counters. WHERE true keeps the parser from reading ON CONFLICT as a join
// constraint.
const sqlCountsApply = `INSERT INTO job_counts (queue, state, n)
	SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?1) WHERE true
	ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n`

// sqlCountAdd adds one delta: ?1 queue, ?2 state, ?3 delta. Most writes
// touch one or two counters; a prepared single-row upsert is cheaper for
// them than decoding JSON.
const sqlCountAdd = `INSERT INTO job_counts (queue, state, n) VALUES (?1, ?2, ?3)
	ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n`

// applyCounts writes d to job_counts inside tx.
func (s *Store) applyCounts(ctx context.Context, tx *wtx, d countDeltas) error {
	nonzero := 0
	for _, n := range d {
		if n != 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		return nil
	}
	if nonzero <= 2 {
		add := tx.StmtContext(ctx, s.countAdd)
		for k, n := range d {
			if n == 0 {
				continue
			}
			if _, err := add.ExecContext(ctx, k.queue, string(k.state), n); err != nil {
				return fmt.Errorf("sqlite: job counts: %w", err)
			}
		}
		return nil
	}
	b := make([]byte, 0, 2+nonzero*40)
	b = append(b, '[')
	first := true
	for k, n := range d {
		if n == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '[')
		b = appendJSONString(b, k.queue)
		b = append(b, ',')
		b = appendJSONString(b, string(k.state))
		b = append(b, ',')
		b = strconv.AppendInt(b, n, 10)
		b = append(b, ']')
	}
	b = append(b, ']')
	if _, err := tx.StmtContext(ctx, s.countsApply).ExecContext(ctx, string(b)); err != nil {
		return fmt.Errorf("sqlite: job counts: %w", err)
	}
	return nil
}

// JobCountByQueue reads the maintained counters of one queue or all.
// States with no jobs are left out.
func (s *Store) JobCountByQueue(ctx context.Context, p *backend.JobCountByQueueParams) (map[string]map[sluicetype.State]int64, error) {
	q := `SELECT queue, state, n FROM job_counts WHERE n != 0`
	args := []any{}
	if p.Queue != "" {
		q = `SELECT queue, state, n FROM job_counts WHERE queue = ? AND n != 0`
		args = append(args, p.Queue)
	}
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: job counts: %w", err)
	}
	defer rows.Close()
	out := map[string]map[sluicetype.State]int64{}
	for rows.Next() {
		var queue, state string
		var n int64
		if err := rows.Scan(&queue, &state, &n); err != nil {
			return nil, fmt.Errorf("sqlite: job counts: %w", err)
		}
		m := out[queue]
		if m == nil {
			m = map[sluicetype.State]int64{}
			out[queue] = m
		}
		m[sluicetype.State(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: job counts: %w", err)
	}
	return out, nil
}

// JobCountReconcile recounts job_counts from the jobs, in one write
// transaction (a full scan of jobs: for now and then, not every tick).
//
// The jobs are counted in Go as they stream by, not with GROUP BY: no
// index has (queue, state), so SQLite would sort every row first, in
// memory (temp_store is MEMORY) — about 150 MB at a million jobs.
func (s *Store) JobCountReconcile(ctx context.Context) error {
	return s.writeTx(ctx, func(tx *wtx, _ time.Time) error {
		counts := map[countKey]int64{}
		rows, err := tx.QueryContext(ctx, `SELECT queue, state FROM jobs`)
		if err != nil {
			return fmt.Errorf("sqlite: reconcile job counts: %w", err)
		}
		defer rows.Close()
		var queue, state sql.RawBytes
		for rows.Next() {
			if err := rows.Scan(&queue, &state); err != nil {
				return fmt.Errorf("sqlite: reconcile job counts: %w", err)
			}
			counts[countKey{string(queue), sluicetype.State(state)}]++
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: reconcile job counts: %w", err)
		}
		rows.Close()
		if _, err := tx.ExecContext(ctx, `DELETE FROM job_counts`); err != nil {
			return fmt.Errorf("sqlite: reconcile job counts: %w", err)
		}
		for k, n := range counts {
			if _, err := tx.ExecContext(ctx, `INSERT INTO job_counts (queue, state, n) VALUES (?, ?, ?)`,
				k.queue, string(k.state), n); err != nil {
				return fmt.Errorf("sqlite: reconcile job counts: %w", err)
			}
		}
		return nil
	})
}

// countsServe reports whether the maintained counters can answer a count:
// a filter of states, and queues at most, nothing the counters do not
// split by. A count as of a time also takes away the jobs that entered
// their state after it, which an index finds at the end of its
// state_changed_at range for every state but available (jobs_claim has no
// state_changed_at; a count of available jobs as of a time reads them).
func countsServe(p *backend.JobCountMatchingParams) bool {
	f := &p.Filter
	if len(f.States) == 0 || len(f.Kinds) > 0 || len(f.IDs) > 0 || f.Fingerprint != "" || f.UniqueKey != "" ||
		len(f.Tags) > 0 || f.Error != "" || f.ErrorPattern != "" || len(f.Payload) > 0 || len(f.Meta) > 0 ||
		f.CreatedAfter != nil || f.CreatedBefore != nil || f.FinalizedAfter != nil || f.FinalizedBefore != nil || f.ExpiresWithin != nil ||
		f.PlanCutoff != nil {
		return false
	}
	for _, st := range f.States {
		if !st.Valid() || (p.AsOf != nil && st == sluicetype.StateAvailable) {
			return false
		}
	}
	return true
}

// jobCountByCounters counts the jobs of a states-and-queues filter exactly
// from the maintained counters, in one statement (one snapshot): the
// counters, less the jobs that entered their state after AsOf, less the
// superseded ones when excluded. Counting the jobs themselves reads an
// index entry per job — and, under a queue condition, which no index with
// state_changed_at holds first, the row of each.
func (s *Store) jobCountByCounters(ctx context.Context, p *backend.JobCountMatchingParams) (int64, bool, error) {
	q, args := countByCountersQuery(p)
	var n int64
	if err := s.queryCount(ctx, q, args, &n); err != nil {
		return 0, false, err
	}
	if p.Max > 0 && n > p.Max {
		return p.Max, true, nil
	}
	return n, false, nil
}

// countByCountersQuery is jobCountByCounters' statement. Each correction
// names its index: the jobs it takes away are the few at the end of a
// range, and the queue condition, tested on their rows, must not lead the
// planner to an index that holds the queue but reads every job of the
// state.
func countByCountersQuery(p *backend.JobCountMatchingParams) (string, []any) {
	states := slices.Compact(slices.Sorted(slices.Values(p.Filter.States)))
	var q strings.Builder
	var args []any
	cw := &where{}
	cw.addStates(states)
	cw.in("queue", p.Filter.Queues)
	q.WriteString("SELECT (SELECT coalesce(sum(n), 0) FROM job_counts WHERE " + cw.sql() + ")")
	args = append(args, cw.args...)
	if p.AsOf != nil {
		asOf := p.AsOf.UnixNano()
		for _, st := range states {
			w := &where{}
			from := "jobs INDEXED BY jobs_state_changed"
			w.add("state = '" + string(st) + "'")
			if st == sluicetype.StateRunning {
				from = "jobs INDEXED BY jobs_running"
			} else {
				w.add(sqlListable)
			}
			w.add("state_changed_at > ?", asOf)
			w.in("queue", p.Filter.Queues)
			q.WriteString(" - (SELECT count(*) FROM " + from + " WHERE " + w.sql() + ")")
			args = append(args, w.args...)
		}
	}
	if p.ExcludeSuperseded {
		w := &where{}
		w.add("superseded_by != ''")
		w.addStates(states)
		w.in("queue", p.Filter.Queues)
		if p.AsOf != nil {
			w.add("state_changed_at <= ?", p.AsOf.UnixNano())
		}
		q.WriteString(" - (SELECT count(*) FROM jobs INDEXED BY jobs_superseded WHERE " + w.sql() + ")")
		args = append(args, w.args...)
	}
	return q.String(), args
}
