package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/backend"
)

// Idempotency keys committed with the mutation.
//
// A caller that must not run a mutation twice (the HTTP API, for a request
// retried with the same Idempotency-Key) claims its key in the store
// (IdempotencyClaim), runs the mutation with the key on the context
// (WithIdempotency), and stores its answer (IdempotencyComplete). Every
// write transaction the mutation makes under the key checks, in that same
// transaction, that the claim is still the caller's and records itself as
// a step with its result. So:
//
//   - a crash cannot lose the record of a committed mutation: the step
//     commits with it;
//   - a mutation never runs twice: a second request with the key is told
//     the first is in flight (ErrIdempotencyInFlight) until the first
//     completes (it then gets the stored answer) or its claim expires (it
//     then takes the claim over, and the engine answers the steps already
//     committed with their recorded results instead of running them);
//   - a claim holder that lost its claim (it stalled past the claim's
//     expiry and another request took the key over) has its writes
//     refused with ErrIdempotencyInFlight, changing nothing.

// Defaults of IdempotencyClaimParams.
const (
	DefaultIdempotencyTTL      = 24 * time.Hour
	DefaultIdempotencyClaimTTL = time.Minute
)

// IdempotencyParams is the key a mutation runs under, from a claim.
type IdempotencyParams struct {
	Key   string
	Token string
	// Steps are the claim's recorded steps: the engine answers them with
	// their results instead of running them again.
	Steps map[string]json.RawMessage
}

// idemStepMain names the one write of a mutation that makes one.
const idemStepMain = "main"

type idemKey struct{}

// idemValue is what the context carries for the engine: the key and its
// recorded steps, and the step the next write is. The store reads the
// same key, token and step from backend.IdempotencyWriteFrom.
type idemValue struct {
	p    *IdempotencyParams // nil: WithoutIdempotency
	step string
}

// WithIdempotency runs the mutations made with the returned context under
// p's key: the store commits each write with its step record.
func WithIdempotency(ctx context.Context, p IdempotencyParams) context.Context {
	return withIdempotency(ctx, &idemValue{p: &p, step: idemStepMain})
}

// WithoutIdempotency returns ctx without a key: its writes are not steps
// of a keyed mutation.
func WithoutIdempotency(ctx context.Context) context.Context {
	if _, ok := ctx.Value(idemKey{}).(*idemValue); !ok {
		return ctx
	}
	return withIdempotency(ctx, &idemValue{})
}

// withIdempotencyStep names the step the writes made with the returned
// context are; ctx without a key is returned as it is.
func withIdempotencyStep(ctx context.Context, step string) context.Context {
	v, ok := ctx.Value(idemKey{}).(*idemValue)
	if !ok || v.p == nil {
		return ctx
	}
	return withIdempotency(ctx, &idemValue{p: v.p, step: step})
}

// withIdempotency puts v on ctx for the engine and its write for the
// store.
func withIdempotency(ctx context.Context, v *idemValue) context.Context {
	ctx = context.WithValue(ctx, idemKey{}, v)
	if v.p == nil {
		return backend.WithoutIdempotencyWrite(ctx)
	}
	return backend.WithIdempotencyWrite(ctx, backend.IdempotencyWrite{Key: v.p.Key, Token: v.p.Token, Step: v.step})
}

// replayed returns the recorded result of the step ctx names when an
// earlier holder of its key committed it: the caller returns that instead
// of writing again.
func replayed[T any](ctx context.Context) (T, bool, error) {
	var zero T
	v, ok := ctx.Value(idemKey{}).(*idemValue)
	if !ok || v.p == nil || len(v.p.Steps) == 0 {
		return zero, false, nil
	}
	raw, ok := v.p.Steps[v.step]
	if !ok {
		return zero, false, nil
	}
	var out T
	if len(raw) == 0 || string(raw) == "null" {
		return out, true, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return zero, true, fmt.Errorf("idempotency key: recorded result of step %s: %v", v.step, err)
	}
	return out, true, nil
}

// applyStep names the step of Apply's i-th id.
func applyStep(i int) string { return "apply/" + strconv.Itoa(i) }

// ---- The engine's side ----

func (e *Engine) idempotencyStore() (backend.IdempotencyStore, error) {
	if !backend.Declares(e.store, backend.CapabilityIdempotency) {
		return nil, fmt.Errorf("%w: the %s store keeps no idempotency keys", ErrUnsupported, e.store.Backend())
	}
	return e.store, nil
}

// IdempotencyDurable reports whether the engine's store keeps idempotency
// keys, committed with the mutations made under them.
func (e *Engine) IdempotencyDurable() bool {
	_, err := e.idempotencyStore()
	return err == nil
}

// IdempotencyClaim claims a key in the store (see IdempotencyStore).
func (e *Engine) IdempotencyClaim(ctx context.Context, p *IdempotencyClaimParams) (*IdempotencyClaim, error) {
	is, err := e.idempotencyStore()
	if err != nil {
		return nil, err
	}
	if p.Key == "" {
		return nil, fmt.Errorf("%w: empty idempotency key", ErrInvalid)
	}
	q := *p
	if q.TTL <= 0 {
		q.TTL = DefaultIdempotencyTTL
	}
	if q.ClaimTTL <= 0 {
		q.ClaimTTL = DefaultIdempotencyClaimTTL
	}
	return is.IdempotencyClaim(WithoutIdempotency(ctx), &q)
}

// IdempotencyRenew extends a claim.
func (e *Engine) IdempotencyRenew(ctx context.Context, p *IdempotencyRenewParams) error {
	is, err := e.idempotencyStore()
	if err != nil {
		return err
	}
	q := *p
	if q.ClaimTTL <= 0 {
		q.ClaimTTL = DefaultIdempotencyClaimTTL
	}
	return is.IdempotencyRenew(WithoutIdempotency(ctx), &q)
}

// IdempotencyComplete stores a claimed request's response.
func (e *Engine) IdempotencyComplete(ctx context.Context, p *IdempotencyCompleteParams) error {
	is, err := e.idempotencyStore()
	if err != nil {
		return err
	}
	return is.IdempotencyComplete(WithoutIdempotency(ctx), p)
}

// IdempotencyRelease gives a claim up without a response.
func (e *Engine) IdempotencyRelease(ctx context.Context, p *IdempotencyReleaseParams) error {
	is, err := e.idempotencyStore()
	if err != nil {
		return err
	}
	return is.IdempotencyRelease(WithoutIdempotency(ctx), p)
}

// sweepExpired is the retention task: terminal jobs past their retention,
// then expired idempotency records and audit records.
func (e *Engine) sweepExpired(ctx context.Context) error {
	return errors.Join(e.sweepRetention(ctx), e.sweepIdempotency(ctx), e.sweepAudit(ctx))
}

// sweepIdempotency deletes expired idempotency records, in bounded
// batches.
func (e *Engine) sweepIdempotency(ctx context.Context) error {
	is, err := e.idempotencyStore()
	if err != nil {
		return nil
	}
	for range 10 {
		n, err := is.IdempotencyDeleteExpired(ctx, &backend.IdempotencyDeleteExpiredParams{Limit: maintenanceBatch})
		if err != nil {
			return fmt.Errorf("idempotency sweep: %w", err)
		}
		if n < maintenanceBatch {
			return nil
		}
	}
	return nil
}

// ---- Results that travel as JSON ----
