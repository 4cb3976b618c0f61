package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// The operator surface: engine.ControlStore on SQLite.

var _ engine.ControlStore = (*Store)(nil)

// Capabilities lists what this store serves beyond engine.Store: every
// filter field, error groups, bulk operations, maintained counts and
// queue pausing.
func (s *Store) Capabilities() []string {
	return []string{
		"filter.payload", "filter.meta", "filter.tags", "filter.error",
		"error_groups", "operations", "counts", "queues.pause",
		engine.CapabilityIdempotency,
	}
}

// ---- Listing and counting ----

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
func stateBranches(base *where, states []engine.State) []branch {
	if len(states) == 0 {
		states = engine.AllStates
	}
	var out []branch
	seen := map[engine.State]bool{}
	for _, st := range states {
		if seen[st] {
			continue
		}
		seen[st] = true
		switch st {
		case engine.StateAvailable:
			w := base.clone()
			w.add("state = 'available'")
			w.add("crash_attempt = 0")
			out = append(out, branch{"jobs INDEXED BY jobs_claim", w})
			w = base.clone()
			w.add("state = 'available'")
			w.add("crash_attempt > 0")
			out = append(out, branch{"jobs INDEXED BY jobs_claim_suspect", w})
		case engine.StateRunning:
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
func direct(f *engine.Filter) bool {
	return len(f.IDs) > 0 || f.Fingerprint != ""
}

// JobList pages job summaries newest first by (state_changed_at, id), or
// oldest first past After when Reverse.
func (s *Store) JobList(ctx context.Context, p *engine.JobListParams) ([]*engine.Job, error) {
	if s.closed.Load() {
		return nil, engine.ErrClosed
	}
	q, args, err := jobListQuery(p)
	if err != nil {
		return nil, err
	}
	rows, err := s.queryRead(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list jobs: %w", err)
	}
	defer rows.Close()
	out := make([]*engine.Job, 0, max(0, min(p.Limit, 256)))
	js := newJobScanner()
	js.lastErrorOnly = true
	for rows.Next() {
		j, err := js.scan(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list jobs: %w", err)
	}
	return out, nil
}

// jobListQuery builds JobList's query.
func jobListQuery(p *engine.JobListParams) (string, []any, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = engine.DefaultListLimit
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
		bs := stateBranches(base, p.Filter.States)
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

// JobCount counts the jobs matching the filter, stopping past Max.
//
// Without the superseded jobs (a bulk selector's count), it counts the
// filter's jobs, superseded or not, on the listing indexes alone, and
// takes away the superseded ones it matches, which jobs_superseded finds
// (they are few): testing superseded_by in the count itself would read
// the row of every job counted.
func (s *Store) JobCount(ctx context.Context, p *engine.JobCountParams) (int64, bool, error) {
	if s.closed.Load() {
		return 0, false, engine.ErrClosed
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
func supersededCountQuery(p *engine.JobCountParams) (string, []any, error) {
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
func (s *Store) jobCount(ctx context.Context, p *engine.JobCountParams) (int64, bool, error) {
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
		return fmt.Errorf("sqlite: count jobs: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: count jobs: %w", err)
		}
		return fmt.Errorf("sqlite: count jobs: no row")
	}
	if err := rows.Scan(n); err != nil {
		return fmt.Errorf("sqlite: count jobs: %w", err)
	}
	return nil
}

// jobCountQuery builds JobCount's query: the sum of one capped count per
// branch.
func jobCountQuery(p *engine.JobCountParams) (string, []any, error) {
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
		for i, b := range stateBranches(base, p.Filter.States) {
			if i > 0 {
				q.WriteString(" + ")
			}
			q.WriteString(count(b.from, b.w))
		}
	}
	return q.String(), args, nil
}

// JobErrorGroups groups the jobs matching the filter by queue, kind and
// error pattern, the largest groups first. Jobs with no error pattern
// (dead without a handler error, or from before migration 0002) form no
// group: a group's selector names its pattern, and an empty pattern in a
// Filter would match every error.
func (s *Store) JobErrorGroups(ctx context.Context, p *engine.JobErrorGroupsParams) ([]engine.ErrorGroup, error) {
	if s.closed.Load() {
		return nil, engine.ErrClosed
	}
	q, args, err := errorGroupsQuery(p)
	if err != nil {
		return nil, err
	}
	rows, err := s.queryRead(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: error groups: %w", err)
	}
	defer rows.Close()
	var out []engine.ErrorGroup
	for rows.Next() {
		var g engine.ErrorGroup
		var first, last int64
		var sample sql.NullString
		if err := rows.Scan(&g.Queue, &g.Kind, &g.Pattern, &g.Count, &first, &last, &sample); err != nil {
			return nil, fmt.Errorf("sqlite: error groups: %w", err)
		}
		g.FirstSeen, g.LastSeen, g.Sample = fromNanos(first), fromNanos(last), sample.String
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: error groups: %w", err)
	}
	return out, nil
}

// errorGroupsQuery builds JobErrorGroups' query.
func errorGroupsQuery(p *engine.JobErrorGroupsParams) (string, []any, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 200
	}
	w := &where{}
	if err := w.addFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	w.addStates(p.Filter.States)
	w.add("error_pattern != ''")
	cond := w.sql()
	// The sample is the newest matching job's message; its subquery comes
	// first in the text, so its arguments are bound first.
	q := `SELECT g.queue, g.kind, g.error_pattern, g.n, g.first_seen, g.last_seen,
		(SELECT last_error FROM jobs WHERE ` + cond + ` AND queue = g.queue AND kind = g.kind
			AND error_pattern = g.error_pattern ORDER BY state_changed_at DESC LIMIT 1)
	FROM (SELECT queue, kind, error_pattern, count(*) AS n, min(state_changed_at) AS first_seen,
			max(state_changed_at) AS last_seen
		FROM jobs WHERE ` + cond + `
		GROUP BY queue, kind, error_pattern
		ORDER BY n DESC, queue, kind, error_pattern LIMIT ?) AS g
	ORDER BY g.n DESC, g.queue, g.kind, g.error_pattern`
	return q, slices.Concat(w.args, w.args, []any{limit}), nil
}

// ---- Actions on one job ----

// The SET clauses of the operator actions, shared by the one-job methods
// and the operation batches. ?1 is the store's now.
const (
	// ?2 a new deadline or NULL: a passed deadline is dropped unless one is
	// given. max_attempts takes CASE, not max(): a function call in the
	// SET of a multi-row UPDATE gives the statement a statement journal
	// (every page it writes is first copied aside), about a sixth of a
	// bulk retry's UPDATE.
	setRetry = `state = 'available', max_attempts = CASE WHEN max_attempts > attempt THEN max_attempts ELSE attempt + 1 END,
		scheduled_at = ?1,
		finalized_at = NULL, terminal_reason = '', state_changed_at = ?1, version = version + 1,
		deadline = CASE WHEN ?2 IS NOT NULL THEN ?2 WHEN deadline <= ?1 THEN NULL ELSE deadline END`
	setCancel = `state = 'cancelled', terminal_reason = 'cancelled', finalized_at = ?1, state_changed_at = ?1,
		lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL, version = version + 1`
	setRelease = `state = 'available', crash_attempt = 0, finalized_at = NULL, terminal_reason = '',
		scheduled_at = ?1, state_changed_at = ?1, version = version + 1`
)

const (
	sqlActionRead = `SELECT state, queue, attempt, fingerprint, superseded_by, version FROM jobs WHERE id = ?`
	// ?1 now, ?2 deadline or NULL, ?3 id.
	sqlRetryOne   = `UPDATE jobs SET ` + setRetry + ` WHERE id = ?3 RETURNING ` + jobColumnsNoPayload
	sqlCancelOne  = `UPDATE jobs SET ` + setCancel + ` WHERE id = ?2 RETURNING ` + jobColumnsNoPayload
	sqlReleaseOne = `UPDATE jobs SET ` + setRelease + ` WHERE id = ?2 RETURNING ` + jobColumnsNoPayload
	sqlDeleteOne  = `DELETE FROM jobs WHERE id = ?`
	// ?1 id, ?2 payload, ?3 fingerprint.
	sqlUpdatePayload = `UPDATE jobs SET payload = ?2, fingerprint = ?3, version = version + 1
		WHERE id = ?1 RETURNING ` + jobColumns
	// ?1 original id, ?2 new id, ?3 payload, ?4 fingerprint, ?5 now.
	sqlInsertRetryCopy = `INSERT INTO jobs (id, queue, kind, payload, schema_version, metadata, tags, priority,
		state, max_attempts, fingerprint, scheduled_at, timeout_ns, created_at, state_changed_at, retry_of)
	SELECT ?2, queue, kind, ?3, schema_version, metadata, tags, priority,
		'available', max_attempts, ?4, ?5, timeout_ns, ?5, ?5, id
	FROM jobs WHERE id = ?1
	ON CONFLICT (id) DO NOTHING`
	// ?1 id, ?2 the copy's id.
	sqlSupersede = `UPDATE jobs SET superseded_by = ?2, version = version + 1 WHERE id = ?1`
)

// actionRow is what an action reads of a job before changing it.
type actionRow struct {
	state        engine.State
	queue        string
	attempt      int
	fingerprint  string
	supersededBy string
	version      int64
}

func readActionRow(ctx context.Context, st *sql.Stmt, verb, id string) (*actionRow, error) {
	var r actionRow
	var state string
	err := st.QueryRowContext(ctx, id).Scan(&state, &r.queue, &r.attempt, &r.fingerprint, &r.supersededBy, &r.version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s job %s: %w", verb, id, engine.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s job %s: %w", verb, id, err)
	}
	r.state = engine.State(state)
	return &r, nil
}

func wrongState(verb, id string, state engine.State, allowed []engine.State) error {
	names := make([]string, len(allowed))
	for i, s := range allowed {
		names[i] = string(s)
	}
	return fmt.Errorf("%s job %s: %w: it is %s; %s applies to %s", verb, id, engine.ErrWrongState, state, verb,
		strings.Join(names, ", "))
}

// JobRetry makes an archived, cancelled or undecodable job available with
// one more attempt, keeping its history.
func (s *Store) JobRetry(ctx context.Context, p *engine.JobRetryParams) (*engine.Job, error) {
	st, err := s.stmts(ctx, sqlActionRead, sqlIsQuarantined, sqlRetryOne, sqlInsertEvent)
	if err != nil {
		return nil, err
	}
	var out *engine.Job
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := readActionRow(ctx, tx.StmtContext(ctx, st[0]), "retry", p.ID)
		if err != nil {
			return err
		}
		allowed := engine.ActionStates[engine.ActionRetry]
		if !slices.Contains(allowed, r.state) {
			return wrongState("retry", p.ID, r.state, allowed)
		}
		msg := ""
		if r.supersededBy != "" {
			if !p.Force {
				return fmt.Errorf("retry job %s: %w: it was retried with new input as %s (force to retry it anyway)",
					p.ID, engine.ErrConflict, r.supersededBy)
			}
			msg = "forced: superseded by " + r.supersededBy
		}
		if r.fingerprint != "" {
			var q bool
			if err := tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, r.fingerprint).Scan(&q); err != nil {
				return fmt.Errorf("sqlite: retry job %s: %w", p.ID, err)
			}
			if q {
				return fmt.Errorf("retry job %s: %w: %s", p.ID, engine.ErrQuarantined, r.fingerprint)
			}
		}
		nowNs := now.UnixNano()
		j, err := scanJob(tx.StmtContext(ctx, st[2]).QueryRowContext(ctx, nowNs, nanosPtr(p.Deadline), p.ID))
		if err != nil {
			return fmt.Errorf("sqlite: retry job %s: %w", p.ID, err)
		}
		if _, err := tx.StmtContext(ctx, st[3]).ExecContext(ctx, p.ID, string(engine.EventRetried), nowNs, p.Actor,
			string(r.state), string(engine.StateAvailable), r.attempt, msg); err != nil {
			return fmt.Errorf("sqlite: retry job %s: event: %w", p.ID, err)
		}
		counts := countDeltas{}
		counts.move(r.queue, r.state, engine.StateAvailable, 1)
		out = j
		s.keepResult(j)
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// simpleAction is an action that moves one job from allowed states to `to`
// with one UPDATE (?1 now, ?2 id) and one event.
func (s *Store) simpleAction(ctx context.Context, p *engine.JobActionParams, action engine.Action, verb, update string,
	to engine.State, ev engine.EventKind, msg string) (*engine.Job, error) {
	st, err := s.stmts(ctx, sqlActionRead, update, sqlInsertEvent)
	if err != nil {
		return nil, err
	}
	var out *engine.Job
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := readActionRow(ctx, tx.StmtContext(ctx, st[0]), verb, p.ID)
		if err != nil {
			return err
		}
		allowed := engine.ActionStates[action]
		if !slices.Contains(allowed, r.state) {
			return wrongState(verb, p.ID, r.state, allowed)
		}
		nowNs := now.UnixNano()
		j, err := scanJob(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, nowNs, p.ID))
		if err != nil {
			return fmt.Errorf("sqlite: %s job %s: %w", verb, p.ID, err)
		}
		if _, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx, p.ID, string(ev), nowNs, p.Actor,
			string(r.state), string(to), r.attempt, msg); err != nil {
			return fmt.Errorf("sqlite: %s job %s: event: %w", verb, p.ID, err)
		}
		counts := countDeltas{}
		counts.move(r.queue, r.state, to, 1)
		out = j
		s.keepResult(j)
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobCancel cancels a scheduled, available, retryable or running job; a
// running job's lease is cleared in the same write, so its worker's late
// outcome is refused.
func (s *Store) JobCancel(ctx context.Context, p *engine.JobActionParams) (*engine.Job, error) {
	return s.simpleAction(ctx, p, engine.ActionCancel, "cancel", sqlCancelOne,
		engine.StateCancelled, engine.EventCancelled, "")
}

// JobRelease returns one quarantined job to available with its crash
// counter reset. Its fingerprint's record is left as it is.
func (s *Store) JobRelease(ctx context.Context, p *engine.JobActionParams) (*engine.Job, error) {
	return s.simpleAction(ctx, p, engine.ActionRelease, "release", sqlReleaseOne,
		engine.StateAvailable, engine.EventReleased, "job released")
}

// JobDelete removes a job in any state but running, with its events.
func (s *Store) JobDelete(ctx context.Context, p *engine.JobActionParams) error {
	st, err := s.stmts(ctx, sqlActionRead, sqlDeleteOne)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := readActionRow(ctx, tx.StmtContext(ctx, st[0]), "delete", p.ID)
		if err != nil {
			return err
		}
		allowed := engine.ActionStates[engine.ActionDelete]
		if !slices.Contains(allowed, r.state) {
			return wrongState("delete", p.ID, r.state, allowed)
		}
		if _, err := tx.StmtContext(ctx, st[1]).ExecContext(ctx, p.ID); err != nil {
			return fmt.Errorf("sqlite: delete job %s: %w", p.ID, err)
		}
		counts := countDeltas{}
		counts.move(r.queue, r.state, engine.StateDeleted, 1)
		return s.applyCounts(ctx, tx, counts)
	})
}

