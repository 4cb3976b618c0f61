package backend

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

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

// DeadLetterFor builds the dead-letter route of j's death by r with the
// death's message and reason, or nil when there is none (r nil, or j is
// itself a dead-letter job). j must carry its payload. It is the one
// builder of routes: the engine's for the deaths it writes, the stores'
// for the deaths a claim finds.
func DeadLetterFor(r *DeadLetterRoute, j *sluicetype.Job, message string, reason sluicetype.TerminalReason) (*DeadLetterWrite, error) {
	if r == nil || r.Kind == "" || sluicetype.IsDeadLetter(j.ID) {
		return nil, nil
	}
	id := sluicetype.DeadLetterID(j.ID)
	if err := sluicetype.ValidateJobID(id); err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	queue := r.Queue
	if queue == "" {
		queue = j.Queue
	}
	if err := sluicetype.ValidateName("queue", queue); err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	if err := sluicetype.ValidateName("kind", r.Kind); err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	body := sluicetype.DeadLetterPayload{
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
	payload, err := sluicetype.ValidatePayload(raw, limit)
	if err != nil {
		return nil, fmt.Errorf("dead letter of job %s: %w", j.ID, err)
	}
	fp, err := sluicetype.FingerprintOf(r.Kind, payload)
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
		RetryEvent: EventWrite{Kind: sluicetype.EventRetried, Actor: r.Actor, To: sluicetype.StateAvailable,
			Message: fmt.Sprintf("job %s died again (%s): %s", j.ID, reason, message)},
	}, nil
}
