package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Listing, counting and grouping jobs: the operator surface's reads.

// maxFilterStmts bounds the read statements kept prepared for queries the
// filter builder writes. Their text depends only on the filter's shape
// (which fields, how many values), so a console's few shapes stay
// prepared; past the bound a query is prepared for its one use.
const maxFilterStmts = 128

// queryRead runs a filter-built query on the read pool, through a kept
// prepared statement while there is room for one.
func (s *Store) queryRead(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c := &s.rstmts
	c.mu.Lock()
	st, room := c.m[q], len(c.m) < maxFilterStmts
	c.mu.Unlock()
	if st == nil && room {
		var err error
		if st, err = c.get(ctx, q); err != nil {
			return nil, err
		}
	}
	if st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.r.QueryContext(ctx, q, args...)
}

// A list or a count over several states is one branch per state, each on
// the index that serves it, joined by UNION ALL (lists) or a sum (counts):
//   - terminal, scheduled and retryable states: jobs_state_changed, read in
//     order (state, state_changed_at, id), so a page reads about a page of
//     index entries whatever the table's size;
//   - available: jobs_claim and jobs_claim_suspect, running: jobs_running.
//     These indexes are not in listing order: the branch reads every job of
//     the state that passes the filter and sorts them. The hot states have
//     no listing index on purpose (every claim and completion would write
//     it); their jobs are the backlog and the running few.
// A filter naming ids or a fingerprint is one query without index hints:
// the primary key or jobs_fingerprint finds its few rows.

// branch is one state's part of a list or count.
type branch struct {
	from string // "jobs" with its index hint
	w    *where
}

// stateBranches splits base by state. states empty means all.
func stateBranches(base *where, states []sluicetype.State) []branch {
	if len(states) == 0 {
		states = sluicetype.AllStates
	}
	var out []branch
	seen := map[sluicetype.State]bool{}
	for _, st := range states {
		if seen[st] {
			continue
		}
		seen[st] = true
		switch st {
		case sluicetype.StateAvailable:
			w := base.clone()
			w.add("state = 'available'")
			w.add("crash_attempt = 0")
			out = append(out, branch{"jobs INDEXED BY jobs_claim", w})
			w = base.clone()
			w.add("state = 'available'")
			w.add("crash_attempt > 0")
			out = append(out, branch{"jobs INDEXED BY jobs_claim_suspect", w})
		case sluicetype.StateRunning:
			w := base.clone()
			w.add("state = 'running'")
			out = append(out, branch{"jobs INDEXED BY jobs_running", w})
		default:
			w := base.clone()
			if st.Valid() {
				// A literal, not a parameter: SQLite re-prepares a
				// statement on every run when a bound value decides
				// whether a partial index applies — a sixth of a list
				// page's CPU at a million jobs.
				w.add("state = '" + string(st) + "'")
			} else {
				w.add("state = ?", string(st))
			}
			w.add(sqlListable)
			if deadIndexed(st) {
				w.add(sqlDeadIndexed)
			}
			out = append(out, branch{"jobs", w})
		}
	}
	return out
}

// direct reports whether f is best served by one query without hints.
func direct(f *sluicetype.Filter) bool {
	return len(f.IDs) > 0 || f.Fingerprint != ""
}

// JobListPage pages job summaries newest first by (state_changed_at, id), or
// oldest first past After when Reverse.
func (s *Store) JobListPage(ctx context.Context, p *backend.JobListPageParams) ([]*sluicetype.Job, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	q, args, err := jobListQuery(p)
	if err != nil {
		return nil, err
	}
	rows, err := s.queryRead(ctx, q, args...)
	if err != nil {
		return nil, refused(fmt.Errorf("sqlite: list jobs: %w", err))
	}
	defer rows.Close()
	out := make([]*sluicetype.Job, 0, max(0, min(p.Limit, 256)))
	js := newJobScanner()
	js.lastErrorOnly = true
	for rows.Next() {
		j, err := js.scan(rows)
		if err != nil {
			return nil, refused(fmt.Errorf("sqlite: list jobs: %w", err))
		}
		// The checkpoint's place holds the wait summary (jobColumnsList).
		if j.Wait, err = sluicetype.ParseWaitSummary(j.Checkpoint); err != nil {
			return nil, fmt.Errorf("sqlite: list jobs: job %s: %w", j.ID, err)
		}
		j.Checkpoint = nil
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, refused(fmt.Errorf("sqlite: list jobs: %w", err))
	}
	return out, nil
}

