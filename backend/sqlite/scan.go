package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/jsonw"
	"github.com/sluicehq/sluice/sluicetype"
)

// jobColumns are the columns of a job row, in the order scanJob reads them.
// jobColumnsNoPayload reads NULL in place of the payload.
const (
	jobColumnsRest = `schema_version, metadata, tags, priority, state, attempt, max_attempts, crash_attempt,
	fingerprint, fence, scheduled_at, deadline, timeout_ns, created_at, attempted_at, attempted_by,
	state_changed_at, finalized_at, terminal_reason, lease_id, lease_worker, lease_expires_at, errors,
	version, checkpoint, dead_letter_of, retry_of, superseded_by, unique_key`
	jobColumns          = `id, queue, kind, payload, ` + jobColumnsRest
	jobColumnsNoPayload = `id, queue, kind, NULL, ` + jobColumnsRest
	numJobColumns       = 33
)

// jobColumnsList are a listed row's columns: no payload (NULL) and, in
// the checkpoint's place, a scheduled job's wait summary (JobListPage moves it
// to Job.Wait): the wait object without its children's ids, their count
// as total. SQLite parses the checkpoint text of the page's scheduled
// rows only, once for both calls (its JSON cache), and a page of parents
// does not carry every child id. Its errors are cut to the latest by the
// scanner.
var jobColumnsList = strings.Replace(jobColumnsNoPayload, "checkpoint,", sqlWaitSummary+",", 1)

// sqlWaitSummary is the wait summary of a listed row (sluicetype.WaitSummary),
// NULL for a job that is not scheduled or waits for nothing, and for a
// checkpoint SQLite's JSON functions cannot read (nested past their 1000
// levels), which would otherwise fail the whole page.
const sqlWaitSummary = `CASE WHEN state = 'scheduled' THEN CASE WHEN json_valid(checkpoint) THEN
		json_set(json_remove(json_extract(checkpoint, '$.wait'), '$.children'),
		'$.total', json_array_length(checkpoint, '$.wait.children')) END END`

// claimedColumns are what a claim returns: the columns the claim did not
// just set itself (queue, state, lease, attempted_at/by, state_changed_at)
// and that an available job cannot have (finalized_at, terminal_reason).
// Fewer columns make a batch of claimed rows cheaper to read.
const claimedColumns = `id, kind, payload, schema_version, metadata, tags, priority, attempt, max_attempts,
	crash_attempt, fingerprint, fence, scheduled_at, deadline, timeout_ns, created_at, errors, version,
	checkpoint, dead_letter_of, retry_of, superseded_by`

const numClaimedColumns = 22

// claimedJob builds the jobs of one claim from claimedColumns and what the
// claim set.
type claimedJob struct {
	queue, lease, worker string
	now, expires         time.Time
}

