package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

const defaultLease = 30 * time.Second

const (
	sqlAnyQuarantined = `SELECT EXISTS(SELECT 1 FROM fingerprints WHERE status = 'quarantined')`
	sqlIsQuarantined  = `SELECT EXISTS(SELECT 1 FROM fingerprints WHERE fingerprint = ? AND status = 'quarantined')`
	sqlInsertJob      = `INSERT INTO jobs (id, queue, kind, payload, schema_version, metadata, tags, priority, state,
		max_attempts, fingerprint, scheduled_at, deadline, timeout_ns, created_at, state_changed_at,
		checkpoint, dead_letter_of, retry_of)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15, NULL, '', '')
	ON CONFLICT (id) DO NOTHING`
	sqlGetJob          = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?`
	sqlGetJobNoPayload = `SELECT ` + jobColumnsNoPayload + ` FROM jobs WHERE id = ?`
	sqlInsertEvent     = `INSERT INTO job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
)

// JobInsertMany writes new jobs in one transaction; each is accepted or
// refused on its own.
func (s *Store) JobInsertMany(ctx context.Context, p *engine.JobInsertManyParams) ([]engine.JobInsertResult, error) {
	res := make([]engine.JobInsertResult, len(p.Jobs))
	if len(p.Jobs) == 0 {
		return res, nil
	}
	st, err := s.stmts(ctx, sqlAnyQuarantined, sqlIsQuarantined, sqlInsertJob, sqlGetJobNoPayload)
	if err != nil {
		return nil, err
	}
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		for i := range res {
			res[i] = engine.JobInsertResult{}
		}
		var anyQuarantined bool
		if err := tx.StmtContext(ctx, st[0]).QueryRowContext(ctx).Scan(&anyQuarantined); err != nil {
			return fmt.Errorf("sqlite: insert jobs: %w", err)
		}
		var isQ *sql.Stmt
		if anyQuarantined {
			isQ = tx.StmtContext(ctx, st[1])
		}
		ins := tx.StmtContext(ctx, st[2])
		var get *sql.Stmt
		nowNs := now.UnixNano()
		counts := countDeltas{}
		for i, jp := range p.Jobs {
			if jp == nil || jp.ID == "" {
				res[i].Err = fmt.Errorf("sqlite: insert job: %w: no id", engine.ErrInvalid)
				continue
			}
			if isQ != nil && jp.Fingerprint != "" {
				var q bool
				if err := isQ.QueryRowContext(ctx, jp.Fingerprint).Scan(&q); err != nil {
					return fmt.Errorf("sqlite: insert job %s: %w", jp.ID, err)
				}
				if q {
					res[i].Err = fmt.Errorf("insert job %s: %w: %s", jp.ID, engine.ErrQuarantined, jp.Fingerprint)
					continue
				}
			}
			due := now.Add(jp.Delay)
			if jp.ScheduledAt != nil {
				due = jp.ScheduledAt.UTC()
			}
			state := engine.StateAvailable
			if due.After(now) {
				state = engine.StateScheduled
			}
			tags := "[]"
			if len(jp.Tags) > 0 {
				tags = jsonStrings(jp.Tags)
			}
			r, err := ins.ExecContext(ctx,
				jp.ID, jp.Queue, jp.Kind, string(jp.Payload), jp.SchemaVersion,
				textOrNull(jp.Metadata), tags, jp.Priority, string(state),
				jp.MaxAttempts, jp.Fingerprint, due.UnixNano(), nanosPtr(jp.Deadline),
				int64(jp.Timeout), nowNs)
			if err != nil {
				return fmt.Errorf("sqlite: insert job %s: %w", jp.ID, err)
			}
			if n, err := r.RowsAffected(); err != nil {
				return fmt.Errorf("sqlite: insert job %s: %w", jp.ID, err)
			} else if n == 1 {
				counts.move(jp.Queue, "", state, 1)
				j := &engine.Job{
					ID:             jp.ID,
					Queue:          jp.Queue,
					Kind:           jp.Kind,
					SchemaVersion:  jp.SchemaVersion,
					Metadata:       cloneRaw(jp.Metadata),
					Priority:       jp.Priority,
					State:          state,
					MaxAttempts:    jp.MaxAttempts,
					Fingerprint:    jp.Fingerprint,
					ScheduledAt:    fromNanos(due.UnixNano()),
					Timeout:        jp.Timeout,
					CreatedAt:      now,
					StateChangedAt: now,
					Version:        1,
				}
				if len(jp.Tags) > 0 {
					j.Tags = append([]string(nil), jp.Tags...)
				}
				if jp.Deadline != nil {
					d := fromNanos(jp.Deadline.UnixNano())
					j.Deadline = &d
				}
				res[i].Job = j
				continue
			}
			// The id exists: the same job again, or a conflict.
			if get == nil {
				get = tx.StmtContext(ctx, st[3])
			}
			old, err := scanJob(get.QueryRowContext(ctx, jp.ID))
			if err != nil {
				return fmt.Errorf("sqlite: insert job %s: %w", jp.ID, err)
			}
			if old.Queue != jp.Queue || old.Kind != jp.Kind || old.Fingerprint != jp.Fingerprint {
				res[i].Err = fmt.Errorf("insert job %s: %w: the id exists with other content", jp.ID, engine.ErrConflict)
				continue
			}
			res[i].Job = old
			res[i].Existing = true
		}
		s.keepResult(res)
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// JobGetByID returns one job, with its payload only when asked.
func (s *Store) JobGetByID(ctx context.Context, p *engine.JobGetByIDParams) (*engine.Job, error) {
	q := sqlGetJobNoPayload
	if p.IncludePayload {
		q = sqlGetJob
	}
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	j, err := scanJob(st.QueryRowContext(ctx, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", p.ID, engine.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get job %s: %w", p.ID, err)
	}
	return j, nil
}

// JobEventList returns a job's stored events, oldest first.
func (s *Store) JobEventList(ctx context.Context, p *engine.JobEventListParams) ([]engine.Event, error) {
	st, err := s.readStmt(ctx, `SELECT job_id, kind, at, actor, from_state, to_state, attempt, message
		FROM job_events WHERE job_id = ? ORDER BY id`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, p.JobID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events of job %s: %w", p.JobID, err)
	}
	defer rows.Close()
	var out []engine.Event
	for rows.Next() {
		var e engine.Event
		var at int64
		var kind, from, to string
		if err := rows.Scan(&e.JobID, &kind, &at, &e.Actor, &from, &to, &e.Attempt, &e.Message); err != nil {
			return nil, fmt.Errorf("sqlite: events of job %s: %w", p.JobID, err)
		}
		e.Kind, e.From, e.To, e.At = engine.EventKind(kind), engine.State(from), engine.State(to), fromNanos(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: events of job %s: %w", p.JobID, err)
	}
	return out, nil
}

// claimQueries are the claim statements for one set of kinds.
type claimQueries struct {
	archive string // available past their deadline -> archived
	claim   string // non-suspects
	suspect string // suspects
	kinds   []string
}

// maxArchivePerClaim bounds the jobs one claim archives for their deadline.
const maxArchivePerClaim = 1000

// msgDeadlineBeforeRun is the event message, last error and error pattern
// of a job archived at claim because its deadline had passed: it died
// without a handler error, and still forms an error group.
const msgDeadlineBeforeRun = "deadline passed before the job ran"

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
func (s *Store) claimQueriesFor(kinds map[string]int) *claimQueries {
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	key := strings.Join(names, "\x00")
	if len(names) == 0 {
		key = "\x01any"
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
		// ?4 now, ?5 queue, ?6 limit; ?1 to ?3 are bound but unused, which
		// keeps the kind parameters' numbers the same as the claim's.
		archive: `UPDATE OR FAIL jobs SET state = 'archived', terminal_reason = 'deadline_exceeded', finalized_at = ?4,
			state_changed_at = ?4, version = version + 1,
			last_error = '` + msgDeadlineBeforeRun + `', error_pattern = '` + msgDeadlineBeforeRun + `'
		WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_deadline
			WHERE state = 'available' AND deadline IS NOT NULL AND queue = ?5 AND deadline < ?4` + kindIn + `
			ORDER BY deadline LIMIT ?6)
		RETURNING ` + jobColumns,
		claim:   claim("jobs_claim", "crash_attempt = 0"),
		suspect: claim("jobs_claim_suspect", "crash_attempt > 0"),
		kinds:   names,
	}
	v, _ := s.claimSQL.LoadOrStore(key, q)
	return v.(*claimQueries)
}

// JobClaim archives the queue's available jobs past their deadline, then
// moves up to Limit available jobs to running under a new lease:
// non-suspects first, then up to Suspects suspects if the batch is not
// full.
func (s *Store) JobClaim(ctx context.Context, p *engine.JobClaimParams) (*engine.JobClaimResult, error) {
	q := s.claimQueriesFor(p.Kinds)
	st, err := s.stmts(ctx, q.archive, q.claim, q.suspect, sqlInsertEvent, sqlClaimProbe)
	if err != nil {
		return nil, err
	}
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	res := &engine.JobClaimResult{}
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
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
		var dead []*engine.Job
		if overdue {
			args := append([]any{nil, nil, nil, nowNs, p.Queue, maxArchivePerClaim}, kindArgs...)
			var err error
			if dead, err = queryJobs(ctx, tx.StmtContext(ctx, st[0]), args); err != nil {
				return fmt.Errorf("sqlite: claim %s: archive past deadline: %w", p.Queue, err)
			}
		}
		if len(dead) > 0 {
			ev := tx.StmtContext(ctx, st[3])
			for _, j := range dead {
				if _, err := ev.ExecContext(ctx, j.ID, string(engine.EventArchived), nowNs, p.WorkerID,
					string(engine.StateAvailable), string(engine.StateArchived), j.Attempt,
					msgDeadlineBeforeRun); err != nil {
					return fmt.Errorf("sqlite: claim %s: archive job %s: %w", p.Queue, j.ID, err)
				}
			}
			res.Dead = dead
			counts.move(p.Queue, engine.StateAvailable, engine.StateArchived, int64(len(dead)))
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
		res.Jobs = jobs
		counts.move(p.Queue, engine.StateAvailable, engine.StateRunning, int64(len(jobs)))
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// sortJobs puts claimed jobs in claim order: priority, scheduled_at, id.
func sortJobs(js []*engine.Job) {
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

func queryJobs(ctx context.Context, st *sql.Stmt, args []any) ([]*engine.Job, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*engine.Job
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

const (
	// ?1 now, ?2 JSON array of [id, lease id, fence]. The unary + keeps the
	// planner from walking the state index: each item is one id lookup.
	sqlComplete = `UPDATE OR FAIL jobs SET state = 'completed', finalized_at = ?1, state_changed_at = ?1,
		lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL, version = version + 1
	FROM (SELECT value ->> 0 AS id, value ->> 1 AS lease_id, value ->> 2 AS fence FROM json_each(?2)) AS j
	WHERE jobs.id = j.id AND jobs.lease_id = j.lease_id AND jobs.fence = j.fence AND +jobs.state = 'running'
	RETURNING jobs.id, jobs.fence, jobs.fingerprint, jobs.queue`
	// ?1 JSON array of [id, lease id, fence].
	sqlCompleteDelete = `DELETE FROM jobs WHERE rowid IN (
		SELECT jobs.rowid FROM json_each(?1) AS j CROSS JOIN jobs ON jobs.id = j.value ->> 0
		WHERE jobs.lease_id = j.value ->> 1 AND jobs.fence = j.value ->> 2 AND +jobs.state = 'running')
	RETURNING id, fence, fingerprint, queue`
	sqlAnyProbation = `SELECT EXISTS(SELECT 1 FROM fingerprints WHERE status = 'probation')`
	sqlEndProbation = `DELETE FROM fingerprints WHERE status = 'probation' AND fingerprint IN (SELECT value FROM json_each(?))`
)

type refKey struct {
	id    string
	fence int64
}

// JobCompleteMany completes (or deletes) successful jobs in one
// transaction; each item is fenced on its own.
func (s *Store) JobCompleteMany(ctx context.Context, p *engine.JobCompleteManyParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	// Split into rounds with distinct ids (a repeated id is a stale or a
	// duplicate acknowledgement; each round's statement matches an id once).
	type round struct {
		complete, del []int
	}
	var rounds []round
	seen := make(map[string]int, len(p.Items)) // id -> round count
	for i, it := range p.Items {
		r := seen[it.ID]
		seen[it.ID] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, round{})
		}
		if it.Delete {
			rounds[r].del = append(rounds[r].del, i)
		} else {
			rounds[r].complete = append(rounds[r].complete, i)
		}
	}
	st, err := s.stmts(ctx, sqlComplete, sqlCompleteDelete, sqlAnyProbation, sqlEndProbation)
	if err != nil {
		return nil, err
	}
	encode := func(idx []int) string {
		b := make([]byte, 0, len(idx)*80)
		b = append(b, '[')
		for n, i := range idx {
			if n > 0 {
				b = append(b, ',')
			}
			it := &p.Items[i]
			b = append(b, '[')
			b = appendJSONString(b, it.ID)
			b = append(b, ',')
			b = appendJSONString(b, it.LeaseID)
			b = append(b, ',')
			b = strconv.AppendInt(b, it.Fence, 10)
			b = append(b, ']')
		}
		return string(append(b, ']'))
	}
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		done := make(map[refKey]bool, len(p.Items))
		fps := make(map[string]bool)
		counts := countDeltas{}
		run := func(st *sql.Stmt, to engine.State, args ...any) error {
			rows, err := tx.StmtContext(ctx, st).QueryContext(ctx, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k refKey
				var fp, queue string
				if err := rows.Scan(&k.id, &k.fence, &fp, &queue); err != nil {
					return err
				}
				counts.move(queue, engine.StateRunning, to, 1)
				done[k] = true
				if fp != "" {
					fps[fp] = true
				}
			}
			return rows.Err()
		}
		nowNs := now.UnixNano()
		for _, r := range rounds {
			if len(r.complete) > 0 {
				if err := run(st[0], engine.StateCompleted, nowNs, encode(r.complete)); err != nil {
					return fmt.Errorf("sqlite: complete jobs: %w", err)
				}
			}
			if len(r.del) > 0 {
				if err := run(st[1], engine.StateDeleted, encode(r.del)); err != nil {
					return fmt.Errorf("sqlite: complete jobs: %w", err)
				}
			}
		}
		for i, it := range p.Items {
			k := refKey{it.ID, it.Fence}
			if done[k] {
				delete(done, k) // a duplicate item is applied once
				out[i] = nil
			} else {
				out[i] = fmt.Errorf("complete job %s: %w", it.ID, engine.ErrLeaseLost)
			}
		}
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		if len(fps) == 0 {
			return nil
		}
		var probation bool
		if err := tx.StmtContext(ctx, st[2]).QueryRowContext(ctx).Scan(&probation); err != nil {
			return fmt.Errorf("sqlite: complete jobs: %w", err)
		}
		if !probation {
			return nil
		}
		list := make([]string, 0, len(fps))
		for fp := range fps {
			list = append(list, fp)
		}
		if _, err := tx.StmtContext(ctx, st[3]).ExecContext(ctx, jsonStrings(list)); err != nil {
			return fmt.Errorf("sqlite: complete jobs: end probation: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const (
	sqlFinishRead = `SELECT state, lease_id, fence, attempt, crash_attempt, errors, fingerprint, kind, queue
		FROM jobs WHERE id = ?`
	sqlFinishDelete = `DELETE FROM jobs WHERE id = ?`
	// ?1 id, ?2 state, ?3 attempt, ?4 crash_attempt, ?5 scheduled_at or
	// NULL, ?6 finalized_at, ?7 terminal_reason, ?8 errors or NULL, ?9 now,
	// ?10 last error or NULL, ?11 error pattern or NULL.
	sqlFinishUpdate = `UPDATE jobs SET state = ?2, attempt = ?3, crash_attempt = ?4,
		scheduled_at = coalesce(?5, scheduled_at), finalized_at = ?6, terminal_reason = ?7,
		errors = coalesce(?8, errors), lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL,
		last_error = coalesce(?10, last_error), error_pattern = coalesce(?11, error_pattern),
		state_changed_at = ?9, version = version + 1
	WHERE id = ?1
	RETURNING ` + jobColumns
	// ?1 fingerprint, ?2 kind, ?3 now, ?4 last error, ?5 last job id, ?6
	// crashes to add. A new record counts the crashes of all the
	// fingerprint's jobs (this one's included: its row is written first).
	sqlQuarantine = `INSERT INTO fingerprints (fingerprint, kind, status, since, crashes, last_error, last_job_id)
	VALUES (?1, ?2, 'quarantined', ?3,
		(SELECT coalesce(sum(crash_attempt), 0) FROM jobs INDEXED BY jobs_fingerprint WHERE fingerprint = ?1), ?4, ?5)
	ON CONFLICT (fingerprint) DO UPDATE SET
		kind = excluded.kind,
		since = CASE WHEN fingerprints.status = 'quarantined' THEN fingerprints.since ELSE excluded.since END,
		status = 'quarantined',
		crashes = fingerprints.crashes + ?6,
		last_error = excluded.last_error,
		last_job_id = excluded.last_job_id`
	// A crash of a job whose fingerprint has a record (quarantined or on
	// probation) counts on it. ?1 fingerprint, ?2 last error, ?3 last job id.
	sqlCountCrash = `UPDATE fingerprints SET crashes = crashes + 1, last_error = ?2, last_job_id = ?3
	WHERE fingerprint = ?1`
	// ?1 fingerprint, ?2 now.
	sqlHold = `UPDATE OR FAIL jobs SET state = 'quarantined', terminal_reason = 'quarantined', finalized_at = ?2,
		state_changed_at = ?2, version = version + 1
	WHERE fingerprint = ?1 AND state IN ('available', 'scheduled', 'retryable')
	RETURNING id, attempt`
	sqlHoldStates = `SELECT id, state, queue FROM jobs
	WHERE fingerprint = ? AND state IN ('available', 'scheduled', 'retryable')`
)

// JobFinish applies one fenced transition out of running.
func (s *Store) JobFinish(ctx context.Context, p *engine.JobFinishParams) (*engine.Job, error) {
	if p.To == engine.StateRunning || (p.To != engine.StateDeleted && !p.To.Valid()) {
		return nil, fmt.Errorf("finish job %s: %w: cannot go to %q", p.ID, engine.ErrInvalidTransition, p.To)
	}
	st, err := s.stmts(ctx, sqlFinishRead, sqlFinishDelete, sqlFinishUpdate, sqlInsertEvent,
		sqlQuarantine, sqlHoldStates, sqlHold, sqlCountCrash)
	if err != nil {
		return nil, err
	}
	var out *engine.Job
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		out = nil
		var (
			state, fingerprint, kind, errs, queue string
			leaseID                               sql.NullString
			fence                                 int64
			attempt, crash                        int
		)
		err := tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID).Scan(&state, &leaseID, &fence, &attempt, &crash, &errs, &fingerprint, &kind, &queue)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("finish job %s: %w", p.ID, engine.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("sqlite: finish job %s: %w", p.ID, err)
		}
		if state != string(engine.StateRunning) || !leaseID.Valid || leaseID.String != p.LeaseID || fence != p.Fence {
			return fmt.Errorf("finish job %s: %w", p.ID, engine.ErrLeaseLost)
		}
		if err := finishGuards(ctx, tx, p, now); err != nil {
			return err
		}
		counts := countDeltas{}
		counts.move(queue, engine.StateRunning, p.To, 1)
		if p.To == engine.StateDeleted {
			if _, err := tx.StmtContext(ctx, st[1]).ExecContext(ctx, p.ID); err != nil {
				return fmt.Errorf("sqlite: finish job %s: delete: %w", p.ID, err)
			}
			return s.applyCounts(ctx, tx, counts)
		}
		run := attempt + 1 // which run just ended
		switch p.Charge {
		case engine.ChargeAttempt:
			attempt++
		case engine.ChargeCrash:
			crash++
		}
		nowNs := now.UnixNano()
		var scheduled, finalized, newErrs, lastErr, pattern any
		switch {
		case p.To == engine.StateRetryable || p.To == engine.StateScheduled:
			scheduled = now.Add(p.Delay).UnixNano()
		case p.To == engine.StateAvailable:
			scheduled = nowNs
		}
		reason := ""
		if p.To.Terminal() {
			finalized = nowNs
			reason = string(p.Reason)
		}
		if p.Error != nil {
			var list []engine.AttemptError
			if errs != "" && errs != "[]" {
				var err error
				if list, err = decodeAttemptErrors(errs); err != nil {
					return fmt.Errorf("sqlite: finish job %s: errors: %w", p.ID, err)
				}
			}
			e := *p.Error
			e.At = now
			e.Attempt = run
			if e.Worker == "" {
				e.Worker = p.Actor
			}
			list = engine.CapErrors(append(list, e))
			b, err := json.Marshal(list)
			if err != nil {
				return fmt.Errorf("sqlite: finish job %s: errors: %w", p.ID, err)
			}
			newErrs = string(b)
			lastErr, pattern = p.Error.Message, p.ErrorPattern
		}
		j, err := scanJob(tx.StmtContext(ctx, st[2]).QueryRowContext(ctx, p.ID, string(p.To), attempt, crash,
			scheduled, finalized, reason, newErrs, nowNs, lastErr, pattern))
		if err != nil {
			return fmt.Errorf("sqlite: finish job %s: %w", p.ID, err)
		}
		ev := tx.StmtContext(ctx, st[3])
		if p.Event != "" {
			msg := p.Message
			if msg == "" && p.Error != nil {
				msg = p.Error.Message
			}
			if _, err := ev.ExecContext(ctx, p.ID, string(p.Event), nowNs, p.Actor,
				string(engine.StateRunning), string(p.To), run, msg); err != nil {
				return fmt.Errorf("sqlite: finish job %s: event: %w", p.ID, err)
			}
		}
		if fingerprint != "" && (p.Quarantine || p.Charge == engine.ChargeCrash) {
			lastErr := p.Message
			if p.Error != nil {
				lastErr = p.Error.Message
			}
			crashes := 0
			if p.Charge == engine.ChargeCrash {
				crashes = 1
			}
			if p.Quarantine {
				if _, err := tx.StmtContext(ctx, st[4]).ExecContext(ctx, fingerprint, kind, nowNs, lastErr, p.ID, crashes); err != nil {
					return fmt.Errorf("sqlite: finish job %s: quarantine: %w", p.ID, err)
				}
				if err := holdFingerprint(ctx, tx, st[5], st[6], ev, counts, fingerprint, p.Actor, nowNs); err != nil {
					return fmt.Errorf("sqlite: finish job %s: hold: %w", p.ID, err)
				}
			} else if _, err := tx.StmtContext(ctx, st[7]).ExecContext(ctx, fingerprint, lastErr, p.ID); err != nil {
				return fmt.Errorf("sqlite: finish job %s: count crash: %w", p.ID, err)
			}
		}
		out = j
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// holdFingerprint moves a quarantined fingerprint's waiting jobs to
// quarantined, each with a held event.
func holdFingerprint(ctx context.Context, tx *sql.Tx, states, hold, ev *sql.Stmt, counts countDeltas, fp, actor string, nowNs int64) error {
	type was struct{ state, queue string }
	from := map[string]was{}
	rows, err := tx.StmtContext(ctx, states).QueryContext(ctx, fp)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var w was
		if err := rows.Scan(&id, &w.state, &w.queue); err != nil {
			rows.Close()
			return err
		}
		from[id] = w
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(from) == 0 {
		return nil
	}
	rows, err = tx.StmtContext(ctx, hold).QueryContext(ctx, fp, nowNs)
	if err != nil {
		return err
	}
	type held struct {
		id      string
		attempt int
	}
	var hs []held
	for rows.Next() {
		var h held
		if err := rows.Scan(&h.id, &h.attempt); err != nil {
			rows.Close()
			return err
		}
		hs = append(hs, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, h := range hs {
		w := from[h.id]
		counts.move(w.queue, engine.State(w.state), engine.StateQuarantined, 1)
		if _, err := ev.ExecContext(ctx, h.id, string(engine.EventHeld), nowNs, actor,
			w.state, string(engine.StateQuarantined), h.attempt,
			"fingerprint quarantined"); err != nil {
			return err
		}
	}
	return nil
}

const sqlRenew = `UPDATE jobs SET lease_expires_at = ?4, version = version + 1
	WHERE id = ?1 AND lease_id = ?2 AND fence = ?3 AND state = 'running'`

// JobLeaseRenew extends leases; each item is fenced on its own.
func (s *Store) JobLeaseRenew(ctx context.Context, p *engine.JobLeaseRenewParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	st, err := s.stmts(ctx, sqlRenew)
	if err != nil {
		return nil, err
	}
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		renew := tx.StmtContext(ctx, st[0])
		exp := now.Add(lease).UnixNano()
		for i, it := range p.Items {
			r, err := renew.ExecContext(ctx, it.ID, it.LeaseID, it.Fence, exp)
			if err != nil {
				return fmt.Errorf("sqlite: renew lease of job %s: %w", it.ID, err)
			}
			n, err := r.RowsAffected()
			if err != nil {
				return fmt.Errorf("sqlite: renew lease of job %s: %w", it.ID, err)
			}
			out[i] = nil
			if n == 0 {
				out[i] = fmt.Errorf("renew lease of job %s: %w", it.ID, engine.ErrLeaseLost)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobListExpiredLeases lists running jobs whose lease has expired, oldest
// expiry first.
func (s *Store) JobListExpiredLeases(ctx context.Context, p *engine.JobListExpiredLeasesParams) ([]engine.ExpiredLease, error) {
	st, err := s.readStmt(ctx, `SELECT `+jobColumnsNoPayload+`,
		EXISTS(SELECT 1 FROM workers w WHERE w.id = jobs.lease_worker AND w.expires_at >= ?1)
	FROM jobs INDEXED BY jobs_running
	WHERE state = 'running' AND lease_expires_at < ?1
	ORDER BY lease_expires_at, id LIMIT ?2`)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := st.QueryContext(ctx, now().UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: expired leases: %w", err)
	}
	defer rows.Close()
	var out []engine.ExpiredLease
	for rows.Next() {
		var alive bool
		j, err := scanJob(rows, &alive)
		if err != nil {
			return nil, fmt.Errorf("sqlite: expired leases: %w", err)
		}
		out = append(out, engine.ExpiredLease{Job: j, WorkerAlive: alive})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: expired leases: %w", err)
	}
	return out, nil
}

// sqlScheduleDue moves the due jobs of one state (?3: scheduled or
// retryable; RETURNING gives only new values, so the state the counters
// need is fixed per statement). ?1 now, ?2 limit. JobScheduleDue runs it
// for retryable jobs first: when more than Limit jobs are due, retries go
// before first runs (each state in scheduled_at order).
const sqlScheduleDue = `UPDATE OR FAIL jobs SET state = 'available', state_changed_at = ?1, version = version + 1
	WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_due
		WHERE state IN ('scheduled', 'retryable') AND state = ?3 AND scheduled_at <= ?1
		ORDER BY scheduled_at LIMIT ?2)
	RETURNING queue`

// JobScheduleDue makes due scheduled and retryable jobs available and
// returns the queues that got work, sorted.
func (s *Store) JobScheduleDue(ctx context.Context, p *engine.JobScheduleDueParams) ([]string, error) {
	st, err := s.stmts(ctx, sqlScheduleDue)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	var queues []string
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		queues = queues[:0]
		seen := map[string]bool{}
		counts := countDeltas{}
		moved := 0
		for _, from := range []engine.State{engine.StateRetryable, engine.StateScheduled} {
			if moved >= limit {
				break
			}
			rows, err := tx.StmtContext(ctx, st[0]).QueryContext(ctx, now.UnixNano(), limit-moved, string(from))
			if err != nil {
				return fmt.Errorf("sqlite: schedule due: %w", err)
			}
			for rows.Next() {
				var q string
				if err := rows.Scan(&q); err != nil {
					rows.Close()
					return fmt.Errorf("sqlite: schedule due: %w", err)
				}
				moved++
				counts.move(q, from, engine.StateAvailable, 1)
				if !seen[q] {
					seen[q] = true
					queues = append(queues, q)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: schedule due: %w", err)
			}
		}
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(queues)
	return queues, nil
}

const (
	// ?1 state, ?2 cutoff (exclusive), ?3 queues to leave alone (JSON
	// array), ?4 limit. A terminal job's state_changed_at is its
	// finalized_at, so the state index finds them in order (the index's
	// own WHERE term, repeated, lets the planner use the partial index).
	sqlDeleteExpired = `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_state_changed
		WHERE state = ?1 AND ` + sqlListable + ` AND state_changed_at < ?2 AND finalized_at < ?2
		AND queue NOT IN (SELECT value FROM json_each(?3))
		LIMIT ?4)
	RETURNING queue`
	// ?1 state, ?2 cutoff (exclusive), ?3 queue, ?4 limit.
	sqlDeleteExpiredQueue = `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_state_changed
		WHERE state = ?1 AND ` + sqlListable + ` AND state_changed_at < ?2 AND finalized_at < ?2 AND queue = ?3
		LIMIT ?4)
	RETURNING queue`
)

// JobDeleteExpired deletes terminal jobs past their retention (with their
// events), at most Limit in all. A retention of 0 deletes at once; a
// negative one, like a missing state, keeps the jobs.
func (s *Store) JobDeleteExpired(ctx context.Context, p *engine.JobDeleteExpiredParams) (int, error) {
	st, err := s.stmts(ctx, sqlDeleteExpired, sqlDeleteExpiredQueue)
	if err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	// Queues overriding each state's default.
	overriding := map[engine.State][]string{}
	queues := make([]string, 0, len(p.QueueRetention))
	for q, m := range p.QueueRetention {
		queues = append(queues, q)
		for state := range m {
			overriding[state] = append(overriding[state], q)
		}
	}
	sort.Strings(queues)
	states := func(m map[engine.State]time.Duration) []engine.State {
		out := make([]engine.State, 0, len(m))
		for _, st := range engine.AllStates {
			if d, ok := m[st]; ok && st.Terminal() && d >= 0 {
				out = append(out, st)
			}
		}
		return out
	}
	total := 0
	err = s.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		total = 0
		counts := countDeltas{}
		del := func(st *sql.Stmt, args ...any) error {
			rows, err := tx.StmtContext(ctx, st).QueryContext(ctx, args...)
			if err != nil {
				return fmt.Errorf("sqlite: delete expired %s jobs: %w", args[0], err)
			}
			defer rows.Close()
			state := engine.State(args[0].(string))
			for rows.Next() {
				var q string
				if err := rows.Scan(&q); err != nil {
					return fmt.Errorf("sqlite: delete expired %s jobs: %w", args[0], err)
				}
				counts.move(q, state, engine.StateDeleted, 1)
				total++
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: delete expired %s jobs: %w", args[0], err)
			}
			return nil
		}
		// Jobs finalized before the cutoff go; a retention of 0 takes
		// those finalized up to now.
		cut := func(d time.Duration) int64 {
			if d == 0 {
				return now.UnixNano() + 1
			}
			return now.Add(-d).UnixNano()
		}
		sweep := func() error {
			for _, state := range states(p.Retention) {
				if total >= limit {
					return nil
				}
				if err := del(st[0], string(state), cut(p.Retention[state]), jsonStrings(overriding[state]), limit-total); err != nil {
					return err
				}
			}
			for _, q := range queues {
				m := p.QueueRetention[q]
				for _, state := range states(m) {
					if total >= limit {
						return nil
					}
					if err := del(st[1], string(state), cut(m[state]), q, limit-total); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := sweep(); err != nil {
			return err
		}
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}

// finishGuards checks the reaper's conditions inside JobFinish's
// transaction: the lease still expired, and for a crash its worker still
// without a live heartbeat. Either failing means a renewal or a beat won
// the race: ErrLeaseLost, nothing written.
func finishGuards(ctx context.Context, tx *sql.Tx, p *engine.JobFinishParams, now time.Time) error {
	if !p.IfLeaseExpired && !p.IfWorkerGone {
		return nil
	}
	var expires int64
	var worker string
	err := tx.QueryRowContext(ctx, `SELECT coalesce(lease_expires_at, 0), coalesce(lease_worker, '') FROM jobs WHERE id = ?`, p.ID).Scan(&expires, &worker)
	if err != nil {
		return fmt.Errorf("sqlite: finish job %s: read lease: %w", p.ID, err)
	}
	if p.IfLeaseExpired && expires >= now.UnixNano() {
		return fmt.Errorf("finish job %s: lease renewed: %w", p.ID, engine.ErrLeaseLost)
	}
	if p.IfWorkerGone {
		var alive bool
		err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM workers WHERE id = ? AND expires_at >= ?)`, worker, now.UnixNano()).Scan(&alive)
		if err != nil {
			return fmt.Errorf("sqlite: finish job %s: read worker: %w", p.ID, err)
		}
		if alive {
			return fmt.Errorf("finish job %s: worker %s beats again: %w", p.ID, worker, engine.ErrLeaseLost)
		}
	}
	return nil
}