// jobListQuery builds JobListPage's query.
func jobListQuery(p *backend.JobListPageParams) (string, []any, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.DefaultListLimit
	}
	base := &where{}
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
		base.add("(state_changed_at, id) "+cmp+" (?, ?)", p.After.At.UnixNano(), p.After.ID)
	}
	order := " ORDER BY state_changed_at " + dir + ", id " + dir + " LIMIT ?"
	var q strings.Builder
	var args []any
	if direct(&p.Filter) {
		w := base.clone()
		w.addStates(p.Filter.States)
		q.WriteString("SELECT " + jobColumnsList + " FROM jobs WHERE " + w.sql() + order)
		args = append(w.args, limit)
	} else {
		bs := stateBranches(base, p.Filter.ReadStates())
		for i, b := range bs {
			sel := "SELECT " + jobColumnsList + " FROM " + b.from + " WHERE " + b.w.sql() + order
			args = append(args, b.w.args...)
			args = append(args, limit)
			if len(bs) == 1 {
				q.WriteString(sel)
				break
			}
			if i > 0 {
				q.WriteString(" UNION ALL ")
			}
			q.WriteString("SELECT * FROM (" + sel + ")")
		}
		if len(bs) > 1 {
			q.WriteString(order)
			args = append(args, limit)
		}
	}
	return q.String(), args, nil
}

// JobCountMatching counts the jobs matching the filter, stopping past Max.
//
// Without the superseded jobs (a bulk selector's count), it counts the
// filter's jobs, superseded or not, on the listing indexes alone, and
// takes away the superseded ones it matches, which jobs_superseded finds
// (they are few): testing superseded_by in the count itself would read
// the row of every job counted.
func (s *Store) JobCountMatching(ctx context.Context, p *backend.JobCountMatchingParams) (int64, bool, error) {
	if s.closed.Load() {
		return 0, false, sluicetype.ErrClosed
	}
	if countsServe(p) {
		return s.jobCountByCounters(ctx, p)
	}
	if !p.ExcludeSuperseded || direct(&p.Filter) {
		return s.jobCount(ctx, p)
	}
	q, args, err := supersededCountQuery(p)
	if err != nil {
		return 0, false, err
	}
	var sup int64
	if err := s.queryCount(ctx, q, args, &sup); err != nil {
		return 0, false, err
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
		// More than Max+sup jobs, of which sup superseded: more than Max.
		return p.Max, true, nil
	}
	return n - sup, false, nil
}

// supersededCountQuery counts the superseded jobs a filter matches.
func supersededCountQuery(p *backend.JobCountMatchingParams) (string, []any, error) {
	w := &where{}
	if err := w.addFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	w.addStates(p.Filter.States)
	if p.AsOf != nil {
		w.add("state_changed_at <= ?", p.AsOf.UnixNano())
	}
	w.add("superseded_by != ''")
	return "SELECT count(*) FROM jobs INDEXED BY jobs_superseded WHERE " + w.sql(), w.args, nil
}

// jobCount runs jobCountQuery.
func (s *Store) jobCount(ctx context.Context, p *backend.JobCountMatchingParams) (int64, bool, error) {
	q, args, err := jobCountQuery(p)
	if err != nil {
		return 0, false, err
	}
	var n int64
	if err := s.queryCount(ctx, q, args, &n); err != nil {
		return 0, false, err
	}
	if p.Max > 0 && n > p.Max {
		return p.Max, true, nil
	}
	return n, false, nil
}

