package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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

func scanOperation(row pgx.Row) (*opRow, error) {
	var r opRow
	var op sluicetype.Operation
	var action, selector, status string
	var created int64
	var started, finished, startAt *int64
	var rate int32
	var canary string
	if err := row.Scan(&op.ID, &action, &selector, &status, &op.CreatedBy, &created, &started, &finished,
		&op.Matched, &op.Processed, &op.Succeeded, &op.Failed, &op.Error, &rate,
		&r.cursor, &r.holder, &r.fence, &r.expires, &startAt, &canary, &r.recent); err != nil {
		return nil, err
	}
	c, err := backend.DecodeCanary(canary, r.recent)
	if err != nil {
		return nil, fmt.Errorf("operation %s: %w", op.ID, err)
	}
	op.Canary = c
	op.Rate = int(rate)
	op.Action, op.Status, op.CreatedAt = sluicetype.Action(action), sluicetype.OperationStatus(status), fromNanos(created)
	op.StartedAt, op.FinishedAt, op.StartAt = timePtr(started), timePtr(finished), timePtr(startAt)
	if err := json.Unmarshal([]byte(selector), &op.Selector); err != nil {
		return nil, fmt.Errorf("operation %s: selector: %w", op.ID, err)
	}
	r.op = &op
	return &r, nil
}

const (
	sqlOperationInsert = `INSERT INTO {s}.operations (id, action, selector, status, created_by, created_at, matched, rate, start_at,
		canary, canary_recent)
	VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7, $8, $9, $10)
	ON CONFLICT (id) DO NOTHING
	RETURNING ` + operationColumns
	sqlOperationGet = `SELECT ` + operationColumns + ` FROM {s}.operations WHERE id = $1`
	// $1 id, $2 now, $3 message.
	sqlOperationCancel = `UPDATE {s}.operations SET status = 'cancelled', finished_at = $2, error = $3,
		lease_holder = '', lease_expires_at = 0
	WHERE id = $1 AND status IN ('pending', 'running', 'halted')
	RETURNING ` + operationColumns
	// $1 now. A scheduled operation waits for its start time.
	sqlOperationNext = `SELECT id FROM {s}.operations
	WHERE status IN ('pending', 'running') AND (lease_holder = '' OR lease_expires_at <= $1)
		AND (start_at IS NULL OR start_at <= $1)
	ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`
	// $1 id, $2 holder, $3 now, $4 lease expiry.
	sqlOperationLease = `UPDATE {s}.operations SET lease_holder = $2, lease_fence = lease_fence + 1,
		lease_expires_at = $4, status = 'running', started_at = coalesce(started_at, $3)
	WHERE id = $1
	RETURNING ` + operationColumns
	// $1 id, $2 processed, $3 succeeded, $4 failed, $5 cursor, $6 lease expiry.
	sqlOperationProgress = `UPDATE {s}.operations SET processed = processed + $2, succeeded = succeeded + $3,
		failed = failed + $4, cursor_id = $5, lease_expires_at = $6
	WHERE id = $1
	RETURNING ` + operationColumns
	// $1 id, $2 status, $3 finished_at or NULL (kept), $4 error ('' kept),
	// $5 holder, $6 fence.
	sqlOperationFinish = `UPDATE {s}.operations SET status = $2, finished_at = coalesce($3, finished_at),
		error = CASE WHEN $4 = '' THEN error ELSE $4 END
	WHERE id = $1 AND status = 'running' AND lease_holder = $5 AND lease_fence = $6
	RETURNING ` + operationColumns
	// $1 cursor, $2 offset: the last id of the batch's window, or none
	// when fewer jobs are left.
	sqlOperationWindowEnd = `SELECT id FROM {s}.jobs WHERE id > $1 ORDER BY id LIMIT 1 OFFSET $2`
)

// defaultOperationLease is an operation lease's length when the caller
// gives none.
const defaultOperationLease = 30_000_000_000 // 30s in ns

