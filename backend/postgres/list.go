package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Listing, counting and grouping jobs: the operator surface's reads.
//
// A list or count over several states is one branch per state, joined by
// UNION ALL (lists, each branch with its own ORDER BY and LIMIT, so the
// planner merges index scans) or a sum (counts). Terminal, scheduled and
// retryable states are read from jobs_state_changed in listing order, so
// a page reads about a page of index entries whatever the table's size;
// available and running jobs have no listing index on purpose (every claim
// and completion would write it): their branch sorts the backlog. A
// filter naming ids or a fingerprint is one query: the primary key or
// job_fingerprints finds its few rows.

// withMode prefixes the arguments of a read with payload or meta
// conditions with pgx's simple protocol: the values inlined, so the query
// is planned for them every time. A generic plan cannot tell a selective
// containment (served by the GIN index) from a common one, and was seen
// to walk a listing index filtering every row instead.
func withMode(f *sluicetype.Filter, a []any) []any {
	if len(f.Payload) == 0 && len(f.Meta) == 0 {
		return a
	}
	return append([]any{pgx.QueryExecModeSimpleProtocol}, a...)
}

// direct reports whether f is best served by one query.
func direct(f *sluicetype.Filter) bool {
	return len(f.IDs) > 0 || f.Fingerprint != ""
}

// branches splits base by state; states empty means all.
func branches(base *where, states []sluicetype.State) []*where {
	if len(states) == 0 {
		states = sluicetype.AllStates
	}
	var out []*where
	seen := map[sluicetype.State]bool{}
	for _, st := range states {
		if seen[st] {
			continue
		}
		seen[st] = true
		w := base.clone()
		w.addStates([]sluicetype.State{st})
		out = append(out, w)
	}
	return out
}

// JobListPage pages job summaries newest first by (state_changed_at, id), or
// oldest first past After when Reverse.
func (s *Store) JobListPage(ctx context.Context, p *backend.JobListPageParams) ([]*sluicetype.Job, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	q, a, err := s.jobListQuery(p)
	if err != nil {
		return nil, err
	}
	wide, err := s.listWide(ctx, &p.Filter)
	if err != nil {
		return nil, err
	}
	var jobs []*sluicetype.Job
	if wide {
		jobs, err = s.listInOrder(ctx, q, a)
	} else {
		jobs, err = collectJobs(s.pool.Query(ctx, q, withMode(&p.Filter, a)...))
	}
	if err != nil {
		return nil, refused(fmt.Errorf("postgres: list jobs: %w", err))
	}
	if jobs == nil {
		jobs = []*sluicetype.Job{}
	}
	for _, j := range jobs {
		// The checkpoint's place holds the wait summary (jobColumnsList).
		if j.Wait, err = sluicetype.ParseWaitSummary(j.Checkpoint); err != nil {
			return nil, fmt.Errorf("postgres: list jobs: job %s: %w", j.ID, err)
		}
		j.Checkpoint = nil
	}
	return jobs, nil
}

// wideShare is the share of each listed state's jobs (by the maintained
// counters) a list's queues must hold for listWide.
const wideShare = 0.1

// listWide reports whether a list of f — states and queues, nothing else
// — is of queues that hold at least wideShare of each listed state's jobs
// by the maintained counters: then a page is best read by walking the
// states' listing indexes in order, testing the queue on each row, and
// stopping at the page's end, which reads about a page of rows per
// wideShare.
//
// The planner chooses between that walk and an index that takes the
// queue as a condition — jobs_error_groups (state, queue, …), or for
// available jobs jobs_claim (queue, …) — followed by a sort of every job
// of the queue: right when the queue holds few of the state's jobs,
// ruinous when it holds most. With statistics it tells the two apart;
// with none (autovacuum off, a mass death not analyzed yet) every
// equality looks like a handful of rows, and a dry run's sample of 20
// jobs read and sorted all of a million dead ones (1.3 s). The counters
// tell them apart exactly, in a read of a few rows.
func (s *Store) listWide(ctx context.Context, f *sluicetype.Filter) (bool, error) {
	if len(f.Queues) == 0 || !countsServe(f) {
		return false, nil
	}
	names := make([]string, len(f.States))
	for i, st := range f.States {
		names[i] = string(st)
	}
	var narrow bool
	err := s.pool.QueryRow(ctx, s.sql(`SELECT coalesce(bool_or(mine < $3 * total), false) FROM (
		SELECT coalesce(sum(n) FILTER (WHERE queue = ANY($1::text[])), 0) AS mine, sum(n) AS total
		FROM {s}.job_counts WHERE state = ANY($2::text[]) GROUP BY state) c`), f.Queues, names, wideShare).Scan(&narrow)
	if err != nil {
		return false, fmt.Errorf("postgres: list jobs: counts: %w", err)
	}
	return !narrow, nil
}

