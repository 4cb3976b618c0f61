package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluicehq/sluice/sluicetype"
)

// The columns of a job row, in the order jobRow.dest reads them.
// jobColumnsNoPayload reads NULL for the payload; jobColumnsList reads no
// checkpoint either (its wait summary in its place) and only the latest
// error.
const (
	jobColumnsRest = `schema_version, metadata, tags, priority, state, attempt, max_attempts, crash_attempt,
	fingerprint, fence, scheduled_at, deadline, timeout_ns, created_at, attempted_at, attempted_by,
	state_changed_at, finalized_at, terminal_reason, lease_id, lease_worker, lease_expires_at, errors,
	version, checkpoint, dead_letter_of, retry_of, superseded_by, unique_key`
	jobColumns          = `id, queue, kind, payload, ` + jobColumnsRest
	jobColumnsNoPayload = `id, queue, kind, NULL::jsonb, ` + jobColumnsRest
	jobColumnsList      = `id, queue, kind, NULL::jsonb, schema_version, metadata, tags, priority, state, attempt, max_attempts, crash_attempt,
	fingerprint, fence, scheduled_at, deadline, timeout_ns, created_at, attempted_at, attempted_by,
	state_changed_at, finalized_at, terminal_reason, lease_id, lease_worker, lease_expires_at,
	CASE WHEN jsonb_array_length(errors) > 1 THEN jsonb_build_array(errors -> -1) ELSE errors END,
	version, ` + sqlWaitSummary + `, dead_letter_of, retry_of, superseded_by, unique_key`

	// sqlWaitSummary stands in a listed row for its checkpoint: a
	// scheduled job's wait without its children's ids, their count as
	// total (sluicetype.WaitSummary; JobListPage moves it to Job.Wait), NULL for
	// any other job. Only the page's scheduled rows read their checkpoint,
	// and a page of parents does not carry every child id.
	sqlWaitSummary = `CASE WHEN state = 'scheduled' THEN (checkpoint -> 'wait') - 'children' ||
		jsonb_build_object('total', jsonb_array_length(COALESCE(checkpoint -> 'wait' -> 'children', '[]'::jsonb))) END`
)

// jobColumnsOf prefixes the job columns with a table alias.
func jobColumnsOf(alias string) string {
	return alias + ".id, " + alias + ".queue, " + alias + ".kind, " + alias + ".payload, " +
		prefixAll(alias, jobColumnsRest)
}

func prefixAll(alias, cols string) string {
	var b bytes.Buffer
	for i, c := range bytes.Split([]byte(cols), []byte(",")) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(alias + "." + string(bytes.TrimSpace(c)))
	}
	return b.String()
}

// jobRow holds the scan destinations of one job row. Its nullable columns
// are pgtype values, not pointers: a pointer destination costs an
// allocation for each value that is not NULL, and a claimed job has four.
type jobRow struct {
	id, queue, kind                string
	payload, metadata              []byte
	schemaVersion                  int32
	tags                           []string
	priority                       int32
	state                          string
	attempt, maxAttempts, crash    int32
	fingerprint                    string
	fence                          int64
	scheduledAt                    int64
	deadline                       pgtype.Int8
	timeout, createdAt             int64
	attemptedAt                    pgtype.Int8
	attemptedBy                    string
	stateChangedAt                 int64
	finalizedAt                    pgtype.Int8
	reason                         string
	leaseID, leaseWorker           pgtype.Text
	leaseExpires                   pgtype.Int8
	errors                         []byte
	version                        int64
	checkpoint                     []byte
	deadLetterOf, retryOf, superBy string
	uniqueKey                      string
}

func (r *jobRow) dest() []any {
	return []any{&r.id, &r.queue, &r.kind, &r.payload, &r.schemaVersion, &r.metadata, &r.tags, &r.priority,
		&r.state, &r.attempt, &r.maxAttempts, &r.crash, &r.fingerprint, &r.fence, &r.scheduledAt, &r.deadline,
		&r.timeout, &r.createdAt, &r.attemptedAt, &r.attemptedBy, &r.stateChangedAt, &r.finalizedAt, &r.reason,
		&r.leaseID, &r.leaseWorker, &r.leaseExpires, &r.errors, &r.version, &r.checkpoint, &r.deadLetterOf,
		&r.retryOf, &r.superBy, &r.uniqueKey}
}

// compact returns jsonb's text form without its spaces ({"a": 1} as
// {"a":1}), a copy the row no longer shares.
func compact(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	var out bytes.Buffer
	out.Grow(len(b))
	if err := json.Compact(&out, b); err != nil {
		return append(json.RawMessage(nil), b...)
	}
	return out.Bytes()
}

func (r *jobRow) job() (*sluicetype.Job, error) {
	j := &sluicetype.Job{
		ID:             r.id,
		Queue:          r.queue,
		Kind:           r.kind,
		Payload:        compact(r.payload),
		SchemaVersion:  int(r.schemaVersion),
		Metadata:       compact(r.metadata),
		Priority:       int(r.priority),
		State:          sluicetype.State(r.state),
		Attempt:        int(r.attempt),
		MaxAttempts:    int(r.maxAttempts),
		CrashAttempt:   int(r.crash),
		Fingerprint:    r.fingerprint,
		Fence:          r.fence,
		ScheduledAt:    fromNanos(r.scheduledAt),
		Deadline:       timeOf(r.deadline),
		Timeout:        time.Duration(r.timeout),
		CreatedAt:      fromNanos(r.createdAt),
		AttemptedAt:    timeOf(r.attemptedAt),
		AttemptedBy:    r.attemptedBy,
		StateChangedAt: fromNanos(r.stateChangedAt),
		FinalizedAt:    timeOf(r.finalizedAt),
		TerminalReason: sluicetype.TerminalReason(r.reason),
		Version:        r.version,
		Checkpoint:     compact(r.checkpoint),
		DeadLetterOf:   r.deadLetterOf,
		RetryOf:        r.retryOf,
		SupersededBy:   r.superBy,
		UniqueKey:      r.uniqueKey,
	}
	if len(r.tags) > 0 {
		j.Tags = append([]string(nil), r.tags...)
	}
	if len(r.errors) > 2 { // not "[]"
		if err := json.Unmarshal(r.errors, &j.Errors); err != nil {
			return nil, fmt.Errorf("postgres: job %s: errors: %w", r.id, err)
		}
		if len(j.Errors) == 0 {
			j.Errors = nil
		}
	}
	if r.leaseID.Valid {
		j.Lease = &sluicetype.Lease{ID: r.leaseID.String, WorkerID: r.leaseWorker.String, Fence: j.Fence}
		if r.leaseExpires.Valid {
			j.Lease.ExpiresAt = fromNanos(r.leaseExpires.Int64)
		}
	}
	return j, nil
}

// timeOf is a nullable time column as the job has it.
func timeOf(n pgtype.Int8) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// scanJob reads one row of jobColumns (plus extra trailing columns).
func scanJob(row pgx.Row, extra ...any) (*sluicetype.Job, error) {
	var r jobRow
	if err := row.Scan(append(r.dest(), extra...)...); err != nil {
		return nil, err
	}
	return r.job()
}

// collectJobs reads every row of jobColumns.
func collectJobs(rows pgx.Rows, err error) ([]*sluicetype.Job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sluicetype.Job
	var r jobRow
	dest := r.dest()
	for rows.Next() {
		r = jobRow{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		j, err := r.job()
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func stateNames(states []sluicetype.State) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return out
}