// JobUpdatePayload replaces the payload and fingerprint of a job that is
// not running, if its version is still p.Version.
func (s *Store) JobUpdatePayload(ctx context.Context, p *engine.JobUpdatePayloadParams) (*engine.Job, error) {
	st, err := s.stmts(ctx, sqlActionRead, sqlUpdatePayload, sqlInsertEvent)
	if err != nil {
		return nil, err
	}
	var out *engine.Job
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := readActionRow(ctx, tx.StmtContext(ctx, st[0]), "edit payload of", p.ID)
		if err != nil {
			return err
		}
		if r.state == engine.StateRunning {
			return fmt.Errorf("edit payload of job %s: %w: it is running", p.ID, engine.ErrWrongState)
		}
		if r.version != p.Version {
			return fmt.Errorf("edit payload of job %s: %w: the job changed (version %d, the edit was made on %d)",
				p.ID, engine.ErrConflict, r.version, p.Version)
		}
		j, err := scanJob(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, p.ID, string(p.Payload), p.Fingerprint))
		if err != nil {
			return fmt.Errorf("sqlite: edit payload of job %s: %w", p.ID, err)
		}
		msg := ""
		if r.fingerprint != p.Fingerprint {
			msg = "fingerprint " + r.fingerprint + " → " + p.Fingerprint
		}
		if _, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx, p.ID, string(engine.EventPayloadEdited), now.UnixNano(),
			p.Actor, string(r.state), string(r.state), r.attempt, msg); err != nil {
			return fmt.Errorf("sqlite: edit payload of job %s: event: %w", p.ID, err)
		}
		out = j
		s.keepResult(j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobRetryWithInput inserts the corrected copy of a finished job (same
// queue, kind, metadata, tags, priority, attempt budget, schema version
// and timeout; the new payload; retry_of the original) and marks the
// original superseded by it, in one transaction. The original must be in a
// terminal state: a copy of a job that may still run would run twice.
func (s *Store) JobRetryWithInput(ctx context.Context, p *engine.JobRetryWithInputParams) (*engine.Job, error) {
	st, err := s.stmts(ctx, sqlActionRead, sqlIsQuarantined, sqlInsertRetryCopy, sqlSupersede, sqlInsertEvent, sqlGetJob)
	if err != nil {
		return nil, err
	}
	var out *engine.Job
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := readActionRow(ctx, tx.StmtContext(ctx, st[0]), "retry with input", p.ID)
		if err != nil {
			return err
		}
		if !r.state.Terminal() {
			return fmt.Errorf("retry job %s with input: %w: it is %s; only a finished job is retried with new input",
				p.ID, engine.ErrWrongState, r.state)
		}
		if p.Fingerprint != "" {
			var q bool
			if err := tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, p.Fingerprint).Scan(&q); err != nil {
				return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
			}
			if q {
				return fmt.Errorf("retry job %s with input: %w: %s", p.ID, engine.ErrQuarantined, p.Fingerprint)
			}
		}
		nowNs := now.UnixNano()
		res, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx, p.ID, p.NewID, string(p.Payload), p.Fingerprint, nowNs)
		if err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
		} else if n == 0 {
			return fmt.Errorf("retry job %s with input: %w: job %s exists", p.ID, engine.ErrConflict, p.NewID)
		}
		if _, err := tx.StmtContext(ctx, st[3]).ExecContext(ctx, p.ID, p.NewID); err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
		}
		ev := tx.StmtContext(ctx, st[4])
		if _, err := ev.ExecContext(ctx, p.ID, string(engine.EventRetried), nowNs, p.Actor,
			string(r.state), string(r.state), r.attempt, "retried with new input as "+p.NewID); err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: event: %w", p.ID, err)
		}
		if _, err := ev.ExecContext(ctx, p.NewID, string(engine.EventRetried), nowNs, p.Actor,
			"", string(engine.StateAvailable), 0, "retry of "+p.ID+" with new input"); err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: event: %w", p.ID, err)
		}
		j, err := scanJob(tx.StmtContext(ctx, st[5]).QueryRowContext(ctx, p.NewID))
		if err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
		}
		counts := countDeltas{}
		counts.move(j.Queue, "", engine.StateAvailable, 1)
		out = j
		s.keepResult(j)
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ---- Queues ----

