package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Bulk operations: persisted, leased, applied batch by batch.

const operationColumns = `id, action, selector, status, created_by, created_at, started_at, finished_at,
	matched, processed, succeeded, failed, error, rate, cursor_id, lease_holder, lease_fence, lease_expires_at, start_at,
	canary, canary_recent`

// opRow is an operations row: the operation and its runner's state.
type opRow struct {
	op      *sluicetype.Operation
	cursor  string
	holder  string
	fence   int64
	expires int64
	// recent is the canary window's ids as stored (backend.RecentSep).
	recent string
}

func scanOperation(sc scanner) (*opRow, error) {
	var r opRow
	var op sluicetype.Operation
	var action, selector, status string
	var created int64
	var started, finished, startAt sql.NullInt64
	var canary, recent string
	if err := sc.Scan(&op.ID, &action, &selector, &status, &op.CreatedBy, &created, &started, &finished,
		&op.Matched, &op.Processed, &op.Succeeded, &op.Failed, &op.Error, &op.Rate,
		&r.cursor, &r.holder, &r.fence, &r.expires, &startAt, &canary, &recent); err != nil {
		return nil, err
	}
	r.recent = recent
	c, err := backend.DecodeCanary(canary, recent)
	if err != nil {
		return nil, fmt.Errorf("operation %s: %w", op.ID, err)
	}
	op.Canary = c
	op.Action, op.Status, op.CreatedAt = sluicetype.Action(action), sluicetype.OperationStatus(status), fromNanos(created)
	if started.Valid {
		t := fromNanos(started.Int64)
		op.StartedAt = &t
	}
	if finished.Valid {
		t := fromNanos(finished.Int64)
		op.FinishedAt = &t
	}
	if startAt.Valid {
		t := fromNanos(startAt.Int64)
		op.StartAt = &t
	}
	if err := json.Unmarshal([]byte(selector), &op.Selector); err != nil {
		return nil, fmt.Errorf("operation %s: selector: %w", op.ID, err)
	}
	r.op = &op
	return &r, nil
}

const (
	sqlOperationInsert = `INSERT INTO operations (id, action, selector, status, created_by, created_at, matched, rate, start_at,
		canary, canary_recent)
	VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7, ?8, ?9, ?10)
	ON CONFLICT (id) DO NOTHING
	RETURNING ` + operationColumns
	sqlOperationGet = `SELECT ` + operationColumns + ` FROM operations WHERE id = ?`
)