// listInOrder runs a list whose pages are best read in index order (see
// listWide) with sorting disabled for its one statement (SET LOCAL, in a
// read-only transaction of its own): a plan that sorts is then taken only
// where no index gives the order (running jobs, which are few).
func (s *Store) listInOrder(ctx context.Context, q string, a []any) ([]*sluicetype.Job, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET LOCAL enable_sort = off"); err != nil {
		return nil, err
	}
	jobs, err := collectJobs(tx.Query(ctx, q, a...))
	if err != nil {
		return nil, err
	}
	return jobs, tx.Commit(ctx)
}

// jobListQuery builds JobListPage's query.
func (s *Store) jobListQuery(p *backend.JobListPageParams) (string, []any, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.DefaultListLimit
	}
	base := s.newWhere(nil)
	if err := base.addFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	if p.ExcludeSuperseded {
		base.add("superseded_by = ''")
	}
	dir, cmp := "DESC", "<"
	if p.Reverse {
		dir, cmp = "ASC", ">"
	}
	if p.After != nil {
		base.add("(state_changed_at, id) " + cmp + " (" + base.a.add(p.After.At.UnixNano()) + ", " + base.a.add(p.After.ID) + "::text)")
	}
	lim := base.a.add(limit)
	order := " ORDER BY state_changed_at " + dir + ", id " + dir + " LIMIT " + lim
	from := s.sql(" FROM {s}.jobs WHERE ")
	var q strings.Builder
	if direct(&p.Filter) {
		w := base.clone()
		w.addStates(p.Filter.States)
		q.WriteString("SELECT " + jobColumnsList + from + w.sql() + order)
		return q.String(), base.a.vals, nil
	}
	bs := branches(base, p.Filter.States)
	for i, b := range bs {
		sel := "SELECT " + jobColumnsList + from + b.sql() + order
		if len(bs) == 1 {
			q.WriteString(sel)
			break
		}
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("(" + sel + ")")
	}
	if len(bs) > 1 {
		q.WriteString(order)
	}
	return q.String(), base.a.vals, nil
}

// JobCountMatching counts the jobs matching the filter, stopping past Max.
//
// Without the superseded jobs (a bulk selector's count), it counts the
// filter's jobs, superseded or not, which the listing indexes answer
// alone (an index-only scan), and takes away the superseded ones it
// matches, which jobs_superseded finds (they are few).
func (s *Store) JobCountMatching(ctx context.Context, p *backend.JobCountMatchingParams) (int64, bool, error) {
	if s.closed.Load() {
		return 0, false, sluicetype.ErrClosed
	}
	if countsServe(&p.Filter) {
		return s.jobCountByCounters(ctx, p)
	}
	if !p.ExcludeSuperseded || direct(&p.Filter) {
		return s.jobCount(ctx, p)
	}
	w := s.newWhere(nil)
	if err := w.addFilter(&p.Filter); err != nil {
		return 0, false, err
	}
	w.addStates(p.Filter.States)
	if p.AsOf != nil {
		w.add("state_changed_at <= " + w.a.add(p.AsOf.UnixNano()))
	}
	w.add("superseded_by <> ''")
	var sup int64
	if err := s.pool.QueryRow(ctx, s.sql("SELECT count(*) FROM {s}.jobs WHERE ")+w.sql(), withMode(&p.Filter, w.a.vals)...).Scan(&sup); err != nil {
		return 0, false, refused(fmt.Errorf("postgres: count jobs: %w", err))
	}
	all := *p
	all.ExcludeSuperseded = false
	if all.Max > 0 {
		all.Max += sup
	}
	n, capped, err := s.jobCount(ctx, &all)
	if err != nil {
		return 0, false, err
	}
	if capped {
		return p.Max, true, nil
	}
	return n - sup, false, nil
}