// QueueList names every queue with jobs (per the counters) or a pause
// record, sorted, with its counts.
func (s *Store) QueueList(ctx context.Context) ([]engine.QueueInfo, error) {
	counts, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err != nil {
		return nil, err
	}
	st, err := s.readStmt(ctx, `SELECT name, paused FROM queues`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list queues: %w", err)
	}
	defer rows.Close()
	paused := map[string]bool{}
	for rows.Next() {
		var name string
		var p bool
		if err := rows.Scan(&name, &p); err != nil {
			return nil, fmt.Errorf("sqlite: list queues: %w", err)
		}
		paused[name] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list queues: %w", err)
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
	out := make([]engine.QueueInfo, len(names))
	for i, q := range names {
		c := counts[q]
		if c == nil {
			c = map[engine.State]int64{}
		}
		out[i] = engine.QueueInfo{Name: q, Paused: paused[q], Counts: c}
	}
	return out, nil
}

const sqlQueueSetPaused = `INSERT INTO queues (name, paused, paused_at, paused_by) VALUES (?1, ?2, ?3, ?4)
	ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, paused_at = excluded.paused_at,
		paused_by = excluded.paused_by`

func (s *Store) queueSetPaused(ctx context.Context, p *engine.QueuePauseParams, paused bool) error {
	st, err := s.stmts(ctx, sqlQueueSetPaused)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		var at any
		if paused {
			at = now.UnixNano()
		}
		if _, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.Queue, paused, at, p.Actor); err != nil {
			return fmt.Errorf("sqlite: pause queue %s: %w", p.Queue, err)
		}
		return nil
	})
}