// OperationInsert persists a new pending operation created now.
func (s *Store) OperationInsert(ctx context.Context, p *backend.OperationInsertParams) (*sluicetype.Operation, error) {
	sel, err := json.Marshal(p.Selector)
	if err != nil {
		return nil, fmt.Errorf("postgres: operation %s: selector: %w", p.ID, err)
	}
	canary, err := backend.EncodeCanary(p.Canary)
	if err != nil {
		return nil, fmt.Errorf("postgres: operation %s: %w", p.ID, err)
	}
	var startAt *int64
	if p.StartAt != nil {
		n := p.StartAt.UnixNano()
		startAt = &n
	}
	var out *sluicetype.Operation
	err = s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // an operation's own record: no job moves
		r, err := scanOperation(tx.QueryRow(ctx, tx.q(sqlOperationInsert), p.ID, string(p.Action), string(sel),
			p.CreatedBy, tx.nowNs, p.Matched, p.Rate, startAt, canary, backend.EncodeRecent(p.Canary)))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("insert operation %s: %w: the id exists", p.ID, sluicetype.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("postgres: insert operation %s: %w", p.ID, err)
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
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	r, err := scanOperation(s.pool.QueryRow(ctx, s.sql(sqlOperationGet), p.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: operation %s: %w", p.ID, err)
	}
	return r.op, nil
}

// OperationList pages operations newest first by (created_at, id).
func (s *Store) OperationList(ctx context.Context, p *backend.OperationListParams) ([]*sluicetype.Operation, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.DefaultListLimit
	}
	q := `SELECT ` + operationColumns + ` FROM {s}.operations ORDER BY created_at DESC, id DESC LIMIT $1`
	a := []any{limit}
	if p.After != nil {
		q = `SELECT ` + operationColumns + ` FROM {s}.operations WHERE (created_at, id) < ($2, $3::text)
			ORDER BY created_at DESC, id DESC LIMIT $1`
		a = append(a, p.After.At.UnixNano(), p.After.ID)
	}
	rows, err := s.pool.Query(ctx, s.sql(q), a...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list operations: %w", err)
	}
	defer rows.Close()
	var out []*sluicetype.Operation
	for rows.Next() {
		r, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list operations: %w", err)
		}
		out = append(out, r.op)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list operations: %w", err)
	}
	return out, nil
}

// OperationCancel marks a pending or running operation cancelled; its
// runner stops at its next batch, whose write is refused.
func (s *Store) OperationCancel(ctx context.Context, p *backend.OperationCancelParams) (*sluicetype.Operation, error) {
	return s.operationMove(ctx, "cancel", p.ID, func(tx *wtx) pgx.Row {
		return tx.QueryRow(ctx, tx.q(sqlOperationCancel), p.ID, tx.nowNs, p.Message)
	})
}

