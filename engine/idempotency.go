package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
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

// IdempotencyStore is the capability of a store that keeps idempotency
// keys. A store that has it declares CapabilityIdempotency and keeps these
// rules (backend/backendtest checks them):
//
//   - IdempotencyClaim is atomic: of two concurrent claims of a free key,
//     one gets the token, the other ErrIdempotencyInFlight.
//   - Every write transaction whose context carries a key
//     (IdempotencyWriteFrom) checks, in that transaction, that the key is
//     in flight under that token, and records the write as the step the
//     context names, with the result the method returns (JSON). Without
//     the claim it fails with ErrIdempotencyInFlight and changes nothing;
//     a step recorded before fails it with ErrConflict.
//   - Records expire TTL after their claim; an expired record is treated
//     as absent and deleted by IdempotencyDeleteExpired.
type IdempotencyStore interface {
	// IdempotencyClaim claims Key for a request whose content hashes to
	// RequestHash. It returns the claim with a token when the key was
	// free, expired, or held by a claim that expired (the claim then lists
	// the steps the earlier holder committed); the stored response
	// (Token empty) when the same request completed before;
	// ErrIdempotencyInFlight while another claim holds the key, and
	// ErrIdempotencyMismatch when the key was claimed for another request.
	IdempotencyClaim(ctx context.Context, p *IdempotencyClaimParams) (*IdempotencyClaim, error)
	// IdempotencyRenew extends a claim; ErrIdempotencyInFlight when the
	// token no longer holds the key.
	IdempotencyRenew(ctx context.Context, p *IdempotencyRenewParams) error
	// IdempotencyComplete stores the response of the request that holds
	// the claim and ends the claim: later claims get the response.
	// ErrIdempotencyInFlight when the token no longer holds the key.
	IdempotencyComplete(ctx context.Context, p *IdempotencyCompleteParams) error
	// IdempotencyRelease gives a claim up without a response: the record
	// is deleted when no step was committed under it, else its claim is
	// expired so that the next request takes it over at once.
	IdempotencyRelease(ctx context.Context, p *IdempotencyReleaseParams) error
	// IdempotencyDeleteExpired deletes up to Limit expired records and
	// returns how many.
	IdempotencyDeleteExpired(ctx context.Context, p *IdempotencyDeleteExpiredParams) (int, error)
}

type IdempotencyClaimParams struct {
	// Key is already scoped by the caller (the API: to caller, method and
	// path).
	Key string
	// RequestHash identifies the request's content: the same key with
	// another hash is ErrIdempotencyMismatch.
	RequestHash string
	// TTL is how long the record lives (DefaultIdempotencyTTL when 0).
	TTL time.Duration
	// ClaimTTL is how long the claim holds without renewal
	// (DefaultIdempotencyClaimTTL when 0).
	ClaimTTL time.Duration
}

// IdempotencyClaim is what IdempotencyClaim found.
type IdempotencyClaim struct {
	Key string
	// Token is set when this call holds the key; the mutation runs with
	// WithIdempotency and ends with IdempotencyComplete or
	// IdempotencyRelease.
	Token string
	// Response is the stored response of the request that completed under
	// the key (Token is empty then).
	Response []byte
	// Steps are the results of the steps an earlier holder of the key
	// committed before its claim expired, by step name.
	Steps map[string]json.RawMessage
	// ExpiresAt is when the record expires.
	ExpiresAt time.Time
}

type IdempotencyRenewParams struct {
	Key      string
	Token    string
	ClaimTTL time.Duration
}

type IdempotencyCompleteParams struct {
	Key      string
	Token    string
	Response []byte
}

type IdempotencyReleaseParams struct {
	Key   string
	Token string
}

type IdempotencyDeleteExpiredParams struct {
	Limit int
}

// IdempotencyParams is the key a mutation runs under, from a claim.
type IdempotencyParams struct {
	Key   string
	Token string
	// Steps are the claim's recorded steps: the engine answers them with
	// their results instead of running them again.
	Steps map[string]json.RawMessage
}

// IdempotencyWrite names the key, claim token and step a store write runs
// under.
type IdempotencyWrite struct {
	Key, Token, Step string
}