// QueuePause stops claims from the queue (running jobs finish).
func (s *Store) QueuePause(ctx context.Context, p *engine.QueuePauseParams) error {
	return s.queueSetPaused(ctx, p, true)
}

// QueueResume lets workers claim from the queue again.
func (s *Store) QueueResume(ctx context.Context, p *engine.QueuePauseParams) error {
	return s.queueSetPaused(ctx, p, false)
}

// ---- Operations ----

const operationColumns = `id, action, selector, status, created_by, created_at, started_at, finished_at,
	matched, processed, succeeded, failed, error, rate, cursor_id, lease_holder, lease_fence, lease_expires_at`

// opRow is an operations row: the operation and its runner's state.
type opRow struct {
	op      *engine.Operation
	cursor  string
	holder  string
	fence   int64
	expires int64
}

func scanOperation(sc scanner) (*opRow, error) {
	var r opRow
	var op engine.Operation
	var action, selector, status string
	var created int64
	var started, finished sql.NullInt64
	if err := sc.Scan(&op.ID, &action, &selector, &status, &op.CreatedBy, &created, &started, &finished,
		&op.Matched, &op.Processed, &op.Succeeded, &op.Failed, &op.Error, &op.Rate,
		&r.cursor, &r.holder, &r.fence, &r.expires); err != nil {
		return nil, err
	}
	op.Action, op.Status, op.CreatedAt = engine.Action(action), engine.OperationStatus(status), fromNanos(created)
	if started.Valid {
		t := fromNanos(started.Int64)
		op.StartedAt = &t
	}
	if finished.Valid {
		t := fromNanos(finished.Int64)
		op.FinishedAt = &t
	}
	if err := json.Unmarshal([]byte(selector), &op.Selector); err != nil {
		return nil, fmt.Errorf("operation %s: selector: %w", op.ID, err)
	}
	r.op = &op
	return &r, nil
}

