package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/engine"
)

// Request and response bodies, and the decoders of request bodies and
// query strings. Decoders are strict: unknown fields and unknown query
// parameters are refused (a misspelt filter must not widen a selection),
// and every error wraps engine.ErrInvalid.

// decodeStrict decodes exactly one JSON value from body into v, refusing
// unknown fields and trailing data.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("%w: request body required", engine.ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %s", engine.ErrInvalid, jsonErrorText(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: request body: data after the JSON value", engine.ErrInvalid)
	}
	return nil
}

// jsonErrorText says what was wrong with a body in words fit for a client.
func jsonErrorText(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// selectorWire is a bulk selector as the wire takes it: the singular form
// of the seed documents ({"state":"archived","queue":"billing"}), the plural
// form of engine.Filter, and a q string in the query grammar, all ANDed
// (values of one field from several forms are merged).
type selectorWire struct {
	State  string         `json:"state,omitempty"`
	Queue  string         `json:"queue,omitempty"`
	Kind   string         `json:"kind,omitempty"`
	ID     string         `json:"id,omitempty"`
	Tag    string         `json:"tag,omitempty"`
	Q      string         `json:"q,omitempty"`
	States []engine.State `json:"states,omitempty"`
	Queues []string       `json:"queues,omitempty"`
	Kinds  []string       `json:"kinds,omitempty"`
	IDs    []string       `json:"ids,omitempty"`
	Tags   []string       `json:"tags,omitempty"`

	Fingerprint       string             `json:"fingerprint,omitempty"`
	Error             string             `json:"error,omitempty"`
	ErrorPattern      string             `json:"error_pattern,omitempty"`
	Payload           []engine.PathMatch `json:"payload,omitempty"`
	Meta              []engine.PathMatch `json:"meta,omitempty"`
	CreatedAfter      *time.Time         `json:"created_after,omitempty"`
	CreatedBefore     *time.Time         `json:"created_before,omitempty"`
	FinalizedAfter    *time.Time         `json:"finalized_after,omitempty"`
	FinalizedBefore   *time.Time         `json:"finalized_before,omitempty"`
	IncludeSuperseded bool               `json:"include_superseded,omitempty"`
}

// filter merges every form into one engine.Filter.
func (s *selectorWire) filter() (engine.Filter, error) {
	f := engine.Filter{}
	if s.Q != "" {
		q, err := engine.ParseQuery(s.Q)
		if err != nil {
			return engine.Filter{}, fmt.Errorf("selector q: %w", err)
		}
		f = q
	}
	one := func(v string) []string {
		if v == "" {
			return nil
		}
		return []string{v}
	}
	for _, st := range append(slices.Clone(s.States), statesOf(one(s.State))...) {
		f.States = appendNew(f.States, st)
	}
	for _, v := range append(slices.Clone(s.Queues), one(s.Queue)...) {
		f.Queues = appendNew(f.Queues, v)
	}
	for _, v := range append(slices.Clone(s.Kinds), one(s.Kind)...) {
		f.Kinds = appendNew(f.Kinds, v)
	}
	for _, v := range append(slices.Clone(s.IDs), one(s.ID)...) {
		f.IDs = appendNew(f.IDs, v)
	}
	for _, v := range append(slices.Clone(s.Tags), one(s.Tag)...) {
		f.Tags = appendNew(f.Tags, v)
	}
	single := []struct {
		name string
		dst  *string
		v    string
	}{
		{"fingerprint", &f.Fingerprint, s.Fingerprint},
		{"error", &f.Error, s.Error},
		{"error_pattern", &f.ErrorPattern, s.ErrorPattern},
	}
	for _, sv := range single {
		if sv.v == "" {
			continue
		}
		if *sv.dst != "" && *sv.dst != sv.v {
			return engine.Filter{}, fmt.Errorf("%w: selector: %s given twice with different values", engine.ErrInvalid, sv.name)
		}
		*sv.dst = sv.v
	}
	f.Payload = append(f.Payload, s.Payload...)
	f.Meta = append(f.Meta, s.Meta...)
	times := []struct {
		name string
		dst  **time.Time
		v    *time.Time
	}{
		{"created_after", &f.CreatedAfter, s.CreatedAfter},
		{"created_before", &f.CreatedBefore, s.CreatedBefore},
		{"finalized_after", &f.FinalizedAfter, s.FinalizedAfter},
		{"finalized_before", &f.FinalizedBefore, s.FinalizedBefore},
	}
	for _, tv := range times {
		if tv.v == nil {
			continue
		}
		if *tv.dst != nil && !(*tv.dst).Equal(*tv.v) {
			return engine.Filter{}, fmt.Errorf("%w: selector: %s given twice with different values", engine.ErrInvalid, tv.name)
		}
		t := tv.v.UTC()
		*tv.dst = &t
	}
	f.IncludeSuperseded = f.IncludeSuperseded || s.IncludeSuperseded
	if err := f.Validate(); err != nil {
		return engine.Filter{}, fmt.Errorf("selector: %w", err)
	}
	return f, nil
}

func statesOf(vs []string) []engine.State {
	out := make([]engine.State, len(vs))
	for i, v := range vs {
		out[i] = engine.State(v)
	}
	return out
}

func appendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// bulkRequest is the body of POST /jobs/bulk.
type bulkRequest struct {
	Action        engine.Action `json:"action"`
	Selector      *selectorWire `json:"selector"`
	DryRun        bool          `json:"dry_run"`
	RatePerSecond int           `json:"rate_per_second,omitempty"`
}

// decodeBulk reads a POST /jobs/bulk body. The engine checks the action
// and refuses an empty selector; this refuses what cannot be read.
func decodeBulk(body []byte) (engine.BulkParams, error) {
	var req bulkRequest
	if err := decodeStrict(body, &req); err != nil {
		return engine.BulkParams{}, err
	}
	if req.Action == "" {
		return engine.BulkParams{}, fmt.Errorf("%w: action required (retry, cancel, delete, release)", engine.ErrInvalid)
	}
	if req.Selector == nil {
		return engine.BulkParams{}, fmt.Errorf("%w: selector required: a bulk action needs at least one condition", engine.ErrInvalid)
	}
	f, err := req.Selector.filter()
	if err != nil {
		return engine.BulkParams{}, err
	}
	if f.IsEmpty() {
		return engine.BulkParams{}, fmt.Errorf("%w: empty selector: a bulk action needs at least one condition", engine.ErrInvalid)
	}
	if req.RatePerSecond < 0 {
		return engine.BulkParams{}, fmt.Errorf("%w: negative rate_per_second", engine.ErrInvalid)
	}
	return engine.BulkParams{Action: req.Action, Selector: f, DryRun: req.DryRun, RatePerSecond: req.RatePerSecond}, nil
}

// actionsRequest is the body of POST /jobs/actions.
type actionsRequest struct {
	Action engine.Action `json:"action"`
	IDs    []string      `json:"ids"`
}

// actionsResponse answers POST /jobs/actions: one result per id, in order.
type actionsResponse struct {
	Results   []engine.ActionResult `json:"results"`
	Succeeded int                   `json:"succeeded"`
	Failed    int                   `json:"failed"`
}

// decodeActions reads a POST /jobs/actions body.
func decodeActions(body []byte) (actionsRequest, error) {
	var req actionsRequest
	if err := decodeStrict(body, &req); err != nil {
		return actionsRequest{}, err
	}
	if req.Action == "" {
		return actionsRequest{}, fmt.Errorf("%w: action required (retry, cancel, delete, release)", engine.ErrInvalid)
	}
	if len(req.IDs) == 0 {
		return actionsRequest{}, fmt.Errorf("%w: ids required: name at least one job", engine.ErrInvalid)
	}
	if len(req.IDs) > engine.MaxApplyIDs {
		return actionsRequest{}, fmt.Errorf("%w: %d ids, at most %d per call; use a bulk operation", engine.ErrInvalid, len(req.IDs), engine.MaxApplyIDs)
	}
	return req, nil
}

// retryRequest is the optional body of POST /jobs/{id}/retry.
type retryRequest struct {
	Force    bool       `json:"force,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
}

// retryWithInputRequest is the body of POST /jobs/{id}/retry-with-input.
type retryWithInputRequest struct {
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload"`
}

// enqueueRequest is one job of POST /jobs.
type enqueueRequest struct {
	ID            string          `json:"id,omitempty"`
	Queue         string          `json:"queue,omitempty"`
	Kind          string          `json:"kind"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	SchemaVersion int             `json:"schema_version,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	Tags          []string        `json:"tags,omitempty"`
	Priority      int             `json:"priority,omitempty"`
	MaxAttempts   int             `json:"max_attempts,omitempty"`
	// Delay and Timeout are Go durations ("90s", "5m").
	Delay       string     `json:"delay,omitempty"`
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	Deadline    *time.Time `json:"deadline,omitempty"`
	Timeout     string     `json:"timeout,omitempty"`
}

func (r *enqueueRequest) params() (engine.EnqueueParams, error) {
	p := engine.EnqueueParams{
		ID: r.ID, Queue: r.Queue, Kind: r.Kind, Payload: r.Payload,
		SchemaVersion: r.SchemaVersion, Metadata: r.Metadata, Tags: r.Tags,
		Priority: r.Priority, MaxAttempts: r.MaxAttempts,
		ScheduledAt: r.ScheduledAt, Deadline: r.Deadline,
	}
	var err error
	if p.Delay, err = parseDuration("delay", r.Delay); err != nil {
		return engine.EnqueueParams{}, err
	}
	if p.Timeout, err = parseDuration("timeout", r.Timeout); err != nil {
		return engine.EnqueueParams{}, err
	}
	return p, nil
}

func enqueueRequestOf(p engine.EnqueueParams) (enqueueRequest, error) {
	raw := p.Payload
	if raw == nil && p.Args != nil {
		b, err := json.Marshal(p.Args)
		if err != nil {
			return enqueueRequest{}, fmt.Errorf("%w: args do not marshal: %v", engine.ErrInvalid, err)
		}
		raw = b
	}
	r := enqueueRequest{
		ID: p.ID, Queue: p.Queue, Kind: p.Kind, Payload: raw,
		SchemaVersion: p.SchemaVersion, Metadata: p.Metadata, Tags: p.Tags,
		Priority: p.Priority, MaxAttempts: p.MaxAttempts,
		ScheduledAt: p.ScheduledAt, Deadline: p.Deadline,
	}
	if p.Delay != 0 {
		r.Delay = p.Delay.String()
	}
	if p.Timeout != 0 {
		r.Timeout = p.Timeout.String()
	}
	return r, nil
}

func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: %s %q is not a non-negative duration (90s, 5m, 1h)", engine.ErrInvalid, field, s)
	}
	return d, nil
}