// operationMove runs an operator's change of operation id (verb: cancel,
// resume) as move, one UPDATE … RETURNING that takes the operation only
// from the statuses it may leave; when it takes none, the operation is
// read to say why: not found, or the status it is in.
func (s *Store) operationMove(ctx context.Context, verb, id string, move func(tx *wtx) pgx.Row) (*sluicetype.Operation, error) {
	var out *sluicetype.Operation
	err := s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // an operation's own record: no job moves
		r, err := scanOperation(move(tx))
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err := scanOperation(tx.QueryRow(ctx, tx.q(sqlOperationGet), id))
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%s operation %s: %w", verb, id, sluicetype.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("postgres: %s operation %s: %w", verb, id, err)
			}
			return fmt.Errorf("%s operation %s: %w: it is %s", verb, id, sluicetype.ErrWrongState, cur.op.Status)
		}
		if err != nil {
			return fmt.Errorf("postgres: %s operation %s: %w", verb, id, err)
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

// OperationClaim leases the oldest pending or running operation whose
// lease is free or expired, and whose start time has come, to p.Holder
// (fence +1); nil when there is none.
func (s *Store) OperationClaim(ctx context.Context, p *backend.OperationClaimParams) (*backend.OperationLease, error) {
	ttl := int64(p.TTL)
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	var out *backend.OperationLease
	err := s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // an operation's own record: no job moves
		out = nil
		var id string
		err := tx.QueryRow(ctx, tx.q(sqlOperationNext), tx.nowNs).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("postgres: claim operation: %w", err)
		}
		r, err := scanOperation(tx.QueryRow(ctx, tx.q(sqlOperationLease), id, p.Holder, tx.nowNs, tx.nowNs+ttl))
		if err != nil {
			return fmt.Errorf("postgres: claim operation %s: %w", id, err)
		}
		out = &backend.OperationLease{Operation: r.op, Holder: r.holder, Fence: r.fence, Cursor: r.cursor}
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
	var out *sluicetype.Operation
	err := s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true // an operation's own record: no job moves
		var finished *int64
		if p.Status != sluicetype.OperationRunning && p.Status != sluicetype.OperationPending {
			finished = &tx.nowNs
		}
		r, err := scanOperation(tx.QueryRow(ctx, tx.q(sqlOperationFinish), p.ID, string(p.Status), finished, p.Error, p.Holder, p.Fence))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("postgres: operation %s: %w", p.ID, err)
		}
		out = r.op
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OperationProcessBatch runs one batch the engine chose, in one
// transaction fenced on the operation lease (the operation's row is
// locked first, so batches of one operation never overlap) and on its
// cursor: it locks the next jobs past the cursor that match the selector,
// entered their state at or before the cutoff and are not superseded
// unless the selector includes them (FOR UPDATE re-checks the condition
// on each row's latest version), applies the spec to them with their
// events and counter deltas, and records the progress. A batch looks at
// most Window jobs in id order. A selector of one state needs no lock:
// the change itself tests the condition again (changeUnlocked).
func (s *Store) OperationProcessBatch(ctx context.Context, p *backend.OperationProcessBatchParams) (*backend.OperationBatchResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.OperationBatch
	}
	window := max(p.Window, limit)
	ttl := int64(p.TTL)
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	if p.Spec.To == "" || len(p.Spec.From) == 0 || len(p.Selector.States) == 0 {
		return nil, fmt.Errorf("operation %s: %w: a batch needs a spec and a selector narrowed to its states", p.ID, sluicetype.ErrInvalid)
	}
	var out *backend.OperationBatchResult
	err := s.writeTx(ctx, func(tx *wtx) error {
		out = nil
		r, err := scanOperation(tx.QueryRow(ctx, tx.q(sqlOperationGet+` FOR UPDATE`), p.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("postgres: operation %s: %w", p.ID, err)
		}
		op := r.op
		switch {
		case op.Status == sluicetype.OperationCancelled || op.Status == sluicetype.OperationCompleted || op.Status == sluicetype.OperationFailed ||
			op.Status == sluicetype.OperationHalted:
			out = &backend.OperationBatchResult{Operation: op, Cursor: r.cursor}
			return nil
		case op.Status != sluicetype.OperationRunning || r.holder != p.Holder || r.fence != p.Fence || r.cursor != p.After:
			return fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		// A canary's window needs the ids changed, which the locked
		// change knows (the unlocked one may skip some).
		b := batch{s: s, tx: tx, p: p, limit: limit, window: window,
			unlocked: len(p.Selector.States) == 1 && !p.Spec.Has(backend.EffectDelete) && p.Recent <= 0}
		if err := b.run(ctx); err != nil {
			return fmt.Errorf("operation %s: %w", p.ID, err)
		}
		if p.Recent > 0 && len(b.changed) > 0 {
			if _, err := tx.Exec(ctx, tx.q(`UPDATE {s}.operations SET canary_recent = $2 WHERE id = $1`),
				p.ID, backend.AppendRecent(r.recent, b.changed, p.Recent)); err != nil {
				return fmt.Errorf("postgres: operation %s: canary window: %w", p.ID, err)
			}
		}
		r, err = scanOperation(tx.QueryRow(ctx, tx.q(sqlOperationProgress), p.ID,
			b.succeeded+int64(len(b.refused)), b.succeeded, len(b.refused), b.cursor, tx.nowNs+ttl))
		if err != nil {
			return fmt.Errorf("postgres: operation %s: progress: %w", p.ID, err)
		}
		out = &backend.OperationBatchResult{Operation: r.op, Cursor: b.cursor, Exhausted: b.done, Refused: b.refused}
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
	tx     *wtx
	p      *backend.OperationProcessBatchParams
	limit  int
	window int

	// unlocked: the batch's jobs are chosen without locking them and its
	// UPDATE tests the selection again on each row (changeUnlocked); set when
	// the selector names one state and the spec changes rows.
	unlocked bool

	cursor    string
	done      bool
	succeeded int64
	refused   []error
	// changed is the ids the batch changed, when p.Recent asks for them.
	changed []string
}

func (b *batch) run(ctx context.Context) error {
	p := b.p
	b.cursor = p.After
	// First the narrowest window that can fill the batch (the next limit
	// ids): a selector whose jobs lie together, as a state's do after a
	// mass death, is served without reading the whole window's ids, ten
	// times as many. Only when it does not fill is the whole window read.
	found, end, err := b.pick(ctx, b.limit)
	if err == nil && len(found) < b.limit && end != nil && b.window > b.limit {
		found, end, err = b.pick(ctx, b.window)
	}
	if err != nil {
		return err
	}
	return b.apply(ctx, found, end)
}

// candidate is a job a batch chose, locked.
type candidate struct {
	id, queue, state, fingerprint string
	quarantined                   bool
	// uniqueKey is the job's key when the move may take it
	// (ActionSpec.MayTakeUniqueKey), holder the other job holding it.
	uniqueKey, holder string
}

// pick locks the jobs the batch takes among the next window ids past its
// cursor and returns them with the window's last id (nil: the window
// reaches the end of the jobs).
func (b *batch) pick(ctx context.Context, window int) ([]candidate, *string, error) {
	p, tx := b.p, b.tx
	var end *string
	err := tx.QueryRow(ctx, tx.q(sqlOperationWindowEnd), p.After, window-1).Scan(&end)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("postgres: window: %w", err)
	}
	q, a, err := b.pickQuery(end)
	if err != nil {
		return nil, nil, err
	}
	rows, err := tx.Query(ctx, q, a...)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: select jobs: %w", err)
	}
	var found []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.queue, &c.state, &c.fingerprint, &c.quarantined, &c.uniqueKey); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("postgres: select jobs: %w", err)
		}
		found = append(found, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("postgres: select jobs: %w", err)
	}
	return found, end, nil
}

