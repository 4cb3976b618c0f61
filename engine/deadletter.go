package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/backend"
)

// Dead-letter routing: a dead job handed to a job of its own that triages
// it, written in the same store transaction as the death.

// DeadLetterRule names the kind (and optionally the queue) that triages
// the deaths of a kind.
type DeadLetterRule struct {
	// Kind of the dead-letter job; a kind with no handler registered in
	// the engine is warned about at Start.
	Kind string
	// Queue of the dead-letter job; the dead job's queue when empty.
	Queue string
}

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
func routesDeath(j *Job, row backend.Transition) bool {
	if IsDeadLetter(j.ID) {
		return false
	}
	return row.To == StateArchived || (row.To == StateQuarantined && row.Quarantine)
}

// deadLetterPlan resolves the dead-letter route of j's death, or nil when
// it has none. j must carry its payload (see deadLetterPayloadFor).
func (e *Engine) deadLetterPlan(j *Job, row backend.Transition, message, actor string) (*backend.DeadLetterWrite, error) {
	if !routesDeath(j, row) {
		return nil, nil
	}
	return backend.DeadLetterFor(e.deadLetterRoute(e.deadLetterRule(j.Kind), actor), j, message, row.Reason)
}

// deadLetterRoute resolves rule for the engine's kinds and limits.
func (e *Engine) deadLetterRoute(rule *DeadLetterRule, actor string) *backend.DeadLetterRoute {
	if rule == nil || rule.Kind == "" {
		return nil
	}
	r := &backend.DeadLetterRoute{Kind: rule.Kind, Queue: rule.Queue, SchemaVersion: 1,
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
func (e *Engine) claimDeadLetterRoutes() *backend.DeadLetterRoutes {
	e.mu.RLock()
	rules := map[string]*DeadLetterRule{}
	for name, k := range e.kinds {
		if k.DeadLetter != nil {
			rules[name] = k.DeadLetter
		}
	}
	e.mu.RUnlock()
	actor := e.cfg.WorkerID
	out := &backend.DeadLetterRoutes{ByKind: map[string]*backend.DeadLetterRoute{}, Default: e.deadLetterRoute(e.cfg.DeadLetter, actor)}
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

// withPayloadForDeath returns j with its payload when its death is routed
// and it came without one (the reaper lists jobs without payloads).
func (e *Engine) withPayloadForDeath(ctx context.Context, j *Job, row backend.Transition) *Job {
	if len(j.Payload) > 0 || !routesDeath(j, row) {
		return j
	}
	if r := e.deadLetterRule(j.Kind); r == nil || r.Kind == "" {
		return j
	}
	full, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: j.ID, IncludePayload: true})
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
	if _, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id}); err != nil {
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