// MaxEnqueueBatch is the most jobs one POST /jobs takes.
const MaxEnqueueBatch = 1000

// decodeEnqueue reads a POST /jobs body: one job object, or an array of
// them. batch reports which.
func decodeEnqueue(body []byte) (ps []engine.EnqueueParams, batch bool, err error) {
	var reqs []enqueueRequest
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		batch = true
		if err := decodeStrict(body, &reqs); err != nil {
			return nil, true, err
		}
		if len(reqs) == 0 || len(reqs) > MaxEnqueueBatch {
			return nil, true, fmt.Errorf("%w: %d jobs; send 1–%d per request", engine.ErrInvalid, len(reqs), MaxEnqueueBatch)
		}
	} else {
		var one enqueueRequest
		if err := decodeStrict(body, &one); err != nil {
			return nil, false, err
		}
		reqs = []enqueueRequest{one}
	}
	ps = make([]engine.EnqueueParams, len(reqs))
	for i := range reqs {
		if ps[i], err = reqs[i].params(); err != nil {
			if batch {
				return nil, true, fmt.Errorf("job %d: %w", i, err)
			}
			return nil, false, err
		}
	}
	return ps, batch, nil
}

// enqueueResult is one job's outcome in a POST /jobs answer.
type enqueueResult struct {
	Job      *engine.Job `json:"job,omitempty"`
	Existing bool        `json:"existing,omitempty"`
	Error    string      `json:"error,omitempty"`
	Reason   string      `json:"reason,omitempty"`
}

