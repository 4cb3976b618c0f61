package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Claims: available jobs to running under new leases.

// claimQueries are the claim statements for one set of kinds.
type claimQueries struct {
	archive string // available past their deadline -> archived
	claim   string // jobs that never crashed
	suspect string // jobs on their first crash
	lone    string // jobs that crashed twice or more
	kinds   []string
}

// maxArchivePerClaim bounds the jobs one claim archives for their deadline.
const maxArchivePerClaim = 1000

// sqlClaimProbe is what a claim reads first, in its own transaction:
// whether the queue (?1) is paused, and whether any of its available jobs
// is past its deadline at ?2. The archiving UPDATE runs only when one is:
// a probe of the index costs a fraction of an UPDATE ... RETURNING that
// finds nothing, and nearly every claim finds nothing.
const sqlClaimProbe = `SELECT EXISTS(SELECT 1 FROM queues WHERE name = ?1 AND paused = 1),
	EXISTS(SELECT 1 FROM jobs INDEXED BY jobs_deadline
		WHERE state = 'available' AND deadline IS NOT NULL AND queue = ?1 AND deadline < ?2)`

// claimQueriesFor builds (once per kind set) the claim statements. Kinds
// are bound as parameters ?7 onwards: kind, version, kind, version, ...
func (s *Store) claimQueriesFor(kinds map[string]int, pt *backend.ClaimPartition) *claimQueries {
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	key := strings.Join(names, "\x00")
	if len(names) == 0 {
		key = "\x01any"
	}
	if pt != nil {
		key += fmt.Sprintf("\x02%s\x02%d", pt.Key, pt.Max)
	}
	if v, ok := s.claimSQL.Load(key); ok {
		return v.(*claimQueries)
	}
	var kindIn, kindVersion string
	if len(names) > 0 {
		var in, kv strings.Builder
		in.WriteString(" AND kind IN (")
		kv.WriteString(" AND (")
		for i := range names {
			k, v := 7+2*i, 8+2*i
			if i > 0 {
				in.WriteString(", ")
				kv.WriteString(" OR ")
			}
			fmt.Fprintf(&in, "?%d", k)
			fmt.Fprintf(&kv, "(kind = ?%d AND schema_version <= ?%d)", k, v)
		}
		in.WriteString(")")
		kv.WriteString(")")
		kindIn, kindVersion = in.String(), kv.String()
	}
	if pt != nil {
		// A partitioned limit: only a job whose partition has room. Key
		// is a plain field name (sluicetype.ValidLimitKey), so a literal.
		kindVersion += fmt.Sprintf(` AND (SELECT count(*) FROM jobs r INDEXED BY jobs_running
			WHERE r.state = 'running' AND r.kind = jobs.kind
			AND coalesce(r.payload ->> '%[1]s', '') = coalesce(jobs.payload ->> '%[1]s', '')) < %[2]d`, pt.Key, pt.Max)
	}
	// ?1 lease id, ?2 worker, ?3 lease expiry, ?4 now, ?5 queue, ?6 limit.
	claim := func(index, suspects string) string {
		return `UPDATE OR FAIL jobs SET state = 'running', fence = fence + 1, lease_id = ?1, lease_worker = ?2,
			lease_expires_at = ?3, attempted_at = ?4, attempted_by = ?2, state_changed_at = ?4, version = version + 1
		WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY ` + index + `
			WHERE state = 'available' AND ` + suspects + ` AND queue = ?5
			AND (deadline IS NULL OR deadline >= ?4)` + kindVersion + `
			ORDER BY priority, scheduled_at, id LIMIT ?6)
		RETURNING ` + claimedColumns
	}
	q := &claimQueries{
		// The plan's PastDeadline write: ?1 state, ?2 terminal reason, ?3
		// JSON array [last error, error pattern]; ?4 now, ?5 queue, ?6
		// limit. The three first keep the kind parameters' numbers the same
		// as the claim's.
		archive: `UPDATE OR FAIL jobs SET state = ?1, terminal_reason = ?2, finalized_at = ?4,
			state_changed_at = ?4, version = version + 1,
			last_error = ?3 ->> 0, error_pattern = ?3 ->> 1
		WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_deadline
			WHERE state = 'available' AND deadline IS NOT NULL AND queue = ?5 AND deadline < ?4` + kindIn + `
			ORDER BY deadline LIMIT ?6)
		RETURNING ` + jobColumns,
		claim: claim("jobs_claim", "crash_attempt = 0"),
		// The partial index's own term, repeated, lets the planner use it.
		suspect: claim("jobs_claim_suspect", "crash_attempt > 0 AND crash_attempt = 1"),
		lone:    claim("jobs_claim_suspect", "crash_attempt > 0 AND crash_attempt >= 2"),
		kinds:   names,
	}
	v, _ := s.claimSQL.LoadOrStore(key, q)
	return v.(*claimQueries)
}

// JobClaim archives the queue's available jobs past their deadline, then
// moves up to Limit available jobs to running under a new lease: jobs
// that never crashed first, then up to Suspects jobs on their first crash
// if the batch is not full, and, when Lone is set and the claim found
// nothing else, one job that crashed twice or more.
func (s *Store) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	all, err := s.limits.Get(ctx, s.readLimits)
	if err != nil {
		return nil, err
	}
	if lim := backend.LimitsFor(p, all); len(lim) > 0 {
		return s.claimLimited(ctx, p, lim)
	}
	c, err := s.claimStmts(ctx, p)
	if err != nil {
		return nil, err
	}
	var res *backend.JobClaimResult
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		var err error
		res, err = s.claimIn(ctx, tx, now, p, c)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// claimPrepared are one kind set's claim statements, prepared before the