// jobCount sums one capped count per branch.
func (s *Store) jobCount(ctx context.Context, p *backend.JobCountMatchingParams) (int64, bool, error) {
	base := s.newWhere(nil)
	if err := base.addFilter(&p.Filter); err != nil {
		return 0, false, err
	}
	if p.ExcludeSuperseded {
		base.add("superseded_by = ''")
	}
	if p.AsOf != nil {
		base.add("state_changed_at <= " + base.a.add(p.AsOf.UnixNano()))
	}
	var capAt *int64 // NULL: LIMIT ALL
	if p.Max > 0 {
		c := p.Max + 1
		capAt = &c
	}
	lim := base.a.add(capAt) + "::bigint"
	from := s.sql(" FROM {s}.jobs WHERE ")
	count := func(w *where) string {
		return "(SELECT count(*) FROM (SELECT 1" + from + w.sql() + " LIMIT " + lim + ") x)"
	}
	var q strings.Builder
	q.WriteString("SELECT ")
	if direct(&p.Filter) {
		w := base.clone()
		w.addStates(p.Filter.States)
		q.WriteString(count(w))
	} else {
		for i, b := range branches(base, p.Filter.States) {
			if i > 0 {
				q.WriteString(" + ")
			}
			q.WriteString(count(b))
		}
	}
	var n int64
	if err := s.pool.QueryRow(ctx, q.String(), withMode(&p.Filter, base.a.vals)...).Scan(&n); err != nil {
		return 0, false, refused(fmt.Errorf("postgres: count jobs: %w", err))
	}
	if p.Max > 0 && n > p.Max {
		return p.Max, true, nil
	}
	return n, false, nil
}

// JobCountUniqueHeld counts the matched jobs whose move to p.To would take
// a key another job holds (heldQuery).
func (s *Store) JobCountUniqueHeld(ctx context.Context, p *backend.JobCountUniqueHeldParams) (*backend.UniqueHeldCount, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	out := &backend.UniqueHeldCount{}
	if sluicetype.UniqueStateBit(p.To) == 0 {
		return out, nil
	}
	q, args, err := s.heldQuery(p)
	if err != nil {
		return nil, err
	}
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&out.Held, &out.Holder); err != nil {
		return nil, refused(fmt.Errorf("postgres: count held unique keys: %w", err))
	}
	return out, nil
}

// heldQuery builds JobCountUniqueHeld's query. The jobs with a key are
// those jobs_unique_key covers (its partial term, a non-empty key), and
// each one's holder is found in that index by its key and the holders'
// empty expression, so the planner reads the keyed jobs and one index
// entry per key rather than every matched job (200,000 dead jobs of
// which 20 keyed: an index scan of jobs_unique_key and 20 lookups).
func (s *Store) heldQuery(p *backend.JobCountUniqueHeldParams) (string, []any, error) {
	w := s.newWhere(nil)
	if err := w.addFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	w.addStates(p.Filter.States)
	if p.ExcludeSuperseded && !p.Filter.IncludeSuperseded {
		w.add("superseded_by = ''")
	}
	if p.AsOf != nil {
		w.add("state_changed_at <= " + w.a.add(p.AsOf.UnixNano()))
	}
	w.add("unique_key <> ''")
	w.add(fmt.Sprintf("(unique_states & %d) <> 0", sluicetype.UniqueStateBit(p.To)))
	q := s.sql(`SELECT count(*), COALESCE(min(h), '') FROM (SELECT (SELECT h.id FROM {s}.jobs h
		WHERE h.unique_key = j.unique_key AND h.id <> j.id AND `+uniqueHoldsSQL("h")+` LIMIT 1) AS h
		FROM {s}.jobs j WHERE `) + w.sql() + `) x WHERE h IS NOT NULL`
	return q, withMode(&p.Filter, w.a.vals), nil
}