// idemStepMain names the one write of a mutation that makes one.
const idemStepMain = "main"

type idemKey struct{}

// idemValue is what the context carries: the key, and the step the next
// write is.
type idemValue struct {
	p    *IdempotencyParams // nil: WithoutIdempotency
	step string
}

// WithIdempotency runs the mutations made with the returned context under
// p's key: the store commits each write with its step record.
func WithIdempotency(ctx context.Context, p IdempotencyParams) context.Context {
	return context.WithValue(ctx, idemKey{}, &idemValue{p: &p, step: idemStepMain})
}

// WithoutIdempotency returns ctx without a key: its writes are not steps
// of a keyed mutation.
func WithoutIdempotency(ctx context.Context) context.Context {
	if _, ok := ctx.Value(idemKey{}).(*idemValue); !ok {
		return ctx
	}
	return context.WithValue(ctx, idemKey{}, &idemValue{})
}

// IdempotencyWriteFrom returns the key a store write made with ctx runs
// under, if any. It costs one context lookup when there is none.
func IdempotencyWriteFrom(ctx context.Context) (IdempotencyWrite, bool) {
	v, ok := ctx.Value(idemKey{}).(*idemValue)
	if !ok || v.p == nil {
		return IdempotencyWrite{}, false
	}
	return IdempotencyWrite{Key: v.p.Key, Token: v.p.Token, Step: v.step}, true
}

// withIdempotencyStep names the step the writes made with the returned
// context are; ctx without a key is returned as it is.
func withIdempotencyStep(ctx context.Context, step string) context.Context {
	v, ok := ctx.Value(idemKey{}).(*idemValue)
	if !ok || v.p == nil {
		return ctx
	}
	return context.WithValue(ctx, idemKey{}, &idemValue{p: v.p, step: step})
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

func (e *Engine) idempotencyStore() (IdempotencyStore, error) {
	if !Declares(e.store, CapabilityIdempotency) {
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
// then expired idempotency records.
func (e *Engine) sweepExpired(ctx context.Context) error {
	return errors.Join(e.sweepRetention(ctx), e.sweepIdempotency(ctx))
}

// sweepIdempotency deletes expired idempotency records, in bounded
// batches.
func (e *Engine) sweepIdempotency(ctx context.Context) error {
	is, err := e.idempotencyStore()
	if err != nil {
		return nil
	}
	for range 10 {
		n, err := is.IdempotencyDeleteExpired(ctx, &IdempotencyDeleteExpiredParams{Limit: maintenanceBatch})
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

// jobInsertResultJSON is a JobInsertResult as a step records it.
type jobInsertResultJSON struct {
	Job      *Job   `json:"job,omitempty"`
	Existing bool   `json:"existing,omitempty"`
	Error    string `json:"error,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// MarshalJSON keeps the error as its message and reason code.
func (r JobInsertResult) MarshalJSON() ([]byte, error) {
	v := jobInsertResultJSON{Job: r.Job, Existing: r.Existing}
	if r.Err != nil {
		v.Error, v.Reason = r.Err.Error(), ReasonCode(r.Err)
	}
	return json.Marshal(v)
}

// UnmarshalJSON restores the error as one that matches the sentinel its
// reason code names.
func (r *JobInsertResult) UnmarshalJSON(b []byte) error {
	var v jobInsertResultJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = JobInsertResult{Job: v.Job, Existing: v.Existing}
	if v.Error != "" || v.Reason != "" {
		r.Err = &recordedError{msg: v.Error, sentinel: sentinelOf(v.Reason)}
	}
	return nil
}

// recordedError is an error read back from a record: its message, and
// the sentinel its reason code names.
type recordedError struct {
	msg      string
	sentinel error
}

func (e *recordedError) Error() string { return e.msg }
func (e *recordedError) Unwrap() error { return e.sentinel }

// sentinelOf is the sentinel a ReasonCode names.
func sentinelOf(reason string) error {
	for _, s := range []error{ErrNotFound, ErrWrongState, ErrQuarantined, ErrConflict, ErrInvalid, ErrUnsupported} {
		if ReasonCode(s) == reason {
			return s
		}
	}
	return errors.New(reason)
}
