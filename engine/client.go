package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
)

// EnqueueParams describes one job to enqueue.
type EnqueueParams struct {
	// ID makes the enqueue idempotent: the same id with the same content
	// (kind, queue, canonical payload) returns the existing job; the same
	// id with other content is ErrConflict. A UUIDv7 when empty.
	ID    string
	Queue string // "default" when empty
	Kind  string
	// Payload is a JSON object. Args, when set instead, is marshalled.
	Payload json.RawMessage
	Args    any
	// SchemaVersion of the payload; the registered kind's version (or 1)
	// when 0.
	SchemaVersion int
	Metadata      json.RawMessage
	Tags          []string
	Priority      int
	MaxAttempts   int
	// Delay or ScheduledAt put the job off; ScheduledAt wins.
	Delay       time.Duration
	ScheduledAt *time.Time
	// Deadline after which the work is no longer useful.
	Deadline *time.Time
	// Timeout bounds one attempt; the kind's timeout when 0.
	Timeout time.Duration
}

// EnqueueResult is the outcome for one job of EnqueueMany.
type EnqueueResult struct {
	Job      *Job
	Existing bool
	Err      error
}

// namePattern is the documented rule for queue and kind names.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// idPattern is the documented rule for caller-given job ids.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:~@+-]{0,254}$`)

// NamePattern and IDPattern are the documented rules, for error messages
// and help texts.
const (
	NamePattern = `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`
	IDPattern   = `^[A-Za-z0-9][A-Za-z0-9._:~@+-]{0,254}$`
)

// ReservedID can never be a job id: it names the counts route.
const ReservedID = "counts"

func validName(what, s string) error {
	if !namePattern.MatchString(s) {
		return fmt.Errorf("%w: %s name %q does not match %s", ErrInvalid, what, s, NamePattern)
	}
	return nil
}

// ValidateJobID checks a caller-given job id.
func ValidateJobID(id string) error {
	if id == ReservedID || !idPattern.MatchString(id) {
		return fmt.Errorf("%w: job id %q does not match %s (and %q is reserved)", ErrInvalid, id, IDPattern, ReservedID)
	}
	return nil
}

// ValidatePayload checks that raw is a JSON object within limit bytes and
// returns its compact form.
func ValidatePayload(raw []byte, limit int) (json.RawMessage, error) {
	if len(raw) > limit {
		return nil, fmt.Errorf("%w: %w: %d bytes, limit %d", ErrInvalid, ErrPayloadTooLarge, len(raw), limit)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: payload must be a JSON object", ErrInvalid)
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("%w: payload is not valid JSON", ErrInvalid)
	}
	if err := checkStorableJSON("payload", trimmed); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, fmt.Errorf("%w: payload is not valid JSON: %v", ErrInvalid, err)
	}
	return buf.Bytes(), nil
}

// Enqueue writes one job.
func (e *Engine) Enqueue(ctx context.Context, p EnqueueParams) (*Job, error) {
	res, err := e.EnqueueMany(ctx, []EnqueueParams{p})
	if err != nil {
		return nil, err
	}
	return res[0].Job, res[0].Err
}

// EnqueueMany writes many jobs in one store call; each is accepted or
// refused on its own. The error is for the call as a whole (store down).
func (e *Engine) EnqueueMany(ctx context.Context, ps []EnqueueParams) ([]EnqueueResult, error) {
	out := make([]EnqueueResult, len(ps))
	ins := make([]*JobInsertParams, 0, len(ps))
	idx := make([]int, 0, len(ps))
	for i := range ps {
		jp, err := e.insertParams(&ps[i])
		if err != nil {
			out[i].Err = err
			continue
		}
		ins = append(ins, jp)
		idx = append(idx, i)
	}
	if len(ins) == 0 {
		return out, nil
	}
	res, replay, err := replayed[[]JobInsertResult](ctx)
	if err != nil {
		return nil, err
	}
	if !replay {
		res, err = e.store.JobInsertMany(ctx, &JobInsertManyParams{Jobs: ins, RefuseQuarantined: true})
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
	}
	if replay && len(res) != len(ins) {
		return nil, fmt.Errorf("enqueue: the idempotency record holds %d results for %d jobs", len(res), len(ins))
	}
	queues := map[string]bool{}
	for k, r := range res {
		out[idx[k]] = EnqueueResult(r)
		if r.Err == nil && !r.Existing && r.Job != nil && r.Job.State == StateAvailable {
			queues[r.Job.Queue] = true
		}
	}
	for q := range queues {
		e.wake(q)
	}
	return out, nil
}

func (e *Engine) insertParams(p *EnqueueParams) (*JobInsertParams, error) {
	if p.Queue == "" {
		p.Queue = "default"
	}
	if err := validName("queue", p.Queue); err != nil {
		return nil, err
	}
	if err := validName("kind", p.Kind); err != nil {
		return nil, err
	}
	id := p.ID
	if id == "" {
		v7, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("new job id: %w", err)
		}
		id = v7.String()
	} else if err := ValidateJobID(id); err != nil {
		return nil, err
	}
	raw := p.Payload
	if raw == nil && p.Args != nil {
		b, err := json.Marshal(p.Args)
		if err != nil {
			return nil, fmt.Errorf("%w: args do not marshal: %v", ErrInvalid, err)
		}
		raw = b
	}
	if raw == nil {
		raw = json.RawMessage(`{}`)
	}
	payload, err := ValidatePayload(raw, e.cfg.PayloadLimit)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	fp, err := FingerprintOf(p.Kind, payload)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	meta := p.Metadata
	if len(meta) > 0 {
		if meta, err = ValidatePayload(meta, e.cfg.PayloadLimit); err != nil {
			return nil, fmt.Errorf("job %s: metadata: %w", id, err)
		}
	}
	version := p.SchemaVersion
	maxAttempts := p.MaxAttempts
	timeout := p.Timeout
	if k := e.kind(p.Kind); k != nil {
		if version == 0 {
			version = k.Version
		}
		if maxAttempts == 0 {
			maxAttempts = k.MaxAttempts
		}
		if timeout == 0 {
			timeout = k.Timeout
		}
	}
	if version <= 0 {
		version = 1
	}
	if maxAttempts <= 0 {
		maxAttempts = e.cfg.MaxAttempts
	}
	for _, t := range p.Tags {
		if err := validName("tag", t); err != nil {
			return nil, err
		}
	}
	return &JobInsertParams{
		ID: id, Queue: p.Queue, Kind: p.Kind, Payload: payload,
		SchemaVersion: version, Metadata: meta, Tags: p.Tags,
		Priority: p.Priority, MaxAttempts: maxAttempts, Fingerprint: fp,
		Delay: p.Delay, ScheduledAt: p.ScheduledAt, Deadline: p.Deadline,
		Timeout: timeout,
	}, nil
}

// wake tells this process's runner of queue q that work is waiting.
func (e *Engine) wake(q string) {
	if r, ok := e.queues[q]; ok {
		r.wake()
	}
}

// wakeAll wakes every queue runner of this process.
func (e *Engine) wakeAll() {
	for _, r := range e.queues {
		r.wake()
	}
}
