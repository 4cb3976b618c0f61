package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/jsonw"
)

// The job list's answer, GET /jobs, is written by appendJobPage rather than
// encoding/json: it is the busiest answer (a console, scripts and
// dashboards poll it), and reflection, a time.Time MarshalJSON call per
// timestamp and the compaction of each marshaller's output cost about ten
// times as much as appending the fields. The bytes are encoding/json's
// (with HTML escaping off, as writeJSON), field for field, string escapes
// included; RawMessages are compacted by encoding/json itself, and a page
// encoding/json would refuse (a RawMessage that is not JSON, a time
// outside RFC 3339) is handed to it whole (ok false), so it answers as
// before. jobPageShapeOK turns the fast path off when the types have
// changed since it was written; the tests compare both encoders.

// jobPageShape is the fields of the types appendJobPage writes, as
// typeShapes spells them.
const jobPageShape = "JobPage{Jobs:[]*sluicetype.Job:jobs Next:string:next_cursor,omitempty Prev:string:prev_cursor,omitempty Scan:*sluicetype.ScanReport:scan,omitempty} " +
	"Job{ID:string:id Queue:string:queue Kind:string:kind Payload:json.RawMessage:payload,omitempty " +
	"SchemaVersion:int:schema_version Metadata:json.RawMessage:metadata,omitempty Tags:[]string:tags,omitempty " +
	"Priority:int:priority State:sluicetype.State:state Attempt:int:attempt MaxAttempts:int:max_attempts " +
	"CrashAttempt:int:crash_attempt Fingerprint:string:fingerprint Fence:int64:fence ScheduledAt:time.Time:scheduled_at " +
	"Deadline:*time.Time:deadline,omitempty Timeout:time.Duration:timeout,omitempty CreatedAt:time.Time:created_at " +
	"AttemptedAt:*time.Time:attempted_at,omitempty AttemptedBy:string:attempted_by,omitempty " +
	"StateChangedAt:time.Time:state_changed_at FinalizedAt:*time.Time:finalized_at,omitempty " +
	"TerminalReason:sluicetype.TerminalReason:terminal_reason,omitempty Lease:*sluicetype.Lease:lease,omitempty " +
	"Errors:[]sluicetype.AttemptError:errors,omitempty Version:int64:version Checkpoint:json.RawMessage:checkpoint,omitempty " +
	"Wait:*sluicetype.WaitSummary:wait,omitempty DeadLetterOf:string:dead_letter_of,omitempty RetryOf:string:retry_of,omitempty SupersededBy:string:superseded_by,omitempty UniqueKey:string:unique_key,omitempty " +
	"HeldBy:string:held_by,omitempty} " +
	"Lease{ID:string:id WorkerID:string:worker_id Fence:int64:fence ExpiresAt:time.Time:expires_at} " +
	"AttemptError{Attempt:int:attempt Crash:bool:crash At:time.Time:at Started:*time.Time:started,omitempty Worker:string:worker,omitempty Message:string:message Trace:string:trace,omitempty Ref:string:ref,omitempty} " +
	"WaitSummary{Kind:sluicetype.WaitKind:kind Step:int:step Name:string:name Until:time.Time:until,omitzero " +
	"Signal:string:signal,omitempty Done:int:done,omitempty Total:int:total,omitempty}"

// jobPageShapeOK is whether the types are still those appendJobPage
// was written for, and none of them marshals itself.
var jobPageShapeOK = func() bool {
	ts := []reflect.Type{reflect.TypeFor[engine.JobPage](), reflect.TypeFor[engine.Job](),
		reflect.TypeFor[engine.Lease](), reflect.TypeFor[engine.AttemptError](), reflect.TypeFor[engine.WaitSummary]()}
	for _, t := range append(ts, reflect.TypeFor[engine.State](), reflect.TypeFor[engine.TerminalReason](), reflect.TypeFor[engine.WaitKind]()) {
		for _, m := range []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[encoding.TextMarshaler]()} {
			if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
				return false
			}
		}
	}
	return typeShapes(ts...) == jobPageShape
}()

// typeShapes spells the fields of struct types: Name{Field:type:jsontag ...}.
func typeShapes(ts ...reflect.Type) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Name() + "{")
		for k := range t.NumField() {
			f := t.Field(k)
			if k > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(f.Name + ":" + f.Type.String() + ":" + f.Tag.Get("json"))
		}
		b.WriteByte('}')
	}
	return b.String()
}

// jobPageBufs holds the buffers GET /jobs answers are written in.
var jobPageBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// writeJobPage answers a job list: as writeJSON would, in fewer
// instructions.
func writeJobPage(w http.ResponseWriter, page *engine.JobPage) {
	if !jobPageShapeOK {
		writeJSON(w, http.StatusOK, page)
		return
	}
	bp := jobPageBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 {
			jobPageBufs.Put(bp)
		}
	}()
	b, ok := appendJobPage((*bp)[:0], page)
	*bp = b
	if !ok {
		writeJSON(w, http.StatusOK, page)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// appendJobPage appends page as marshalBody would write it, newline and
// all; ok is false when it cannot (the caller then uses encoding/json).
func appendJobPage(b []byte, page *engine.JobPage) (_ []byte, ok bool) {
	if page.Scan != nil {
		return b, false // a bounded scan's page is rare: encoding/json writes it
	}
	b = append(b, `{"jobs":`...)
	if page.Jobs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, j := range page.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendJob(b, j); !ok {
				return b, false
			}
		}
		b = append(b, ']')
	}
	if page.Next != "" {
		b = append(b, `,"next_cursor":`...)
		b = jsonw.AppendString(b, page.Next)
	}
	if page.Prev != "" {
		b = append(b, `,"prev_cursor":`...)
		b = jsonw.AppendString(b, page.Prev)
	}
	return append(b, "}\n"...), true
}