// pickQuery is pick's statement: the jobs of the window (ids past the
// cursor up to end, or to the last job when end is nil) that the
// selector, the cutoff and the superseded rule take, in id order, locked.
//
// Only the id range may lead the plan: it bounds the rows read to the
// window's. Every other term is one opaque condition (… IS TRUE, which no
// index serves), tested on each row of the range. Given them as index
// conditions, the planner — with no statistics on the table (autovacuum
// off, or a mass death it has not analyzed yet) or in a generic plan,
// where state = 'archived' AND queue = $n looks like a handful of rows —
// took jobs_error_groups or jobs_state_changed, read every job of the
// state on each batch and sorted them by id: each batch cost the whole
// state's size (110 ms a batch at 100,000 dead jobs, 1 s at a million).
func (b *batch) pickQuery(end *string) (string, []any, error) {
	p, tx := b.p, b.tx
	rng := b.s.newWhere(nil)
	rng.add("id > " + rng.a.add(p.After) + "::text")
	if end != nil {
		rng.add("id <= " + rng.a.add(*end) + "::text")
	} else {
		// The last window, bounded all the same by the last id (the
		// same rows: the statement's snapshot has no later one): a
		// range bounded on both sides gets the planner's small default
		// selectivity, and keeps it on the primary key when no ANALYZE
		// has seen the table. With one bound the index and a scan of
		// every job cost within a row's width of each other.
		rng.add(b.tx.q("id <= (SELECT max(id) FROM {s}.jobs)"))
	}
	chosen, err := b.selection(rng.a)
	if err != nil {
		return "", nil, err
	}
	rng.add(chosen)
	quarantined := "false"
	if p.Spec.Refuses(backend.RefuseQuarantined) {
		quarantined = tx.q("fingerprint IN (SELECT fingerprint FROM {s}.fingerprints WHERE status = 'quarantined')")
	}
	// A job whose move would take its unique key comes with the key
	// (apply reads the keys' holders). A subquery here for the holder
	// would turn the plan from the primary key's range to a scan.
	unique := "''"
	if bit := sluicetype.UniqueStateBit(p.Spec.To); p.Spec.MayTakeUniqueKey() && bit != 0 {
		unique = fmt.Sprintf(`CASE WHEN unique_key <> '' AND (unique_states & %d) <> 0 THEN unique_key ELSE '' END`, bit)
	}
	q := tx.q("SELECT id, queue, state, fingerprint, "+quarantined+", "+unique+" FROM {s}.jobs WHERE ") + rng.sql() +
		" ORDER BY id LIMIT " + rng.a.add(b.limit)
	if !b.unlocked {
		q += " FOR UPDATE"
	}
	return q, rng.a.vals, nil
}

// selection is the condition a job of the batch meets (the selector, the
// cutoff, the superseded rule), as one opaque term bound to a.
func (b *batch) selection(a *args) (string, error) {
	sel := &b.p.Selector
	w := b.s.newWhere(a)
	w.addStates(sel.States)
	if err := w.addFilter(sel); err != nil {
		return "", err
	}
	w.add("state_changed_at <= " + w.a.add(b.p.Cutoff.UnixNano()))
	if !sel.IncludeSuperseded {
		w.add("superseded_by = ''")
	}
	return "(" + w.sql() + ") IS TRUE", nil
}