const (
	sqlOperationInsert = `INSERT INTO operations (id, action, selector, status, created_by, created_at, matched, rate)
	VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7)
	ON CONFLICT (id) DO NOTHING
	RETURNING ` + operationColumns
	sqlOperationGet = `SELECT ` + operationColumns + ` FROM operations WHERE id = ?`
)

// OperationInsert persists a new pending operation created now.
func (s *Store) OperationInsert(ctx context.Context, p *engine.OperationInsertParams) (*engine.Operation, error) {
	sel, err := json.Marshal(p.Selector)
	if err != nil {
		return nil, fmt.Errorf("sqlite: operation %s: selector: %w", p.ID, err)
	}
	st, err := s.stmts(ctx, sqlOperationInsert)
	if err != nil {
		return nil, err
	}
	var out *engine.Operation
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := scanOperation(tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID, string(p.Action), string(sel),
			p.CreatedBy, now.UnixNano(), p.Matched, p.Rate))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("insert operation %s: %w: the id exists", p.ID, engine.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("sqlite: insert operation %s: %w", p.ID, err)
		}
		out = r.op
		s.keepResult(r.op)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OperationGet returns one operation or ErrNotFound.
func (s *Store) OperationGet(ctx context.Context, p *engine.OperationGetParams) (*engine.Operation, error) {
	st, err := s.readStmt(ctx, sqlOperationGet)
	if err != nil {
		return nil, err
	}
	r, err := scanOperation(st.QueryRowContext(ctx, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("operation %s: %w", p.ID, engine.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: operation %s: %w", p.ID, err)
	}
	return r.op, nil
}

// OperationList pages operations newest first by (created_at, id).
func (s *Store) OperationList(ctx context.Context, p *engine.OperationListParams) ([]*engine.Operation, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = engine.DefaultListLimit
	}
	q := `SELECT ` + operationColumns + ` FROM operations ORDER BY created_at DESC, id DESC LIMIT ?`
	args := []any{limit}
	if p.After != nil {
		q = `SELECT ` + operationColumns + ` FROM operations WHERE (created_at, id) < (?, ?)
			ORDER BY created_at DESC, id DESC LIMIT ?`
		args = []any{p.After.At.UnixNano(), p.After.ID, limit}
	}
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list operations: %w", err)
	}
	defer rows.Close()
	var out []*engine.Operation
	for rows.Next() {
		r, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list operations: %w", err)
		}
		out = append(out, r.op)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list operations: %w", err)
	}
	return out, nil
}

// ?1 id, ?2 now, ?3 message.
const sqlOperationCancel = `UPDATE operations SET status = 'cancelled', finished_at = ?2, error = ?3,
	lease_holder = '', lease_expires_at = 0
	WHERE id = ?1 AND status IN ('pending', 'running')
	RETURNING ` + operationColumns

// OperationCancel marks a pending or running operation cancelled; its
// runner stops at its next batch, whose write is refused.
func (s *Store) OperationCancel(ctx context.Context, p *engine.OperationCancelParams) (*engine.Operation, error) {
	st, err := s.stmts(ctx, sqlOperationCancel, sqlOperationGet)
	if err != nil {
		return nil, err
	}
	var out *engine.Operation
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		msg := "cancelled"
		if p.Actor != "" {
			msg = "cancelled by " + p.Actor
		}
		r, err := scanOperation(tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID, now.UnixNano(), msg))
		if errors.Is(err, sql.ErrNoRows) {
			cur, err := scanOperation(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, p.ID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("cancel operation %s: %w", p.ID, engine.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("sqlite: cancel operation %s: %w", p.ID, err)
			}
			return fmt.Errorf("cancel operation %s: %w: it is %s", p.ID, engine.ErrWrongState, cur.op.Status)
		}
		if err != nil {
			return fmt.Errorf("sqlite: cancel operation %s: %w", p.ID, err)
		}
		out = r.op
		s.keepResult(r.op)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const (
	// ?1 now.
	sqlOperationNext = `SELECT id FROM operations
	WHERE status IN ('pending', 'running') AND (lease_holder = '' OR lease_expires_at <= ?1)
	ORDER BY created_at, id LIMIT 1`
	// ?1 id, ?2 holder, ?3 now, ?4 lease expiry.
	sqlOperationLease = `UPDATE operations SET lease_holder = ?2, lease_fence = lease_fence + 1,
		lease_expires_at = ?4, status = 'running', started_at = coalesce(started_at, ?3)
	WHERE id = ?1
	RETURNING ` + operationColumns
)

// defaultOperationLease is an operation lease's length when the caller
// gives none.
const defaultOperationLease = 30 * time.Second

// OperationClaim leases the oldest pending or running operation whose
// lease is free or expired to p.Holder (fence +1); nil when there is none.
func (s *Store) OperationClaim(ctx context.Context, p *engine.OperationClaimParams) (*engine.OperationLease, error) {
	st, err := s.stmts(ctx, sqlOperationNext, sqlOperationLease)
	if err != nil {
		return nil, err
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	var out *engine.OperationLease
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		out = nil
		var id string
		err := tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, now.UnixNano()).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sqlite: claim operation: %w", err)
		}
		r, err := scanOperation(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, id, p.Holder, now.UnixNano(), now.Add(ttl).UnixNano()))
		if err != nil {
			return fmt.Errorf("sqlite: claim operation %s: %w", id, err)
		}
		out = &engine.OperationLease{Operation: r.op, Holder: r.holder, Fence: r.fence}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// operationWindow bounds, in multiples of the batch size, how many jobs (in
