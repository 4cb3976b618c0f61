package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Request bodies and their decoders, and the answers that pair with them
// (query strings are in query.go, the job list's encoder in listjson.go,
// the bodies that wrap lists in wire.go). Decoders are strict: unknown
// fields are refused (a misspelt filter must not widen a selection), and
// every error wraps engine.ErrInvalid.

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
// the API has taken from its first version ({"state":"archived","queue":
// "billing"}), the plural form of engine.Filter, and a q string in the query grammar, all ANDed
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
	UniqueKey         string             `json:"unique_key,omitempty"`
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
	if err := s.checkBounds(); err != nil {
		return engine.Filter{}, err
	}
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
		{"unique_key", &f.UniqueKey, s.UniqueKey},
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
	Action        engine.Action `json:"action,omitempty"`
	Selector      *selectorWire `json:"selector,omitempty"`
	DryRun        bool          `json:"dry_run"`
	RatePerSecond int           `json:"rate_per_second,omitempty"`
	// Plan is a dry run's answer's plan, handed back to run exactly what
	// the preview counted; action and selector may then be left out.
	Plan *planWire `json:"plan,omitempty"`
	// StartAt holds a run until then (an absolute time: a client reads
	// an operator's HH:MM on its own clock and sends the instant).
	StartAt *time.Time `json:"start_at,omitempty"`
	// Canary asks a retry to redrive a sample first and halt itself when
	// the redriven jobs fail again.
	Canary *canaryWire `json:"canary,omitempty"`
}

// canaryWire is engine.CanaryParams on the wire; the engine fills its
// defaults and checks its bounds.
type canaryWire struct {
	Size            int     `json:"size"`
	MinSuccess      float64 `json:"min_success,omitempty"`
	HaltFailureRate float64 `json:"halt_failure_rate,omitempty"`
	Window          int     `json:"window,omitempty"`
	TimeoutNs       int64   `json:"timeout_ns,omitempty"`
}

func canaryWireOf(c *engine.CanaryParams) *canaryWire {
	if c == nil {
		return nil
	}
	return &canaryWire{Size: c.Size, MinSuccess: c.MinSuccess, HaltFailureRate: c.HaltFailureRate, Window: c.Window, TimeoutNs: int64(c.Timeout)}
}

func (w *canaryWire) params() *engine.CanaryParams {
	if w == nil {
		return nil
	}
	return &engine.CanaryParams{Size: w.Size, MinSuccess: w.MinSuccess, HaltFailureRate: w.HaltFailureRate, Window: w.Window,
		Timeout: time.Duration(w.TimeoutNs)}
}

// planWire is engine.BulkPlan on the wire; its selector is read as strictly
// as a request's.
type planWire struct {
	Action   engine.Action `json:"action"`
	Selector *selectorWire `json:"selector"`
	Cutoff   *time.Time    `json:"cutoff"`
}

func planWireOf(p *engine.BulkPlan) *planWire {
	if p == nil {
		return nil
	}
	sel := selectorOf(p.Selector)
	c := p.Cutoff
	return &planWire{Action: p.Action, Selector: &sel, Cutoff: &c}
}

// decodeBulk reads a POST /jobs/bulk body. The engine checks the action,
// refuses an empty selector and holds a run to its plan; this refuses what
// cannot be read.
func decodeBulk(body []byte) (engine.BulkParams, error) {
	var req bulkRequest
	if err := decodeStrict(body, &req); err != nil {
		return engine.BulkParams{}, err
	}
	var plan *engine.BulkPlan
	if req.Plan != nil {
		if req.Plan.Action == "" || req.Plan.Selector == nil || req.Plan.Cutoff == nil {
			return engine.BulkParams{}, fmt.Errorf("%w: plan: action, selector and cutoff required (hand back a dry run's plan as it came)", engine.ErrInvalid)
		}
		f, err := req.Plan.Selector.filter()
		if err != nil {
			return engine.BulkParams{}, fmt.Errorf("plan: %w", err)
		}
		plan = &engine.BulkPlan{Action: req.Plan.Action, Selector: f, Cutoff: req.Plan.Cutoff.UTC()}
		if req.Action == "" {
			req.Action = plan.Action
		}
	}
	if req.Action == "" {
		return engine.BulkParams{}, fmt.Errorf("%w: action required (retry, cancel, delete, release)", engine.ErrInvalid)
	}
	if req.Selector == nil && plan == nil {
		return engine.BulkParams{}, fmt.Errorf("%w: selector required: a bulk action needs at least one condition", engine.ErrInvalid)
	}
	var f engine.Filter
	if req.Selector != nil {
		var err error
		if f, err = req.Selector.filter(); err != nil {
			return engine.BulkParams{}, err
		}
		if f.IsEmpty() {
			return engine.BulkParams{}, fmt.Errorf("%w: empty selector: a bulk action needs at least one condition", engine.ErrInvalid)
		}
	}
	if req.RatePerSecond < 0 {
		return engine.BulkParams{}, fmt.Errorf("%w: negative rate_per_second", engine.ErrInvalid)
	}
	var start *time.Time
	if req.StartAt != nil {
		t := req.StartAt.UTC()
		start = &t
	}
	return engine.BulkParams{Action: req.Action, Selector: f, DryRun: req.DryRun, RatePerSecond: req.RatePerSecond, Plan: plan, StartAt: start,
		Canary: req.Canary.params()}, nil
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
	// Unique makes the enqueue unique (engine.UniqueOpts).
	Unique *uniqueRequest `json:"unique,omitempty"`
}

// uniqueRequest is engine.UniqueOpts on the wire; period is a Go
// duration ("1h").
type uniqueRequest struct {
	ExcludeKind bool           `json:"exclude_kind,omitempty"`
	ByQueue     bool           `json:"by_queue,omitempty"`
	ByPayload   bool           `json:"by_payload,omitempty"`
	Fields      []string       `json:"fields,omitempty"`
	Period      string         `json:"period,omitempty"`
	States      []engine.State `json:"states,omitempty"`
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
	if u := r.Unique; u != nil {
		p.Unique = &engine.UniqueOpts{ExcludeKind: u.ExcludeKind, ByQueue: u.ByQueue, ByPayload: u.ByPayload,
			Fields: u.Fields, States: u.States}
		if p.Unique.Period, err = parseDuration("unique.period", u.Period); err != nil {
			return engine.EnqueueParams{}, err
		}
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
	if u := p.Unique; u != nil {
		r.Unique = &uniqueRequest{ExcludeKind: u.ExcludeKind, ByQueue: u.ByQueue, ByPayload: u.ByPayload,
			Fields: u.Fields, States: u.States}
		if u.Period != 0 {
			r.Unique.Period = u.Period.String()
		}
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