type enqueueBatchResponse struct {
	Results []enqueueResult `json:"results"`
}

// listQueryParams are the parameters GET /jobs knows.
var listQueryParams = []string{"state", "queue", "kind", "q", "cursor", "limit"}

// parseListQuery reads GET /jobs's query string: the simple parameters
// (state, queue, kind: comma lists, repeatable) and q (the query grammar)
// AND together.
func parseListQuery(v url.Values) (engine.ListJobsParams, error) {
	if err := knownParams(v, listQueryParams...); err != nil {
		return engine.ListJobsParams{}, err
	}
	var p engine.ListJobsParams
	if q, err := singleParam(v, "q"); err != nil {
		return p, err
	} else if q != "" {
		f, err := engine.ParseQuery(q)
		if err != nil {
			return p, err
		}
		p.Filter = f
	}
	for _, s := range listParam(v, "state") {
		p.Filter.States = appendNew(p.Filter.States, engine.State(s))
	}
	for _, s := range listParam(v, "queue") {
		p.Filter.Queues = appendNew(p.Filter.Queues, s)
	}
	for _, s := range listParam(v, "kind") {
		p.Filter.Kinds = appendNew(p.Filter.Kinds, s)
	}
	var err error
	if p.Cursor, err = singleParam(v, "cursor"); err != nil {
		return p, err
	}
	if p.Limit, err = intParam(v, "limit"); err != nil {
		return p, err
	}
	if err := p.Filter.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

// parseFilterQuery reads the filter of GET /error-groups: q plus the
// simple parameters, as GET /jobs.
func parseFilterQuery(v url.Values) (engine.Filter, error) {
	if err := knownParams(v, "state", "queue", "kind", "q"); err != nil {
		return engine.Filter{}, err
	}
	p, err := parseListQuery(v)
	return p.Filter, err
}

// parseOperationsQuery reads GET /operations's limit and cursor.
func parseOperationsQuery(v url.Values) (limit int, cursor string, err error) {
	if err := knownParams(v, "limit", "cursor"); err != nil {
		return 0, "", err
	}
	if limit, err = intParam(v, "limit"); err != nil {
		return 0, "", err
	}
	if cursor, err = singleParam(v, "cursor"); err != nil {
		return 0, "", err
	}
	return limit, cursor, nil
}

func knownParams(v url.Values, known ...string) error {
	for k := range v {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%w: unknown query parameter %q (known: %s)", engine.ErrInvalid, k, strings.Join(known, ", "))
		}
	}
	return nil
}