// write transaction.
type claimPrepared struct {
	q   *claimQueries
	st  []*sql.Stmt
	wst []*sql.Stmt
}

func (s *Store) claimStmts(ctx context.Context, p *backend.JobClaimParams) (*claimPrepared, error) {
	q := s.claimQueriesFor(p.Kinds, p.Partition)
	st, err := s.stmts(ctx, q.archive, q.claim, q.suspect, sqlInsertEvent, sqlClaimProbe, q.lone)
	if err != nil {
		return nil, err
	}
	var wst []*sql.Stmt
	if p.PastDeadline.DeadLetter != nil {
		if wst, err = s.stmts(ctx, finishWorkflowStmts...); err != nil {
			return nil, err
		}
	}
	return &claimPrepared{q: q, st: st, wst: wst}, nil
}

// claimIn is one claim inside the write transaction tx.
func (s *Store) claimIn(ctx context.Context, tx *wtx, now time.Time, p *backend.JobClaimParams, c *claimPrepared) (*backend.JobClaimResult, error) {
	q, st, wst := c.q, c.st, c.wst
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	res := &backend.JobClaimResult{}
	err := func() error {
		res.Jobs, res.Dead = nil, nil
		res.Now = now
		nowNs := now.UnixNano()
		var paused, overdue bool
		if err := tx.StmtContext(ctx, st[4]).QueryRowContext(ctx, p.Queue, nowNs).Scan(&paused, &overdue); err != nil {
			return fmt.Errorf("sqlite: claim %s: %w", p.Queue, err)
		}
		if paused {
			return nil
		}
		counts := countDeltas{}
		kindArgs := make([]any, 0, 2*len(q.kinds))
		for _, k := range q.kinds {
			kindArgs = append(kindArgs, k, p.Kinds[k])
		}

		// Archive what can no longer run.
		var dead []*sluicetype.Job
		pd := &p.PastDeadline
		if overdue && pd.To != "" {
			args := append([]any{string(pd.To), string(pd.Reason), jsonStrings([]string{pd.LastError, pd.Pattern}),
				nowNs, p.Queue, maxArchivePerClaim}, kindArgs...)
			var err error
			if dead, err = queryJobs(ctx, tx.StmtContext(ctx, st[0]), args); err != nil {
				return fmt.Errorf("sqlite: claim %s: archive past deadline: %w", p.Queue, err)
			}
		}
		if len(dead) > 0 {
			ev := tx.StmtContext(ctx, st[3])
			for _, j := range dead {
				if _, err := ev.ExecContext(ctx, j.ID, string(pd.Event.Kind), nowNs, pd.Event.Actor,
					string(pd.Event.From), string(pd.Event.To), j.Attempt, pd.Event.Message); err != nil {
					return fmt.Errorf("sqlite: claim %s: archive job %s: %w", p.Queue, j.ID, err)
				}
			}
			res.Dead = dead
			counts.move(p.Queue, sluicetype.StateAvailable, pd.To, int64(len(dead)))
			if err := claimDeadLetters(ctx, tx, wst, pd, dead, counts, nowNs); err != nil {
				return fmt.Errorf("sqlite: claim %s: %w", p.Queue, err)
			}
		}
		if p.Limit <= 0 {
			return s.applyCounts(ctx, tx, counts)
		}

		expires := now.Add(lease).UnixNano()
		args := append([]any{p.LeaseID, p.WorkerID, expires, nowNs, p.Queue, p.Limit}, kindArgs...)
		claimed := &claimedJob{queue: p.Queue, lease: p.LeaseID, worker: p.WorkerID, now: now, expires: fromNanos(expires)}
		jobs, err := claimed.query(ctx, tx.StmtContext(ctx, st[1]), args)
		if err != nil {
			return fmt.Errorf("sqlite: claim %s: %w", p.Queue, err)
		}
		if n := min(p.Suspects, p.Limit-len(jobs)); n > 0 {
			args[5] = n
			sus, err := claimed.query(ctx, tx.StmtContext(ctx, st[2]), args)
			if err != nil {
				return fmt.Errorf("sqlite: claim %s: suspects: %w", p.Queue, err)
			}
			sortJobs(sus)
			sortJobs(jobs)
			jobs = append(jobs, sus...)
		} else {
			sortJobs(jobs)
		}
		if p.Lone && len(jobs) == 0 {
			args[5] = 1
			if jobs, err = claimed.query(ctx, tx.StmtContext(ctx, st[5]), args); err != nil {
				return fmt.Errorf("sqlite: claim %s: lone: %w", p.Queue, err)
			}
		}
		res.Jobs = jobs
		counts.move(p.Queue, sluicetype.StateAvailable, sluicetype.StateRunning, int64(len(jobs)))
		return s.applyCounts(ctx, tx, counts)
	}()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// sortJobs puts claimed jobs in claim order: priority, scheduled_at, id.
func sortJobs(js []*sluicetype.Job) {
	sort.Slice(js, func(a, b int) bool {
		x, y := js[a], js[b]
		if x.Priority != y.Priority {
			return x.Priority < y.Priority
		}
		if !x.ScheduledAt.Equal(y.ScheduledAt) {
			return x.ScheduledAt.Before(y.ScheduledAt)
		}
		return x.ID < y.ID
	})
}

func queryJobs(ctx context.Context, st *sql.Stmt, args []any) ([]*sluicetype.Job, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sluicetype.Job
	js := newJobScanner()
	for rows.Next() {
		j, err := js.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}
