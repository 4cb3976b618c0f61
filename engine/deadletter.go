package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Dead-letter routing: a dead job handed to a job of its own that triages
// it, written in the same store transaction as the death.

// DeadLetterPrefix begins the id of every dead-letter handler job:
// dlq:<id of the dead job>. Such a job is never routed again when it dies.
const DeadLetterPrefix = "dlq:"

// DeadLetterRule names the kind (and optionally the queue) that triages
// the deaths of a kind.
type DeadLetterRule struct {
	// Kind of the dead-letter job; a kind with no handler registered in
	// the engine is warned about at Start.
	Kind string
	// Queue of the dead-letter job; the dead job's queue when empty.
	Queue string
}

// DeadLetterPayload is the payload of a dead-letter job.
type DeadLetterPayload struct {
	DeadJobID string          `json:"dead_job_id"`
	Kind      string          `json:"kind"`
	Queue     string          `json:"queue"`
	Payload   json.RawMessage `json:"payload"`
	Error     string          `json:"error"`
	Reason    TerminalReason  `json:"reason"`
}

// DeadLetterID is the id of the dead-letter job of the job id.
func DeadLetterID(id string) string { return DeadLetterPrefix + id }

// IsDeadLetter reports whether id names a dead-letter job.
func IsDeadLetter(id string) bool { return strings.HasPrefix(id, DeadLetterPrefix) }

// deadLetterRule is the rule for a job of kind: the kind's own, else the
// engine's default, else none.
func (e *Engine) deadLetterRule(kind string) *DeadLetterRule {
	if k := e.kind(kind); k != nil && k.DeadLetter != nil {
		return k.DeadLetter
	}
	return e.cfg.DeadLetter
}

// routesDeath reports whether a transition by row routes j: it enters
// archived, or it is the job whose crash quarantines its fingerprint; and
// j is not itself a dead-letter job.
func routesDeath(j *Job, row Transition) bool {
	if IsDeadLetter(j.ID) {
		return false
	}
	return row.To == StateArchived || (row.To == StateQuarantined && row.Quarantine)
}

// deadLetterPlan resolves the dead-letter route of j's death, or nil when
// it has none. j must carry its payload (see deadLetterPayloadFor).
func (e *Engine) deadLetterPlan(j *Job, row Transition, message, actor string) (*DeadLetterWrite, error) {
	if !routesDeath(j, row) {
		return nil, nil
	}
	return DeadLetterFor(e.deadLetterRoute(e.deadLetterRule(j.Kind), actor), j, message, row.Reason)
}

// DeadLetterRoute is a dead-letter rule resolved by the engine, with all
// DeadLetterFor needs to write the route of a death: what a store that
// finds the dead jobs itself (a claim's deadline deaths) is handed, so
// that it applies the rule rather than deciding it.
type DeadLetterRoute struct {
	Kind string
	// Queue of the dead-letter job; the dead job's when empty.
	Queue string
	// SchemaVersion, MaxAttempts and Timeout of the dead-letter kind, as
	// an enqueue would set them.
	SchemaVersion int
	MaxAttempts   int
	Timeout       time.Duration
	// PayloadLimit bounds the dead-letter payload; past it the dead job's
	// payload is left out.
	PayloadLimit int
	// Actor of the retry event of a dead-letter job that exists.
	Actor string
}

// DeadLetterRoutes are the routes of a claim's deadline deaths, per kind
// of the dead job: a kind's own rule, else Default.
type DeadLetterRoutes struct {
	ByKind  map[string]*DeadLetterRoute
	Default *DeadLetterRoute
}

// For is the route of a death of a job of kind, nil when it has none.
func (r *DeadLetterRoutes) For(kind string) *DeadLetterRoute {
	if r == nil {
		return nil
	}
	if k, ok := r.ByKind[kind]; ok {
		return k
	}
	return r.Default
}

// deadLetterRoute resolves rule for the engine's kinds and limits.
func (e *Engine) deadLetterRoute(rule *DeadLetterRule, actor string) *DeadLetterRoute {
	if rule == nil || rule.Kind == "" {
		return nil
	}
	r := &DeadLetterRoute{Kind: rule.Kind, Queue: rule.Queue, SchemaVersion: 1,
		MaxAttempts: e.cfg.MaxAttempts, PayloadLimit: e.cfg.PayloadLimit, Actor: actor}
	if k := e.kind(rule.Kind); k != nil {
		r.SchemaVersion, r.Timeout = max(k.Version, 1), k.Timeout
		if k.MaxAttempts > 0 {
			r.MaxAttempts = k.MaxAttempts
		}
	}
	return r
}

// claimDeadLetterRoutes resolves the routes of deadline deaths at claim,
// once at Start (kinds are registered before it): every registered kind
// with a rule of its own, and the default for the others.
func (e *Engine) claimDeadLetterRoutes() *DeadLetterRoutes {
	e.mu.RLock()
	rules := map[string]*DeadLetterRule{}
	for name, k := range e.kinds {
		if k.DeadLetter != nil {
			rules[name] = k.DeadLetter
		}
	}
	e.mu.RUnlock()
	actor := e.cfg.WorkerID
	out := &DeadLetterRoutes{ByKind: map[string]*DeadLetterRoute{}, Default: e.deadLetterRoute(e.cfg.DeadLetter, actor)}
	for name, rule := range rules {
		// A kind's rule with no kind named routes nowhere, default or not.
		out.ByKind[name] = e.deadLetterRoute(rule, actor)
	}
	if out.Default == nil {
		for name, r := range out.ByKind {
			if r == nil {
				delete(out.ByKind, name)
			}
		}
		if len(out.ByKind) == 0 {
			return nil
		}
	}
	return out
}