// id order) one batch looks at: a selector that matches few jobs of a big
// table is walked over several short transactions rather than one long
// one that would hold up the workers' writes.
const operationWindow = 10

const (
	// ?1 id, ?2 processed, ?3 succeeded, ?4 failed, ?5 cursor, ?6 lease
	// expiry, ?7 status, ?8 finished_at or NULL, ?9 error or NULL.
	sqlOperationProgress = `UPDATE operations SET processed = processed + ?2, succeeded = succeeded + ?3,
		failed = failed + ?4, cursor_id = ?5, lease_expires_at = ?6, status = ?7,
		finished_at = coalesce(?8, finished_at), error = coalesce(?9, error)
	WHERE id = ?1
	RETURNING ` + operationColumns
	// ?1 cursor, ?2 offset: the last id of the batch's window, or none when
	// fewer jobs are left.
	sqlOperationWindowEnd = `SELECT id FROM jobs WHERE id > ?1 ORDER BY id LIMIT 1 OFFSET ?2`
	// The events of a batch's jobs, written before the jobs change (the
	// rows give the state they leave). ?1 kind, ?2 now, ?3 actor, ?4 to
	// state, ?5 message, ?6 JSON array of rowids. OR FAIL: no statement
	// journal (any error rolls the whole transaction back).
	sqlOperationEvents = `INSERT OR FAIL INTO job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
	SELECT id, ?1, ?2, ?3, state, ?4, attempt, ?5 FROM jobs WHERE rowid IN (SELECT value FROM json_each(?6))`
	// ?1 now, ?2 NULL (no new deadline), ?3 JSON array of rowids.
	sqlBulkRetry   = `UPDATE OR FAIL jobs SET ` + setRetry + ` WHERE rowid IN (SELECT value FROM json_each(?3))`
	sqlBulkCancel  = `UPDATE OR FAIL jobs SET ` + setCancel + ` WHERE rowid IN (SELECT value FROM json_each(?2))`
	sqlBulkRelease = `UPDATE OR FAIL jobs SET ` + setRelease + ` WHERE rowid IN (SELECT value FROM json_each(?2))`
	sqlBulkDelete  = `DELETE FROM jobs WHERE rowid IN (SELECT value FROM json_each(?1))`
)

