package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
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
	rule := e.deadLetterRule(j.Kind)
	if rule == nil || rule.Kind == "" {
		return nil, nil
	}
	queue := rule.Queue
	if queue == "" {
		queue = j.Queue
	}
	body := DeadLetterPayload{
		DeadJobID: j.ID, Kind: j.Kind, Queue: j.Queue,
		Payload: j.Payload, Error: message, Reason: row.Reason,
	}
	if len(body.Payload) == 0 {
		body.Payload = json.RawMessage(`null`)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	ins, err := e.insertParams(&EnqueueParams{ID: DeadLetterID(j.ID), Queue: queue, Kind: rule.Kind, Payload: raw})
	if err != nil && len(j.Payload) > 0 {
		// Too large with the dead job's payload (or otherwise refused):
		// route the death without it; the dead job keeps it.
		body.Payload = json.RawMessage(`null`)
		if raw, err = json.Marshal(body); err == nil {
			ins, err = e.insertParams(&EnqueueParams{ID: DeadLetterID(j.ID), Queue: queue, Kind: rule.Kind, Payload: raw})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	return &DeadLetterWrite{
		Job: ins,
		RetryEvent: EventWrite{Kind: EventRetried, Actor: actor, To: StateAvailable,
			Message: fmt.Sprintf("job %s died again (%s): %s", j.ID, row.Reason, message)},
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