func singleParam(v url.Values, name string) (string, error) {
	vs := v[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", fmt.Errorf("%w: query parameter %s given %d times; it takes one value", engine.ErrInvalid, name, len(vs))
}

// listParam splits every value of a repeatable, comma-separated parameter.
func listParam(v url.Values, name string) []string {
	var out []string
	for _, s := range v[name] {
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func intParam(v url.Values, name string) (int, error) {
	s, err := singleParam(v, name)
	if err != nil || s == "" {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: query parameter %s=%q is not an integer", engine.ErrInvalid, name, s)
	}
	return n, nil
}

func boolParam(v url.Values, name string) (bool, error) {
	s, err := singleParam(v, name)
	if err != nil || s == "" {
		return false, err
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: query parameter %s=%q is not true or false", engine.ErrInvalid, name, s)
	}
	return b, nil
}

// Response bodies that wrap lists, so fields can be added later.
type (
	fingerprintsResponse struct {
		Fingerprints []*engine.Fingerprint `json:"fingerprints"`
	}
	queuesResponse struct {
		Queues []engine.QueueInfo `json:"queues"`
	}
	errorGroupsResponse struct {
		Groups []engine.ErrorGroup `json:"groups"`
	}
	releasedResponse struct {
		Released int `json:"released"`
	}
	queueStateResponse struct {
		Queue  string `json:"queue"`
		Paused bool   `json:"paused"`
	}
	deletedResponse struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
	}
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
const jobPageShape = "JobPage{Jobs:[]*engine.Job:jobs Next:string:next_cursor,omitempty Prev:string:prev_cursor,omitempty} " +
	"Job{ID:string:id Queue:string:queue Kind:string:kind Payload:json.RawMessage:payload,omitempty " +
	"SchemaVersion:int:schema_version Metadata:json.RawMessage:metadata,omitempty Tags:[]string:tags,omitempty " +
	"Priority:int:priority State:engine.State:state Attempt:int:attempt MaxAttempts:int:max_attempts " +
	"CrashAttempt:int:crash_attempt Fingerprint:string:fingerprint Fence:int64:fence ScheduledAt:time.Time:scheduled_at " +
	"Deadline:*time.Time:deadline,omitempty Timeout:time.Duration:timeout,omitempty CreatedAt:time.Time:created_at " +
	"AttemptedAt:*time.Time:attempted_at,omitempty AttemptedBy:string:attempted_by,omitempty " +
	"StateChangedAt:time.Time:state_changed_at FinalizedAt:*time.Time:finalized_at,omitempty " +
	"TerminalReason:engine.TerminalReason:terminal_reason,omitempty Lease:*engine.Lease:lease,omitempty " +
	"Errors:[]engine.AttemptError:errors,omitempty Version:int64:version Checkpoint:json.RawMessage:checkpoint,omitempty " +
	"DeadLetterOf:string:dead_letter_of,omitempty RetryOf:string:retry_of,omitempty SupersededBy:string:superseded_by,omitempty} " +
	"Lease{ID:string:id WorkerID:string:worker_id Fence:int64:fence ExpiresAt:time.Time:expires_at} " +
	"AttemptError{Attempt:int:attempt Crash:bool:crash At:time.Time:at Worker:string:worker,omitempty Message:string:message Trace:string:trace,omitempty}"

// jobPageShapeOK is whether the types are still those appendJobPage
// was written for, and none of them marshals itself.
var jobPageShapeOK = func() bool {
	ts := []reflect.Type{reflect.TypeFor[engine.JobPage](), reflect.TypeFor[engine.Job](),
		reflect.TypeFor[engine.Lease](), reflect.TypeFor[engine.AttemptError]()}
	for _, t := range append(ts, reflect.TypeFor[engine.State](), reflect.TypeFor[engine.TerminalReason]()) {
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
		b = appendJSONString(b, page.Next)
	}
	if page.Prev != "" {
		b = append(b, `,"prev_cursor":`...)
		b = appendJSONString(b, page.Prev)
	}
	return append(b, "}\n"...), true
}

func appendJob(b []byte, j *engine.Job) (_ []byte, ok bool) {
	if j == nil {
		return append(b, "null"...), true
	}
	str := func(key, v string) {
		b = append(b, key...)
		b = appendJSONString(b, v)
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
			b = appendJSONString(b, t)
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
			if e.Worker != "" {
				str(`,"worker":`, e.Worker)
			}
			str(`,"message":`, e.Message)
			if e.Trace != "" {
				str(`,"trace":`, e.Trace)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	num(`,"version":`, j.Version)
	if len(j.Checkpoint) > 0 {
		raw(`,"checkpoint":`, j.Checkpoint)
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
	return append(b, '}'), ok
}

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping off: " and \ escaped, control characters as \b, \f, \n, \r,
// \t or \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 as \u2028 and
// \u2029, the rest as it is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
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