// DeadLetterFor builds the dead-letter route of j's death by r with the
// death's message and reason, or nil when there is none (r nil, or j is
// itself a dead-letter job). j must carry its payload. It is the one
// builder of routes: the engine's for the deaths it writes, the stores'
// for the deaths a claim finds.
func DeadLetterFor(r *DeadLetterRoute, j *Job, message string, reason TerminalReason) (*DeadLetterWrite, error) {
	if r == nil || r.Kind == "" || IsDeadLetter(j.ID) {
		return nil, nil
	}
	id := DeadLetterID(j.ID)
	if err := ValidateJobID(id); err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	queue := r.Queue
	if queue == "" {
		queue = j.Queue
	}
	if err := validName("queue", queue); err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	if err := validName("kind", r.Kind); err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	body := DeadLetterPayload{
		DeadJobID: j.ID, Kind: j.Kind, Queue: j.Queue,
		Payload: j.Payload, Error: message, Reason: reason,
	}
	if len(body.Payload) == 0 {
		body.Payload = json.RawMessage(`null`)
	}
	limit := r.PayloadLimit
	if limit <= 0 {
		limit = 1 << 20
	}
	raw, err := json.Marshal(body)
	if err == nil && len(raw) > limit && len(j.Payload) > 0 {
		// Too large with the dead job's payload: route the death without
		// it; the dead job keeps it.
		body.Payload = json.RawMessage(`null`)
		raw, err = json.Marshal(body)
	}
	if err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	payload, err := ValidatePayload(raw, limit)
	if err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	fp, err := FingerprintOf(r.Kind, payload)
	if err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	maxAttempts := r.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 1
	}
	return &DeadLetterWrite{
		Job: &JobInsertParams{ID: id, Queue: queue, Kind: r.Kind, Payload: payload,
			SchemaVersion: max(r.SchemaVersion, 1), MaxAttempts: maxAttempts, Fingerprint: fp, Timeout: r.Timeout},
		RetryEvent: EventWrite{Kind: EventRetried, Actor: r.Actor, To: StateAvailable,
			Message: fmt.Sprintf("job %s died again (%s): %s", j.ID, reason, message)},
	}, nil
}

// withPayloadForDeath returns j with its payload when its death is routed
// and it came without one (the reaper lists jobs without payloads).
func (e *Engine) withPayloadForDeath(ctx context.Context, j *Job, row Transition) *Job {
	if len(j.Payload) > 0 || !routesDeath(j, row) {
		return j
	}
	if r := e.deadLetterRule(j.Kind); r == nil || r.Kind == "" {
		return j
	}
	full, err := e.store.JobGetByID(ctx, &JobGetByIDParams{ID: j.ID, IncludePayload: true})
	if err != nil {
		// The route still goes; its payload field is null.
		e.log.Warn("dead letter: read payload", "job", j.ID, "err", err)
		return j
	}
	c := j.Clone()
	c.Payload = full.Payload
	return c
}

// deadLetterOf returns the id of j's dead-letter job, "" when it has
// none. Only a job that may have died is looked for: one dead now, or
// with an attempt or a crash behind it (it died and was redriven).
func (e *Engine) deadLetterOf(ctx context.Context, j *Job) (string, error) {
	if IsDeadLetter(j.ID) || (j.State != StateArchived && j.State != StateQuarantined && j.Attempt == 0 && j.CrashAttempt == 0) {
		return "", nil
	}
	id := DeadLetterID(j.ID)
	if ValidateJobID(id) != nil {
		return "", nil
	}
	if _, err := e.store.JobGetByID(ctx, &JobGetByIDParams{ID: id}); err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", nil
		}
		return "", fmt.Errorf("job %s: dead letter: %w", j.ID, err)
	}
	return id, nil
}

// warnDeadLetterRules logs each rule naming a kind with no handler here.
func (e *Engine) warnDeadLetterRules() {
	e.mu.RLock()
	defer e.mu.RUnlock()
	rules := map[string][]string{} // dead-letter kind -> kinds routing to it
	if r := e.cfg.DeadLetter; r != nil && r.Kind != "" {
		rules[r.Kind] = append(rules[r.Kind], "(default)")
	}
	for name, k := range e.kinds {
		if k.DeadLetter != nil && k.DeadLetter.Kind != "" {
			rules[k.DeadLetter.Kind] = append(rules[k.DeadLetter.Kind], name)
		}
	}
	for dk, from := range rules {
		if _, ok := e.kinds[dk]; ok {
			continue
		}
		sort.Strings(from)
		e.log.Warn("dead-letter kind has no handler in this engine", "dead_letter_kind", dk, "routed_from", strings.Join(from, ","))
	}
}