// OperationProcessBatch runs one batch of an operation in one write
// transaction, fenced on its lease: it takes the next jobs past the
// operation's id cursor that match its selector (narrowed to the states
// its action changes), entered their state at or before the operation was
// created, and are not superseded unless the selector includes them;
// applies the action to them set-wise, with their events and counter
// deltas; and records the progress. A batch looks at most
// operationWindow×Limit jobs in id order; when it finds fewer than Limit
// jobs and no job is left past its window, the operation is completed.
//
// The fence is the lease's truth: a batch of the holder whose lease has
// run out is still accepted while nobody else took the operation. An
// operation that was cancelled (or ended) is returned as it is, without
// an error, so its runner stops on the status. One whose action or
// selector this store cannot run is marked failed with the reason.
func (s *Store) OperationProcessBatch(ctx context.Context, p *engine.OperationProcessBatchParams) (*engine.Operation, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = engine.OperationBatch
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	st, err := s.stmts(ctx, sqlOperationGet, sqlOperationProgress, sqlOperationWindowEnd, sqlOperationEvents,
		sqlBulkRetry, sqlBulkCancel, sqlBulkDelete, sqlBulkRelease, sqlAnyQuarantined)
	if err != nil {
		return nil, err
	}
	var out *engine.Operation
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		out = nil
		r, err := scanOperation(tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", p.ID, engine.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: operation %s: %w", p.ID, err)
		}
		op := r.op
		switch {
		case op.Status == engine.OperationCancelled || op.Status == engine.OperationCompleted || op.Status == engine.OperationFailed:
			// Over: the runner stops on the status.
			out = op
			return nil
		case op.Status != engine.OperationRunning || r.holder != p.Holder || r.fence != p.Fence:
			return fmt.Errorf("operation %s: %w", p.ID, engine.ErrLeaseLost)
		}
		b := batch{s: s, ctx: ctx, tx: tx, op: op, now: now, limit: limit, events: st[3], actions: st[4:8], anyQuarantined: st[8]}
		status, finished := engine.OperationRunning, any(nil)
		var opErr any
		if err := b.run(r.cursor, st[2]); errors.Is(err, errOperationUnrunnable) {
			b = batch{cursor: r.cursor}
			status, finished, opErr = engine.OperationFailed, now.UnixNano(), err.Error()
		} else if err != nil {
			return fmt.Errorf("operation %s: %w", p.ID, err)
		}
		if b.done {
			status, finished = engine.OperationCompleted, now.UnixNano()
		}
		if b.lastFailure != "" {
			opErr = fmt.Sprintf("%d jobs refused so far; the last: %s", op.Failed+b.failed, b.lastFailure)
		}
		r, err = scanOperation(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, p.ID,
			b.succeeded+b.failed, b.succeeded, b.failed, b.cursor, now.Add(ttl).UnixNano(),
			string(status), finished, opErr))
		if err != nil {
			return fmt.Errorf("sqlite: operation %s: progress: %w", p.ID, err)
		}
		out = r.op
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errOperationUnrunnable marks an operation no batch can ever run (an
// unknown action, a selector the filter builder refuses): it fails rather
// than being retried by every runner forever.
var errOperationUnrunnable = errors.New("operation cannot run")

// batch is one OperationProcessBatch at work.
type batch struct {
	s      *Store
	ctx    context.Context
	tx     *sql.Tx
	op     *engine.Operation
	now    time.Time
	limit  int
	events *sql.Stmt
	// retry, cancel, delete, release
	actions []*sql.Stmt
	// anyQuarantined is sqlAnyQuarantined.
	anyQuarantined *sql.Stmt

	// results
	cursor            string
	done              bool
	succeeded, failed int64
	lastFailure       string
}

// candidate is a job a batch found.
type candidate struct {
	rowid       int64
	id, queue   string
	state       engine.State
	quarantined bool
}

// batchWhere is the condition of a batch's candidates: past cursor and up
// to end (when valid) in id order, in one of the selector's states, matching
// the rest of its filter, in that state since before the operation was
// created, and not superseded unless the selector includes them. The state
// condition is written +state (no index may serve it) and without a
// partial index's term, so the planner keeps to the id order rather than
// reading and sorting every job of a state.
func batchWhere(op *engine.Operation, sel *engine.Filter, cursor string, end sql.NullString) (*where, error) {
	w := &where{}
	w.add("id > ?", cursor)
	if end.Valid {
		w.add("id <= ?", end.String)
	}
	ss := make([]string, len(sel.States))
	for i, st := range sel.States {
		ss[i] = string(st)
	}
	w.in("+state", ss)
	if err := w.addFilter(sel); err != nil {
		return nil, err
	}
	w.add("state_changed_at <= ?", op.CreatedAt.UnixNano())
	if !sel.IncludeSuperseded {
		w.add("superseded_by = ''")
	}
	return w, nil
}

// batchQuery builds a batch's query for its candidates, walked by the
// primary key in id order from cursor to end (when valid).
func batchQuery(op *engine.Operation, sel *engine.Filter, cursor string, end sql.NullString, limit int) (string, []any, error) {
	w, err := batchWhere(op, sel, cursor, end)
	if err != nil {
		return "", nil, err
	}
	quarantined := "0"
	if op.Action == engine.ActionRetry {
		quarantined = "fingerprint IN (SELECT fingerprint FROM fingerprints WHERE status = 'quarantined')"
	}
	q := "SELECT rowid, id, queue, state, " + quarantined + " FROM jobs WHERE " + w.sql() + " ORDER BY id LIMIT ?"
	return q, append(w.args, limit), nil
}

// batchGroupsQuery builds the query of a batch taken by its id range: its
// candidates (batchQuery's, without the quarantine test) counted by queue
// and state, with the last id of each group.
func batchGroupsQuery(op *engine.Operation, sel *engine.Filter, cursor string, end sql.NullString, limit int) (string, []any, error) {
	w, err := batchWhere(op, sel, cursor, end)
	if err != nil {
		return "", nil, err
	}
	q := "SELECT queue, state, count(*), max(id) FROM (SELECT queue, state, id FROM jobs WHERE " + w.sql() +
		" ORDER BY id LIMIT ?) GROUP BY queue, state"
	return q, append(w.args, limit), nil
}

// byRange reports whether a batch of this selector is taken by its id
// range: the events and the change select the jobs again by the batch's
// condition, bounded by its last id, instead of by a list of the rows found.
// That spares a list built in Go and taken apart twice in SQL (about a
// tenth of a batch), at the price of testing the condition three times,
// so only selectors whose tests are plain column comparisons qualify.
func byRange(sel *engine.Filter) bool {
	return len(sel.IDs) == 0 && len(sel.Tags) == 0 && sel.Error == "" && len(sel.Payload) == 0 && len(sel.Meta) == 0
}

func (b *batch) run(cursor string, windowEnd *sql.Stmt) error {
	b.cursor = cursor
	sel, ok := engine.BulkSelector(b.op.Action, b.op.Selector)
	if !ok {
		b.done = true // no state the action changes is selected
		return nil
	}
	var set *sql.Stmt
	var verb string
	var to engine.State
	var ev engine.EventKind
	switch b.op.Action {
	case engine.ActionRetry:
		set, verb, to, ev = b.actions[0], "retry", engine.StateAvailable, engine.EventRetried
	case engine.ActionCancel:
		set, verb, to, ev = b.actions[1], "cancel", engine.StateCancelled, engine.EventCancelled
	case engine.ActionDelete:
		set, verb, to = b.actions[2], "delete", engine.StateDeleted
	case engine.ActionRelease:
		set, verb, to, ev = b.actions[3], "release", engine.StateAvailable, engine.EventReleased
	default:
		return fmt.Errorf("%w: unknown action %q", errOperationUnrunnable, b.op.Action)
	}

	// The window: at most operationWindow×limit jobs past the cursor.
	var end sql.NullString
	err := b.tx.StmtContext(b.ctx, windowEnd).QueryRowContext(b.ctx, cursor, operationWindow*b.limit-1).Scan(&end)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: window: %w", err)
	}

	if byRange(&sel) {
		quarantine := false
		if b.op.Action == engine.ActionRetry {
			// A retry refuses the jobs of a quarantined fingerprint, one
			// by one: that takes the list.
			if err := b.tx.StmtContext(b.ctx, b.anyQuarantined).QueryRowContext(b.ctx).Scan(&quarantine); err != nil {
				return fmt.Errorf("sqlite: quarantine: %w", err)
			}
		}
		if !quarantine {
			return b.runRange(&sel, cursor, end, verb, to, ev)
		}
	}

	q, args, err := batchQuery(b.op, &sel, cursor, end, b.limit)
	if err != nil {
		return fmt.Errorf("%w: %v", errOperationUnrunnable, err)
	}
	rows, err := b.tx.QueryContext(b.ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlite: select jobs: %w", err)
	}
	var found []candidate
	for rows.Next() {
		var c candidate
		var state string
		if err := rows.Scan(&c.rowid, &c.id, &c.queue, &state, &c.quarantined); err != nil {
			rows.Close()
			return fmt.Errorf("sqlite: select jobs: %w", err)
		}
		c.state = engine.State(state)
		found = append(found, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: select jobs: %w", err)
	}

	switch {
	case len(found) == b.limit:
		b.cursor = found[len(found)-1].id
	case end.Valid:
		b.cursor = end.String
	default:
		if len(found) > 0 {
			b.cursor = found[len(found)-1].id
		}
		b.done = true
	}
	if len(found) == 0 {
		return nil
	}

	counts := countDeltas{}
	rowids := make([]byte, 0, 2+len(found)*12)
	rowids = append(rowids, '[')
	n := 0
	for _, c := range found {
		if c.quarantined {
			b.failed++
			b.lastFailure = fmt.Sprintf("job %s: %v", c.id, engine.ErrQuarantined)
			continue
		}
		if n > 0 {
			rowids = append(rowids, ',')
		}
		n++
		rowids = strconv.AppendInt(rowids, c.rowid, 10)
		counts.move(c.queue, c.state, to, 1)
	}
	rowids = append(rowids, ']')
	if n == 0 {
		return nil
	}
	nowNs := b.now.UnixNano()
	if ev != "" {
		if _, err := b.tx.StmtContext(b.ctx, b.events).ExecContext(b.ctx, string(ev), nowNs, b.op.CreatedBy,
			string(to), "bulk "+verb+" (operation "+b.op.ID+")", string(rowids)); err != nil {
			return fmt.Errorf("sqlite: %s jobs: events: %w", verb, err)
		}
	}
	var setArgs []any
	switch b.op.Action {
	case engine.ActionRetry:
		setArgs = []any{nowNs, nil, string(rowids)}
	case engine.ActionDelete:
		setArgs = []any{string(rowids)}
	default:
		setArgs = []any{nowNs, string(rowids)}
	}
	res, err := b.tx.StmtContext(b.ctx, set).ExecContext(b.ctx, setArgs...)
	if err != nil {
		return fmt.Errorf("sqlite: %s jobs: %w", verb, err)
	}
	if m, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlite: %s jobs: %w", verb, err)
	} else if m != int64(n) {
		return fmt.Errorf("sqlite: %s jobs: %d rows changed, %d expected", verb, m, n)
	}
	b.succeeded += int64(n)
	return b.s.applyCounts(b.ctx, b.tx, counts)
}