// queryCount runs a query of one integer on the read pool.
func (s *Store) queryCount(ctx context.Context, q string, args []any, n *int64) error {
	rows, err := s.queryRead(ctx, q, args...)
	if err != nil {
		return refused(fmt.Errorf("sqlite: count jobs: %w", err))
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return refused(fmt.Errorf("sqlite: count jobs: %w", err))
		}
		return fmt.Errorf("sqlite: count jobs: no row")
	}
	if err := rows.Scan(n); err != nil {
		return refused(fmt.Errorf("sqlite: count jobs: %w", err))
	}
	return nil
}

// jobCountQuery builds JobCountMatching's query: the sum of one capped count per
// branch.
func jobCountQuery(p *backend.JobCountMatchingParams) (string, []any, error) {
	base := &where{}
	if err := base.addFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	if p.ExcludeSuperseded {
		base.add("superseded_by = ''")
	}
	if p.AsOf != nil {
		base.add("state_changed_at <= ?", p.AsOf.UnixNano())
	}
	capAt := int64(-1) // LIMIT -1: no limit
	if p.Max > 0 {
		capAt = p.Max + 1
	}
	var q strings.Builder
	var args []any
	count := func(from string, w *where) string {
		args = append(args, w.args...)
		args = append(args, capAt)
		return "(SELECT count(*) FROM (SELECT 1 FROM " + from + " WHERE " + w.sql() + " LIMIT ?))"
	}
	q.WriteString("SELECT ")
	if direct(&p.Filter) {
		w := base.clone()
		w.addStates(p.Filter.States)
		q.WriteString(count("jobs", w))
	} else {
		for i, b := range stateBranches(base, p.Filter.ReadStates()) {
			if i > 0 {
				q.WriteString(" + ")
			}
			q.WriteString(count(b.from, b.w))
		}
	}
	return q.String(), args, nil
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
	q, args, err := heldQuery(p)
	if err != nil {
		return nil, err
	}
	rows, err := s.queryRead(ctx, q, args...)
	if err != nil {
		return nil, refused(fmt.Errorf("sqlite: count held unique keys: %w", err))
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&out.Held, &out.Holder); err != nil {
			return nil, fmt.Errorf("sqlite: count held unique keys: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, refused(fmt.Errorf("sqlite: count held unique keys: %w", err))
	}
	return out, nil
}

// heldQuery builds JobCountUniqueHeld's query. The jobs with a key are
// read through jobs_unique_key (its partial term, a non-empty key) and
// each one's holder is looked up in that index too, so the count reads
// the keyed jobs and one index entry per key, never every matched job: a
// bulk retry's dry run of a million dead jobs without keys reads
// nothing more than its count did. A filter by ids reads those rows
// instead.
func heldQuery(p *backend.JobCountUniqueHeldParams) (string, []any, error) {
	w := &where{}
	if err := w.addFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	w.addStates(p.Filter.States)
	if p.ExcludeSuperseded && !p.Filter.IncludeSuperseded {
		w.add("superseded_by = ''")
	}
	if p.AsOf != nil {
		w.add("state_changed_at <= ?", p.AsOf.UnixNano())
	}
	w.add("unique_key <> ''")
	w.add(fmt.Sprintf("(unique_states & %d) <> 0", sluicetype.UniqueStateBit(p.To)))
	from := "jobs INDEXED BY jobs_unique_key"
	if len(p.Filter.IDs) > 0 {
		from = "jobs"
	}
	return `SELECT count(*), COALESCE(min(h), '') FROM (SELECT (SELECT h.id FROM jobs h
		WHERE h.unique_key = jobs.unique_key AND h.id <> jobs.id AND ` + uniqueHoldsSQL("h") + ` LIMIT 1) AS h
		FROM ` + from + ` WHERE ` + w.sql() + `) WHERE h IS NOT NULL`, w.args, nil
}