// apply changes the jobs found, sets the cursor and counts.
func (b *batch) apply(ctx context.Context, found []candidate, end *string) error {
	p, tx := b.p, b.tx
	switch {
	case len(found) == b.limit:
		b.cursor = found[len(found)-1].id
	case end != nil:
		b.cursor = *end
	default:
		if len(found) > 0 {
			b.cursor = found[len(found)-1].id
		}
		b.done = true
	}
	holders, err := b.uniqueHolders(ctx, found)
	if err != nil {
		return err
	}
	var ids []string
	var taken []candidate
	var keys map[string]string // unique key -> the job of this batch taking it
	for _, c := range found {
		if h := holders[c.uniqueKey]; c.uniqueKey != "" && h != c.id {
			c.holder = h
		}
		if c.quarantined {
			b.refused = append(b.refused, &sluicetype.QuarantinedError{Verb: string(p.Spec.Action), ID: c.id, Fingerprint: c.fingerprint})
			continue
		}
		if c.uniqueKey != "" {
			if c.holder == "" {
				c.holder = keys[c.uniqueKey]
			}
			if c.holder != "" {
				b.refused = append(b.refused, &sluicetype.UniqueHeldError{Verb: string(p.Spec.Action), ID: c.id, Key: c.uniqueKey, HolderID: c.holder})
				continue
			}
			if keys == nil {
				keys = map[string]string{}
			}
			keys[c.uniqueKey] = c.id
		}
		ids = append(ids, c.id)
		taken = append(taken, c)
	}
	if len(ids) == 0 {
		return nil
	}
	counts := countDeltas{}
	wake := map[string]bool{}
	moved := func(queue string, from sluicetype.State, n int64) {
		counts.move(queue, from, p.Spec.To, n)
		b.succeeded += n
		if p.Spec.To == sluicetype.StateAvailable {
			wake[queue] = true
		}
	}
	if b.unlocked {
		if err := b.changeUnlocked(ctx, ids, moved); err != nil {
			return err
		}
	} else {
		change, a := b.lockedQuery(ids)
		tag, err := tx.Exec(ctx, change, a...)
		if err != nil {
			return fmt.Errorf("postgres: %s jobs: %w", p.Spec.Action, err)
		}
		if m := tag.RowsAffected(); m != int64(len(ids)) {
			return fmt.Errorf("postgres: %s jobs: %d rows changed, %d expected", p.Spec.Action, m, len(ids))
		}
		for _, c := range taken {
			moved(c.queue, sluicetype.State(c.state), 1)
		}
		if p.Recent > 0 {
			b.changed = append(b.changed, ids...)
		}
	}
	if err := b.s.applyCounts(ctx, tx, counts); err != nil {
		return err
	}
	return b.s.notifyQueues(ctx, tx, wake)
}

// sqlUniqueHoldersOf reads the holders of unique keys: key and id.
var sqlUniqueHoldersOf = `SELECT unique_key, id FROM {s}.jobs WHERE unique_key = ANY($1::text[]) AND ` + uniqueHoldsSQL("")