func appendJob(b []byte, j *engine.Job) (_ []byte, ok bool) {
	if j == nil {
		return append(b, "null"...), true
	}
	str := func(key, v string) {
		b = append(b, key...)
		b = jsonw.AppendString(b, v)
	}
	num := func(key string, v int64) {
		b = append(b, key...)
		b = strconv.AppendInt(b, v, 10)
	}
	ok = true
	tm := func(key string, t time.Time) {
		b = append(b, key...)
		var good bool
		b, good = appendJSONTime(b, t)
		ok = ok && good
	}
	raw := func(key string, m json.RawMessage) {
		b = append(b, key...)
		var good bool
		b, good = appendJSONRaw(b, m)
		ok = ok && good
	}
	str(`{"id":`, j.ID)
	str(`,"queue":`, j.Queue)
	str(`,"kind":`, j.Kind)
	if len(j.Payload) > 0 {
		raw(`,"payload":`, j.Payload)
	}
	num(`,"schema_version":`, int64(j.SchemaVersion))
	if len(j.Metadata) > 0 {
		raw(`,"metadata":`, j.Metadata)
	}
	if len(j.Tags) > 0 {
		b = append(b, `,"tags":[`...)
		for i, t := range j.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonw.AppendString(b, t)
		}
		b = append(b, ']')
	}
	num(`,"priority":`, int64(j.Priority))
	str(`,"state":`, string(j.State))
	num(`,"attempt":`, int64(j.Attempt))
	num(`,"max_attempts":`, int64(j.MaxAttempts))
	num(`,"crash_attempt":`, int64(j.CrashAttempt))
	str(`,"fingerprint":`, j.Fingerprint)
	num(`,"fence":`, j.Fence)
	tm(`,"scheduled_at":`, j.ScheduledAt)
	if j.Deadline != nil {
		tm(`,"deadline":`, *j.Deadline)
	}
	if j.Timeout != 0 {
		num(`,"timeout":`, int64(j.Timeout))
	}
	tm(`,"created_at":`, j.CreatedAt)
	if j.AttemptedAt != nil {
		tm(`,"attempted_at":`, *j.AttemptedAt)
	}
	if j.AttemptedBy != "" {
		str(`,"attempted_by":`, j.AttemptedBy)
	}
	tm(`,"state_changed_at":`, j.StateChangedAt)
	if j.FinalizedAt != nil {
		tm(`,"finalized_at":`, *j.FinalizedAt)
	}
	if j.TerminalReason != "" {
		str(`,"terminal_reason":`, string(j.TerminalReason))
	}
	if l := j.Lease; l != nil {
		str(`,"lease":{"id":`, l.ID)
		str(`,"worker_id":`, l.WorkerID)
		num(`,"fence":`, l.Fence)
		tm(`,"expires_at":`, l.ExpiresAt)
		b = append(b, '}')
	}
	if len(j.Errors) > 0 {
		b = append(b, `,"errors":[`...)
		for i, e := range j.Errors {
			if i > 0 {
				b = append(b, ',')
			}
			num(`{"attempt":`, int64(e.Attempt))
			b = append(b, `,"crash":`...)
			b = strconv.AppendBool(b, e.Crash)
			tm(`,"at":`, e.At)
			if e.Started != nil {
				tm(`,"started":`, *e.Started)
			}
			if e.Worker != "" {
				str(`,"worker":`, e.Worker)
			}
			str(`,"message":`, e.Message)
			if e.Trace != "" {
				str(`,"trace":`, e.Trace)
			}
			if e.Ref != "" {
				str(`,"ref":`, e.Ref)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	num(`,"version":`, j.Version)
	if len(j.Checkpoint) > 0 {
		raw(`,"checkpoint":`, j.Checkpoint)
	}
	if w := j.Wait; w != nil {
		str(`,"wait":{"kind":`, string(w.Kind))
		num(`,"step":`, int64(w.Step))
		str(`,"name":`, w.Name)
		if !w.Until.IsZero() {
			tm(`,"until":`, w.Until)
		}
		if w.Signal != "" {
			str(`,"signal":`, w.Signal)
		}
		if w.Done != 0 {
			num(`,"done":`, int64(w.Done))
		}
		if w.Total != 0 {
			num(`,"total":`, int64(w.Total))
		}
		b = append(b, '}')
	}
	if j.DeadLetterOf != "" {
		str(`,"dead_letter_of":`, j.DeadLetterOf)
	}
	if j.RetryOf != "" {
		str(`,"retry_of":`, j.RetryOf)
	}
	if j.SupersededBy != "" {
		str(`,"superseded_by":`, j.SupersededBy)
	}
	if j.UniqueKey != "" {
		str(`,"unique_key":`, j.UniqueKey)
	}
	if j.HeldBy != "" {
		str(`,"held_by":`, j.HeldBy)
	}
	return append(b, '}'), ok
}

// appendJSONTime appends t as time.Time's MarshalJSON does; false for the
// times it refuses (a year outside 0–9999, a zone offset of a day or more).
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off <= -24*60*60 || off >= 24*60*60 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// appendJSONRaw appends a RawMessage compacted, as encoding/json does;
// false when it is not valid JSON.
func appendJSONRaw(b []byte, m json.RawMessage) ([]byte, bool) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, m); err != nil {
		return b, false
	}
	return buf.Bytes(), true
}