// OperationInsert persists a new pending operation created now.
func (s *Store) OperationInsert(ctx context.Context, p *backend.OperationInsertParams) (*sluicetype.Operation, error) {
	sel, err := json.Marshal(p.Selector)
	if err != nil {
		return nil, fmt.Errorf("sqlite: operation %s: selector: %w", p.ID, err)
	}
	st, err := s.stmts(ctx, sqlOperationInsert)
	if err != nil {
		return nil, err
	}
	canary, err := backend.EncodeCanary(p.Canary)
	if err != nil {
		return nil, fmt.Errorf("sqlite: operation %s: %w", p.ID, err)
	}
	var startAt sql.NullInt64
	if p.StartAt != nil {
		startAt = sql.NullInt64{Int64: p.StartAt.UnixNano(), Valid: true}
	}
	var out *sluicetype.Operation
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := scanOperation(tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID, string(p.Action), string(sel),
			p.CreatedBy, now.UnixNano(), p.Matched, p.Rate, startAt, canary, backend.EncodeRecent(p.Canary)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("insert operation %s: %w: the id exists", p.ID, sluicetype.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("sqlite: insert operation %s: %w", p.ID, err)
		}
		out = r.op
		tx.keep(r.op)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OperationGet returns one operation or ErrNotFound.
func (s *Store) OperationGet(ctx context.Context, p *backend.OperationGetParams) (*sluicetype.Operation, error) {
	st, err := s.readStmt(ctx, sqlOperationGet)
	if err != nil {
		return nil, err
	}
	r, err := scanOperation(st.QueryRowContext(ctx, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: operation %s: %w", p.ID, err)
	}
	return r.op, nil
}

// OperationList pages operations newest first by (created_at, id).
func (s *Store) OperationList(ctx context.Context, p *backend.OperationListParams) ([]*sluicetype.Operation, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.DefaultListLimit
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
	var out []*sluicetype.Operation
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
	WHERE id = ?1 AND status IN ('pending', 'running', 'halted')
	RETURNING ` + operationColumns

// OperationCancel marks a pending, running or halted operation cancelled; its
// runner stops at its next batch, whose write is refused.
func (s *Store) OperationCancel(ctx context.Context, p *backend.OperationCancelParams) (*sluicetype.Operation, error) {
	return s.operationMove(ctx, "cancel", p.ID, sqlOperationCancel, func(now time.Time) []any {
		return []any{p.ID, now.UnixNano(), p.Message}
	})
}

// operationMove runs an operator's change of operation id (verb: cancel,
// resume): query, with args(now), is one UPDATE … RETURNING that takes
// the operation only from the statuses it may leave; when it takes none,
// the operation is read to say why: not found, or the status it is in.
func (s *Store) operationMove(ctx context.Context, verb, id, query string, args func(now time.Time) []any) (*sluicetype.Operation, error) {
	st, err := s.stmts(ctx, query, sqlOperationGet)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.Operation
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := scanOperation(tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, args(now)...))
		if errors.Is(err, sql.ErrNoRows) {
			cur, err := scanOperation(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, id))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%s operation %s: %w", verb, id, sluicetype.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("sqlite: %s operation %s: %w", verb, id, err)
			}
			return fmt.Errorf("%s operation %s: %w: it is %s", verb, id, sluicetype.ErrWrongState, cur.op.Status)
		}
		if err != nil {
			return fmt.Errorf("sqlite: %s operation %s: %w", verb, id, err)
		}
		out = r.op
		tx.keep(r.op)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const (
	// ?1 now. A scheduled operation waits for its start time.
	sqlOperationNext = `SELECT id FROM operations
	WHERE status IN ('pending', 'running') AND (lease_holder = '' OR lease_expires_at <= ?1)
		AND (start_at IS NULL OR start_at <= ?1)
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
// lease is free or expired, and whose start time has come, to p.Holder
// (fence +1); nil when there is none.
func (s *Store) OperationClaim(ctx context.Context, p *backend.OperationClaimParams) (*backend.OperationLease, error) {
	st, err := s.stmts(ctx, sqlOperationNext, sqlOperationLease)
	if err != nil {
		return nil, err
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	var out *backend.OperationLease
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
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
		out = &backend.OperationLease{Operation: r.op, Holder: r.holder, Fence: r.fence, Cursor: r.cursor}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const (
	// ?1 id, ?2 processed, ?3 succeeded, ?4 failed, ?5 cursor, ?6 lease
	// expiry.
	sqlOperationProgress = `UPDATE operations SET processed = processed + ?2, succeeded = succeeded + ?3,
		failed = failed + ?4, cursor_id = ?5, lease_expires_at = ?6
	WHERE id = ?1
	RETURNING ` + operationColumns
	// ?1 id, ?2 status, ?3 finished_at or NULL (kept), ?4 error ('' kept),
	// ?5 holder, ?6 fence.
	sqlOperationFinish = `UPDATE operations SET status = ?2, finished_at = coalesce(?3, finished_at),
		error = CASE WHEN ?4 = '' THEN error ELSE ?4 END
	WHERE id = ?1 AND status = 'running' AND lease_holder = ?5 AND lease_fence = ?6
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
)

// sqlBulkByRowid is a spec's write on a list of jobs: ?1 now, ?2 NULL (no
// new deadline), ?3 JSON array of rowids.
func sqlBulkByRowid(spec backend.ActionSpec) string {
	if spec.Has(backend.EffectDelete) {
		return `DELETE FROM jobs WHERE rowid IN (SELECT value FROM json_each(?3))`
	}
	return `UPDATE OR FAIL jobs SET ` + specSet(spec) + ` WHERE rowid IN (SELECT value FROM json_each(?3))`
}

// setArgs are the leading arguments of a statement that starts with
// specSet: now, and the deadline when the set names one.
func setArgs(spec backend.ActionSpec, nowNs int64, deadline any) []any {
	if spec.Has(backend.EffectOneMoreAttempt) {
		return []any{nowNs, deadline}
	}
	return []any{nowNs}
}

// OperationProcessBatch runs one batch the engine chose, in one write
// transaction fenced on the operation lease and cursor: it takes the next
// jobs past the cursor that match the selector, entered their state at or
// before the cutoff, and are not superseded unless the selector includes
// them; applies the spec to them set-wise, with their events and counter
// deltas; and records the progress. A batch looks at most Window jobs in
// id order.
//
// The fence is the lease's truth: a batch of the holder whose lease has
// run out is still accepted while nobody else took the operation. An
// operation that was cancelled (or ended) is returned as it is, without an
// error, so its runner stops on the status.
func (s *Store) OperationProcessBatch(ctx context.Context, p *backend.OperationProcessBatchParams) (*backend.OperationBatchResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.OperationBatch
	}
	window := max(p.Window, limit)
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	if p.Spec.To == "" || len(p.Spec.From) == 0 || len(p.Selector.States) == 0 {
		return nil, fmt.Errorf("operation %s: %w: a batch needs a spec and a selector narrowed to its states", p.ID, sluicetype.ErrInvalid)
	}
	st, err := s.stmts(ctx, sqlOperationGet, sqlOperationProgress, sqlOperationWindowEnd, sqlOperationEvents,
		sqlBulkByRowid(p.Spec), sqlAnyQuarantined)
	if err != nil {
		return nil, err
	}
	var out *backend.OperationBatchResult
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		out = nil
		r, err := scanOperation(tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: operation %s: %w", p.ID, err)
		}
		op := r.op
		switch {
		case op.Status == sluicetype.OperationCancelled || op.Status == sluicetype.OperationCompleted || op.Status == sluicetype.OperationFailed ||
			op.Status == sluicetype.OperationHalted:
			// Over: the runner stops on the status.
			out = &backend.OperationBatchResult{Operation: op, Cursor: r.cursor}
			return nil
		case op.Status != sluicetype.OperationRunning || r.holder != p.Holder || r.fence != p.Fence || r.cursor != p.After:
			return fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		b := batch{s: s, ctx: ctx, tx: tx, p: p, now: now, limit: limit, window: window,
			events: st[3], set: st[4], anyQuarantined: st[5]}
		if err := b.run(st[2]); err != nil {
			return fmt.Errorf("operation %s: %w", p.ID, err)
		}
		if p.Recent > 0 && len(b.changed) > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE operations SET canary_recent = ?2 WHERE id = ?1`,
				p.ID, backend.AppendRecent(r.recent, b.changed, p.Recent)); err != nil {
				return fmt.Errorf("sqlite: operation %s: canary window: %w", p.ID, err)
			}
		}
		r, err = scanOperation(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, p.ID,
			b.succeeded+int64(len(b.refused)), b.succeeded, len(b.refused), b.cursor, now.Add(ttl).UnixNano()))
		if err != nil {
			return fmt.Errorf("sqlite: operation %s: progress: %w", p.ID, err)
		}
		out = &backend.OperationBatchResult{Operation: r.op, Cursor: b.cursor, Exhausted: b.done, Refused: b.refused}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OperationFinish sets a running operation's status and error, fenced on
// its lease.
func (s *Store) OperationFinish(ctx context.Context, p *backend.OperationFinishParams) (*sluicetype.Operation, error) {
	st, err := s.stmts(ctx, sqlOperationFinish)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.Operation
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		var finished any
		if p.Status != sluicetype.OperationRunning && p.Status != sluicetype.OperationPending {
			finished = now.UnixNano()
		}
		r, err := scanOperation(tx.StmtContext(ctx, st[0]).QueryRowContext(ctx, p.ID, string(p.Status), finished, p.Error, p.Holder, p.Fence))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("sqlite: operation %s: %w", p.ID, err)
		}
		out = r.op
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// batch is one OperationProcessBatch at work.
type batch struct {
	s      *Store
	ctx    context.Context
	tx     *wtx
	p      *backend.OperationProcessBatchParams
	now    time.Time
	limit  int
	window int
	events *sql.Stmt
	// set is sqlBulkByRowid of the spec.
	set *sql.Stmt
	// anyQuarantined is sqlAnyQuarantined.
	anyQuarantined *sql.Stmt

	// results
	cursor    string
	done      bool
	succeeded int64
	refused   []error
	// changed is the ids the batch changed, when p.Recent asks for them.
	changed []string
}

// sqlAnyUnique tells whether any job has a unique key (jobs_unique_key_all).
const sqlAnyUnique = `SELECT EXISTS(SELECT 1 FROM jobs WHERE unique_key <> '')`

// candidate is a job a batch found.
type candidate struct {
	rowid       int64
	id, queue   string
	fingerprint string
	state       sluicetype.State
	quarantined bool
	// uniqueKey is the job's key when the move may take it
	// (ActionSpec.MayTakeUniqueKey), holder the other job holding it.
	uniqueKey, holder string
}

// batchWhere is the condition of a batch's candidates: past cursor and up
// to end (when valid) in id order, in one of the selector's states, matching
// the rest of its filter, in that state since the cutoff or before, and not
// superseded unless the selector includes them. The state condition is
// written +state (no index may serve it) and without a partial index's
// term, so the planner keeps to the id order rather than reading and
// sorting every job of a state.
func batchWhere(p *backend.OperationProcessBatchParams, cursor string, end sql.NullString) (*where, error) {
	sel := &p.Selector
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
	w.add("state_changed_at <= ?", p.Cutoff.UnixNano())
	if !sel.IncludeSuperseded {
		w.add("superseded_by = ''")
	}
	return w, nil
}

// batchQuery builds a batch's query for its candidates, walked by the
// primary key in id order from cursor to end (when valid).
func batchQuery(p *backend.OperationProcessBatchParams, cursor string, end sql.NullString, limit int) (string, []any, error) {
	w, err := batchWhere(p, cursor, end)
	if err != nil {
		return "", nil, err
	}
	quarantined := "0"
	if p.Spec.Refuses(backend.RefuseQuarantined) {
		quarantined = "fingerprint IN (SELECT fingerprint FROM fingerprints WHERE status = 'quarantined')"
	}
	// A job whose move would take its unique key comes with the job
	// holding it, if any.
	unique := "'', ''"
	if bit := sluicetype.UniqueStateBit(p.Spec.To); p.Spec.MayTakeUniqueKey() && bit != 0 {
		unique = fmt.Sprintf(`CASE WHEN unique_key <> '' AND (unique_states & %d) <> 0 THEN unique_key ELSE '' END,
			CASE WHEN unique_key <> '' AND (unique_states & %d) <> 0 THEN COALESCE((SELECT h.id FROM jobs h
			WHERE h.unique_key = jobs.unique_key AND h.id <> jobs.id AND %s LIMIT 1), '') ELSE '' END`, bit, bit, uniqueHoldsSQL("h"))
	}
	q := "SELECT rowid, id, queue, state, fingerprint, " + quarantined + ", " + unique + " FROM jobs WHERE " + w.sql() + " ORDER BY id LIMIT ?"
	return q, append(w.args, limit), nil
}

// batchGroupsQuery builds the query of a batch taken by its id range: its
// candidates (batchQuery's, without the quarantine test) counted by queue
// and state, with the last id of each group.
func batchGroupsQuery(p *backend.OperationProcessBatchParams, cursor string, end sql.NullString, limit int) (string, []any, error) {
	w, err := batchWhere(p, cursor, end)
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
func byRange(sel *sluicetype.Filter) bool {
	return len(sel.IDs) == 0 && len(sel.Tags) == 0 && sel.Error == "" && len(sel.Payload) == 0 && len(sel.Meta) == 0
}

func (b *batch) run(windowEnd *sql.Stmt) error {
	p := b.p
	b.cursor = p.After
	// The window: at most b.window jobs past the cursor.
	var end sql.NullString
	err := b.tx.StmtContext(b.ctx, windowEnd).QueryRowContext(b.ctx, p.After, b.window-1).Scan(&end)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: window: %w", err)
	}
	if byRange(&p.Selector) {
		quarantine := false
		if p.Spec.Refuses(backend.RefuseQuarantined) {
			// The refusal is job by job: that takes the list.
			if err := b.tx.StmtContext(b.ctx, b.anyQuarantined).QueryRowContext(b.ctx).Scan(&quarantine); err != nil {
				return fmt.Errorf("sqlite: quarantine: %w", err)
			}
		}
		unique := false
		if p.Spec.MayTakeUniqueKey() {
			// A move that may take unique keys is refused job by job too.
			if err := b.tx.QueryRowContext(b.ctx, sqlAnyUnique).Scan(&unique); err != nil {
				return fmt.Errorf("sqlite: unique keys: %w", err)
			}
		}
		// A canary's window needs the ids changed: the range takes none.
		if !quarantine && !unique && p.Recent <= 0 {
			return b.runRange(end)
		}
	}

	q, args, err := batchQuery(p, p.After, end, b.limit)
	if err != nil {
		return err
	}
	rows, err := b.tx.QueryContext(b.ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlite: select jobs: %w", err)
	}
	var found []candidate
	for rows.Next() {
		var c candidate
		var state string
		if err := rows.Scan(&c.rowid, &c.id, &c.queue, &state, &c.fingerprint, &c.quarantined, &c.uniqueKey, &c.holder); err != nil {
			rows.Close()
			return fmt.Errorf("sqlite: select jobs: %w", err)
		}
		c.state = sluicetype.State(state)
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
	var taken map[string]string // unique key -> the job of this batch taking it
	for _, c := range found {
		if c.quarantined {
			b.refused = append(b.refused, &sluicetype.QuarantinedError{Verb: string(p.Spec.Action), ID: c.id, Fingerprint: c.fingerprint})
			continue
		}
		if c.uniqueKey != "" {
			if c.holder == "" {
				c.holder = taken[c.uniqueKey]
			}
			if c.holder != "" {
				b.refused = append(b.refused, &sluicetype.UniqueHeldError{Verb: string(p.Spec.Action), ID: c.id, Key: c.uniqueKey, HolderID: c.holder})
				continue
			}
			if taken == nil {
				taken = map[string]string{}
			}
			taken[c.uniqueKey] = c.id
		}
		if n > 0 {
			rowids = append(rowids, ',')
		}
		n++
		rowids = strconv.AppendInt(rowids, c.rowid, 10)
		counts.move(c.queue, c.state, p.Spec.To, 1)
		if p.Recent > 0 {
			b.changed = append(b.changed, c.id)
		}
	}
	rowids = append(rowids, ']')
	if n == 0 {
		return nil
	}
	nowNs := b.now.UnixNano()
	if p.Spec.Event != "" {
		if _, err := b.tx.StmtContext(b.ctx, b.events).ExecContext(b.ctx, string(p.Event.Kind), nowNs, p.Event.Actor,
			string(p.Event.To), p.Event.Message, string(rowids)); err != nil {
			return fmt.Errorf("sqlite: %s jobs: events: %w", p.Spec.Action, err)
		}
	}
	res, err := b.tx.StmtContext(b.ctx, b.set).ExecContext(b.ctx, nowNs, nil, string(rowids))
	if err != nil {
		return fmt.Errorf("sqlite: %s jobs: %w", p.Spec.Action, err)
	}
	if m, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlite: %s jobs: %w", p.Spec.Action, err)
	} else if m != int64(n) {
		return fmt.Errorf("sqlite: %s jobs: %d rows changed, %d expected", p.Spec.Action, m, n)
	}
	b.succeeded += int64(n)
	return b.s.applyCounts(b.ctx, b.tx, counts)
}

// runRange runs a batch taken by its id range (see byRange). Its
// candidates are counted by queue and state; they are then exactly the
// jobs past the cursor, up to the last id counted, that meet the batch's
// condition, which the events and the change select again in the same
// transaction.
func (b *batch) runRange(end sql.NullString) error {
	p := b.p
	q, args, err := batchGroupsQuery(p, p.After, end, b.limit)
	if err != nil {
		return err
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
		counts.move(queue, sluicetype.State(state), p.Spec.To, c)
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

	w, err := batchWhere(p, p.After, sql.NullString{String: last, Valid: true})
	if err != nil {
		return err
	}
	nowNs := b.now.UnixNano()
	verb := p.Spec.Action
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
	if p.Spec.Event != "" {
		if err := exec("events: ", `INSERT OR FAIL INTO job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
			SELECT id, ?, ?, ?, state, ?, attempt, ? FROM jobs WHERE `+w.sql(),
			slices.Concat([]any{string(p.Event.Kind), nowNs, p.Event.Actor, string(p.Event.To), p.Event.Message}, w.args)...); err != nil {
			return err
		}
	}
	if p.Spec.Has(backend.EffectDelete) {
		err = exec("", `DELETE FROM jobs WHERE `+w.sql(), w.args...)
	} else {
		err = exec("", `UPDATE OR FAIL jobs SET `+specSet(p.Spec)+` WHERE `+w.sql(), slices.Concat(setArgs(p.Spec, nowNs, nil), w.args)...)
	}
	if err != nil {
		return err
	}
	b.succeeded += n
	return b.s.applyCounts(b.ctx, b.tx, counts)
}
