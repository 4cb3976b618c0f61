package backend

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sluicehq/sluice/sluicetype"
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
	IdempotencyClaim(ctx context.Context, p *sluicetype.IdempotencyClaimParams) (*sluicetype.IdempotencyClaim, error)
	// IdempotencyRenew extends a claim; ErrIdempotencyInFlight when the
	// token no longer holds the key.
	IdempotencyRenew(ctx context.Context, p *sluicetype.IdempotencyRenewParams) error
	// IdempotencyComplete stores the response of the request that holds
	// the claim and ends the claim: later claims get the response.
	// ErrIdempotencyInFlight when the token no longer holds the key.
	IdempotencyComplete(ctx context.Context, p *sluicetype.IdempotencyCompleteParams) error
	// IdempotencyRelease gives a claim up without a response: the record
	// is deleted when no step was committed under it, else its claim is
	// expired so that the next request takes it over at once.
	IdempotencyRelease(ctx context.Context, p *sluicetype.IdempotencyReleaseParams) error
	// IdempotencyDeleteExpired deletes up to Limit expired records and
	// returns how many.
	IdempotencyDeleteExpired(ctx context.Context, p *IdempotencyDeleteExpiredParams) (int, error)
}

type IdempotencyDeleteExpiredParams struct {
	Limit int
}

// IdempotencyWrite names the key, claim token and step a store write runs
// under.
type IdempotencyWrite struct {
	Key, Token, Step string
}

// jobInsertResultJSON is a JobInsertResult as a step records it.
type jobInsertResultJSON struct {
	Job      *sluicetype.Job `json:"job,omitempty"`
	Existing bool            `json:"existing,omitempty"`
	Error    string          `json:"error,omitempty"`
	Reason   string          `json:"reason,omitempty"`
}

// MarshalJSON keeps the error as its message and reason code.
func (r JobInsertResult) MarshalJSON() ([]byte, error) {
	v := jobInsertResultJSON{Job: r.Job, Existing: r.Existing}
	if r.Err != nil {
		v.Error, v.Reason = r.Err.Error(), sluicetype.ReasonCode(r.Err)
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
	for _, s := range []error{sluicetype.ErrNotFound, sluicetype.ErrWrongState, sluicetype.ErrQuarantined, sluicetype.ErrConflict, sluicetype.ErrInvalid, sluicetype.ErrUnsupported} {
		if sluicetype.ReasonCode(s) == reason {
			return s
		}
	}
	return errors.New(reason)
}

type idemWriteKey struct{}

// idemWriteValue is what the context carries: nil for a context stripped
// of its key (WithoutIdempotencyWrite).
type idemWriteValue struct{ w *IdempotencyWrite }

// WithIdempotencyWrite returns ctx whose store writes run under w: each
// checks w's claim and records itself as w's step, in its transaction.
// The engine sets it (engine.WithIdempotency); a store reads it with
// IdempotencyWriteFrom.
func WithIdempotencyWrite(ctx context.Context, w IdempotencyWrite) context.Context {
	return context.WithValue(ctx, idemWriteKey{}, idemWriteValue{w: &w})
}

// WithoutIdempotencyWrite returns ctx whose writes run under no key: a
// store's own bookkeeping inside a keyed request.
func WithoutIdempotencyWrite(ctx context.Context) context.Context {
	if _, ok := ctx.Value(idemWriteKey{}).(idemWriteValue); !ok {
		return ctx
	}
	return context.WithValue(ctx, idemWriteKey{}, idemWriteValue{})
}

// IdempotencyWriteFrom returns the key a store write made with ctx runs
// under, if any. It costs one context lookup when there is none.
func IdempotencyWriteFrom(ctx context.Context) (IdempotencyWrite, bool) {
	v, ok := ctx.Value(idemWriteKey{}).(idemWriteValue)
	if !ok || v.w == nil {
		return IdempotencyWrite{}, false
	}
	return *v.w, true
}