// uniqueHolders reads the holders of the keys the batch's jobs would take.
// One that takes a key from under a concurrent insert fails the batch on
// jobs_unique_key; the next batch, in a new transaction, names the holder.
func (b *batch) uniqueHolders(ctx context.Context, found []candidate) (map[string]string, error) {
	var keys []string
	for _, c := range found {
		if c.uniqueKey != "" && !c.quarantined {
			keys = append(keys, c.uniqueKey)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := b.tx.Query(ctx, b.tx.q(sqlUniqueHoldersOf), keys)
	if err != nil {
		return nil, fmt.Errorf("postgres: unique keys: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var key, id string
		if err := rows.Scan(&key, &id); err != nil {
			return nil, fmt.Errorf("postgres: unique keys: %w", err)
		}
		out[key] = id
	}
	return out, rows.Err()
}

// changeUnlocked changes the jobs of an unlocked batch: the UPDATE tests
// the selection again on each row, on its latest version when another
// transaction changed it since the pick (READ COMMITTED re-checks the
// WHERE of an UPDATE on a row it waited for), so a job that left the
// selection meanwhile is left as it is. The selector names one state,
// so every changed job came from it: the events and the counters follow
// the rows the UPDATE returns. Locking the rows first (SELECT … FOR
// UPDATE), as a batch of several states must to know each one's state,
// writes every row twice; without the lock a bulk retry's backend took
// 5–14% less CPU a job here (pg_backend_cpu_us_per_retried_job of
// scripts/bench deadletter).
//
// A job picked and then changed by someone else is skipped, counted
// neither succeeded nor failed: it is no longer the selector's.
func (b *batch) changeUnlocked(ctx context.Context, ids []string, moved func(queue string, from sluicetype.State, n int64)) error {
	p, tx := b.p, b.tx
	q, vals, err := b.unlockedQuery(ids)
	if err != nil {
		return err
	}
	rows, err := tx.Query(ctx, q, vals...)
	if err != nil {
		return fmt.Errorf("postgres: %s jobs: %w", p.Spec.Action, err)
	}
	defer rows.Close()
	for rows.Next() {
		var queue string
		var n int64
		if err := rows.Scan(&queue, &n); err != nil {
			return fmt.Errorf("postgres: %s jobs: %w", p.Spec.Action, err)
		}
		moved(queue, p.Selector.States[0], n)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: %s jobs: %w", p.Spec.Action, err)
	}
	return nil
}

// unlockedQuery is changeUnlocked's statement: the change of the jobs ids
// that still meet the selection, their events, and the changed jobs
// counted by queue.
func (b *batch) unlockedQuery(ids []string) (string, []any, error) {
	p, tx := b.p, b.tx
	from := p.Selector.States[0]
	a := &args{vals: setArgs(p.Spec, tx.nowNs, nil)}
	in := idsIn(a, ids)
	chosen, err := b.selection(a)
	if err != nil {
		return "", nil, err
	}
	q := `WITH up AS (UPDATE {s}.jobs SET ` + specSet(p.Spec) + ` WHERE ` + in + ` AND ` + chosen +
		` RETURNING id, queue, attempt)`
	if p.Spec.Event != "" {
		q += fmt.Sprintf(`, ev AS (INSERT INTO {s}.job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
			SELECT id, %s, %s, %s, %s, %s, attempt, %s FROM up ORDER BY id)`,
			a.add(string(p.Event.Kind)), a.add(tx.nowNs), a.add(p.Event.Actor), a.add(string(from)),
			a.add(string(p.Event.To)), a.add(p.Event.Message))
	}
	q += ` SELECT queue, count(*) FROM up GROUP BY queue`
	return tx.q(q), a.vals, nil
}

// lockedQuery is the change of a locked batch's jobs ids (in id order),
// with their events: one statement, whose parts share one snapshot, so
// the events read the jobs as they were before it.
//
// The id range of the batch goes with the ids in every statement by ids:
// with no statistics on the table (autovacuum off, a mass death not yet
// analyzed) the planner takes id = ANY of a thousand ids for nearly every
// row, and a custom or simple-protocol plan read the whole table; the
// range makes it a small part of the primary key (TestBulkPlansWithoutStats).
func (b *batch) lockedQuery(ids []string) (string, []any) {
	p, tx := b.p, b.tx
	a := &args{}
	if !p.Spec.Has(backend.EffectDelete) {
		a.vals = setArgs(p.Spec, tx.nowNs, nil)
	}
	in := idsIn(a, ids)
	var change string
	if p.Spec.Has(backend.EffectDelete) {
		change = `DELETE FROM {s}.jobs WHERE ` + in
	} else {
		change = `UPDATE {s}.jobs SET ` + specSet(p.Spec) + ` WHERE ` + in
	}
	if p.Spec.Event != "" {
		change = fmt.Sprintf(`WITH ev AS (INSERT INTO {s}.job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
			SELECT id, %s, %s, %s, state, %s, attempt, %s FROM {s}.jobs WHERE %s ORDER BY id) `,
			a.add(string(p.Event.Kind)), a.add(tx.nowNs), a.add(p.Event.Actor), a.add(string(p.Event.To)), a.add(p.Event.Message),
			in) + change
	}
	return tx.q(change), a.vals
}

// idsIn is the condition that id is one of ids (in id order), with their
// range (see lockedQuery), bound to a.
func idsIn(a *args, ids []string) string {
	return "id = ANY(" + a.add(ids) + "::text[]) AND id >= " + a.add(ids[0]) + "::text AND id <= " + a.add(ids[len(ids)-1]) + "::text"
}