// runRange runs a batch taken by its id range (see byRange). Its
// candidates are counted by queue and state; they are then exactly the
// jobs past the cursor, up to the last id counted, that meet the batch's
// condition, which the events and the change select again in the same
// transaction.
func (b *batch) runRange(sel *engine.Filter, cursor string, end sql.NullString, verb string, to engine.State, ev engine.EventKind) error {
	q, args, err := batchGroupsQuery(b.op, sel, cursor, end, b.limit)
	if err != nil {
		return fmt.Errorf("%w: %v", errOperationUnrunnable, err)
	}
	rows, err := b.tx.QueryContext(b.ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlite: select jobs: %w", err)
	}
	counts := countDeltas{}
	var n int64
	last := ""
	for rows.Next() {
		var queue, state, top string
		var c int64
		if err := rows.Scan(&queue, &state, &c, &top); err != nil {
			rows.Close()
			return fmt.Errorf("sqlite: select jobs: %w", err)
		}
		counts.move(queue, engine.State(state), to, c)
		n += c
		last = max(last, top)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: select jobs: %w", err)
	}

	switch {
	case n == int64(b.limit):
		b.cursor = last
	case end.Valid:
		b.cursor = end.String
	default:
		if n > 0 {
			b.cursor = last
		}
		b.done = true
	}
	if n == 0 {
		return nil
	}

	w, err := batchWhere(b.op, sel, cursor, sql.NullString{String: last, Valid: true})
	if err != nil {
		return fmt.Errorf("%w: %v", errOperationUnrunnable, err)
	}
	nowNs := b.now.UnixNano()
	exec := func(what, q string, args ...any) error {
		res, err := b.tx.ExecContext(b.ctx, q, args...)
		if err != nil {
			return fmt.Errorf("sqlite: %s jobs: %s%w", verb, what, err)
		}
		m, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqlite: %s jobs: %s%w", verb, what, err)
		}
		if m != n {
			return fmt.Errorf("sqlite: %s jobs: %s%d rows, %d expected", verb, what, m, n)
		}
		return nil
	}
	if ev != "" {
		if err := exec("events: ", `INSERT OR FAIL INTO job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
			SELECT id, ?, ?, ?, state, ?, attempt, ? FROM jobs WHERE `+w.sql(),
			slices.Concat([]any{string(ev), nowNs, b.op.CreatedBy, string(to), "bulk " + verb + " (operation " + b.op.ID + ")"}, w.args)...); err != nil {
			return err
		}
	}
	switch b.op.Action {
	case engine.ActionRetry:
		err = exec("", `UPDATE OR FAIL jobs SET `+setRetry+` WHERE `+w.sql(), slices.Concat([]any{nowNs, nil}, w.args)...)
	case engine.ActionCancel:
		err = exec("", `UPDATE OR FAIL jobs SET `+setCancel+` WHERE `+w.sql(), slices.Concat([]any{nowNs}, w.args)...)
	case engine.ActionRelease:
		err = exec("", `UPDATE OR FAIL jobs SET `+setRelease+` WHERE `+w.sql(), slices.Concat([]any{nowNs}, w.args)...)
	case engine.ActionDelete:
		err = exec("", `DELETE FROM jobs WHERE `+w.sql(), w.args...)
	}
	if err != nil {
		return err
	}
	b.succeeded += n
	return b.s.applyCounts(b.ctx, b.tx, counts)
}