func (c *claimedJob) query(ctx context.Context, st *sql.Stmt, args []any) ([]*sluicetype.Job, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var v [numClaimedColumns]any
	dest := make([]any, numClaimedColumns)
	for i := range v {
		dest[i] = &v[i]
	}
	var out []*sluicetype.Job
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		at := c.now
		j := &sluicetype.Job{
			ID:             asString(v[0]),
			Queue:          c.queue,
			Kind:           asString(v[1]),
			Payload:        asRaw(v[2]),
			SchemaVersion:  int(asInt(v[3])),
			Metadata:       asRaw(v[4]),
			Priority:       int(asInt(v[6])),
			State:          sluicetype.StateRunning,
			Attempt:        int(asInt(v[7])),
			MaxAttempts:    int(asInt(v[8])),
			CrashAttempt:   int(asInt(v[9])),
			Fingerprint:    asString(v[10]),
			Fence:          asInt(v[11]),
			ScheduledAt:    fromNanos(asInt(v[12])),
			Deadline:       asTimePtr(v[13]),
			Timeout:        time.Duration(asInt(v[14])),
			CreatedAt:      fromNanos(asInt(v[15])),
			AttemptedAt:    &at,
			AttemptedBy:    c.worker,
			StateChangedAt: c.now,
			Version:        asInt(v[17]),
			Checkpoint:     asRaw(v[18]),
			DeadLetterOf:   asString(v[19]),
			RetryOf:        asString(v[20]),
			SupersededBy:   asString(v[21]),
		}
		j.Lease = &sluicetype.Lease{ID: c.lease, WorkerID: c.worker, Fence: j.Fence, ExpiresAt: c.expires}
		if err := decodeLists(j, asString(v[5]), asString(v[16]), false); err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// decodeLists decodes the tags and errors columns; the latest error only
// when lastErrorOnly.
func decodeLists(j *sluicetype.Job, tags, errs string, lastErrorOnly bool) error {
	var err error
	if tags != "" && tags != "[]" {
		if j.Tags, err = decodeTags(tags); err != nil {
			return fmt.Errorf("sqlite: job %s: tags: %w", j.ID, err)
		}
	}
	if errs != "" && errs != "[]" {
		decode := decodeAttemptErrors
		if lastErrorOnly {
			decode = decodeLastAttemptError
		}
		if j.Errors, err = decode(errs); err != nil {
			return fmt.Errorf("sqlite: job %s: errors: %w", j.ID, err)
		}
	}
	return nil
}

type scanner interface {
	Scan(dest ...any) error
}

// scanJob reads one row of jobColumns (plus extra trailing columns into
// extra).
func scanJob(sc scanner, extra ...any) (*sluicetype.Job, error) {
	return newJobScanner(extra...).scan(sc)
}

// jobScanner reads rows of jobColumns into jobs, reusing its scan
// destinations from row to row.
type jobScanner struct {
	v    [numJobColumns]any
	dest []any
	// lastErrorOnly keeps only the latest error of each job (list rows).
	lastErrorOnly bool
}

func newJobScanner(extra ...any) *jobScanner {
	js := &jobScanner{dest: make([]any, numJobColumns, numJobColumns+len(extra))}
	for i := range js.v {
		js.dest[i] = &js.v[i]
	}
	js.dest = append(js.dest, extra...)
	return js
}

func (js *jobScanner) scan(sc scanner) (*sluicetype.Job, error) {
	v := &js.v
	if err := sc.Scan(js.dest...); err != nil {
		return nil, err
	}
	j := &sluicetype.Job{
		ID:             asString(v[0]),
		Queue:          asString(v[1]),
		Kind:           asString(v[2]),
		Payload:        asRaw(v[3]),
		SchemaVersion:  int(asInt(v[4])),
		Metadata:       asRaw(v[5]),
		Priority:       int(asInt(v[7])),
		State:          sluicetype.State(asString(v[8])),
		Attempt:        int(asInt(v[9])),
		MaxAttempts:    int(asInt(v[10])),
		CrashAttempt:   int(asInt(v[11])),
		Fingerprint:    asString(v[12]),
		Fence:          asInt(v[13]),
		ScheduledAt:    fromNanos(asInt(v[14])),
		Deadline:       asTimePtr(v[15]),
		Timeout:        time.Duration(asInt(v[16])),
		CreatedAt:      fromNanos(asInt(v[17])),
		AttemptedAt:    asTimePtr(v[18]),
		AttemptedBy:    asString(v[19]),
		StateChangedAt: fromNanos(asInt(v[20])),
		FinalizedAt:    asTimePtr(v[21]),
		TerminalReason: sluicetype.TerminalReason(asString(v[22])),
		Version:        asInt(v[27]),
		Checkpoint:     asRaw(v[28]),
		DeadLetterOf:   asString(v[29]),
		RetryOf:        asString(v[30]),
		SupersededBy:   asString(v[31]),
		UniqueKey:      asString(v[32]),
	}
	if err := decodeLists(j, asString(v[6]), asString(v[26]), js.lastErrorOnly); err != nil {
		return nil, err
	}
	if v[23] != nil {
		j.Lease = &sluicetype.Lease{
			ID:        asString(v[23]),
			WorkerID:  asString(v[24]),
			Fence:     j.Fence,
			ExpiresAt: fromNanos(asInt(v[25])),
		}
	}
	return j, nil
}

func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

func asRaw(v any) json.RawMessage {
	switch x := v.(type) {
	case string:
		return json.RawMessage(x)
	case []byte:
		return json.RawMessage(x) // database/sql copies into *any
	}
	return nil
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

func asTimePtr(v any) *time.Time {
	if v == nil {
		return nil
	}
	t := fromNanos(asInt(v))
	return &t
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// nanosPtr is a nullable time column's value.
func nanosPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// textOrNull stores a JSON value as TEXT, or NULL when empty.
func textOrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte { return jsonw.AppendString(b, s) }

// jsonStrings encodes a list of strings as a JSON array.
func jsonStrings(ss []string) string {
	if len(ss) == 0 {
		return "[]"
	}
	b := make([]byte, 0, 2+len(ss)*40)
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return string(append(b, ']'))
}
