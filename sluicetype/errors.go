package sluicetype

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Callers match them with errors.Is; the engine and the
// backends wrap them with the id or value that failed.
var (
	// ErrLeaseLost: a worker's write named a lease or fence that is no
	// longer the job's. Nothing was changed.
	ErrLeaseLost = errors.New("lease lost")
	// ErrQuarantined: the job's fingerprint is quarantined; enqueues and
	// retries of it are refused until it is released.
	ErrQuarantined = errors.New("fingerprint quarantined")
	// ErrNotFound: no job (or fingerprint, operation, error group) with
	// that id.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a job with that id exists with other content, or a
	// concurrent change won.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the input breaks a documented rule (bad JSON, a name
	// outside the pattern, an oversized payload, ...).
	ErrInvalid = errors.New("invalid input")
	// ErrPayloadTooLarge: a payload over the configured limit. It wraps
	// ErrInvalid too.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrInvalidTransition: no row of the transition table applies.
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrWrongState: an operator action on a job in a state it does not
	// apply to.
	ErrWrongState = errors.New("wrong state")
	// ErrUnsupported: the backend lacks a capability the call needs.
	ErrUnsupported = errors.New("not supported by this backend")
	// ErrClosed: the engine or store has been stopped.
	ErrClosed = errors.New("closed")
	// ErrBusy: another write held the job's row, and the store passed it
	// by rather than wait (a lease renewal of a job whose completion is
	// committing). Nothing was changed; the next attempt may succeed.
	ErrBusy = errors.New("busy")
	// ErrDenied: the caller may not do this: a credential the server does
	// not know, or a role (or a read-only server) that forbids it. Only a
	// Control that checks its callers returns it (the HTTP client, as
	// api.ErrUnauthorized and api.ErrForbidden); asking again will not
	// help.
	ErrDenied = errors.New("denied")
)

// Idempotency keys (see IdempotencyStore).
var (
	// ErrIdempotencyInFlight: another request holds the idempotency key
	// (its claim has not expired), or took it over from this one. Nothing
	// was changed.
	ErrIdempotencyInFlight = errors.New("idempotency key in flight")
	// ErrIdempotencyMismatch: the idempotency key was claimed for another
	// request.
	ErrIdempotencyMismatch = errors.New("idempotency key used for another request")
)

// StateError: the job is not in a state the action takes.
type StateError struct {
	Action  Action
	ID      string
	State   State
	Allowed []State
}

func (e *StateError) Error() string {
	names := make([]string, len(e.Allowed))
	for i, s := range e.Allowed {
		names[i] = string(s)
	}
	return fmt.Sprintf("%s job %s: %v: it is %s; %s applies to %s", e.Action, e.ID, ErrWrongState, e.State, e.Action,
		strings.Join(names, ", "))
}

func (e *StateError) Unwrap() error { return ErrWrongState }

// SupersededError: the job was superseded by By, its retry with new input
// or its replay from a step.
type SupersededError struct {
	ID, By string
}

func (e *SupersededError) Error() string {
	return fmt.Sprintf("retry job %s: %v: it is superseded by %s, its retry with new input or replay (force to retry it anyway, and run its side effects again)", e.ID, ErrConflict, e.By)
}

func (e *SupersededError) Unwrap() error { return ErrConflict }

// QuarantinedError: the job's fingerprint is quarantined.
type QuarantinedError struct {
	Verb        string
	ID          string
	Fingerprint string
}

func (e *QuarantinedError) Error() string {
	return fmt.Sprintf("%s job %s: %v: %s", e.Verb, e.ID, ErrQuarantined, e.Fingerprint)
}

func (e *QuarantinedError) Unwrap() error { return ErrQuarantined }

// VersionError: the job changed since the version an edit was made on.
type VersionError struct {
	ID         string
	Have, Want int64
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("edit payload of job %s: %v: the job changed (version %d, the edit was made on %d)", e.ID, ErrConflict, e.Have, e.Want)
}

func (e *VersionError) Unwrap() error { return ErrConflict }

// ReasonCode turns an error into the short code Apply reports.
func ReasonCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrWrongState):
		return "wrong_state"
	case errors.Is(err, ErrQuarantined):
		return "quarantined"
	case errors.As(err, new(*UniqueHeldError)):
		return "unique_held"
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrUnsupported):
		return "unsupported"
	}
	return "error"
}

// IDTakenError refuses an insert whose id names a job with other content
// (an insert of the same content returns the existing job instead).
type IDTakenError struct {
	ID string
}

func (e *IDTakenError) Error() string {
	return fmt.Sprintf("insert job %s: %v: the id exists with other content", e.ID, ErrConflict)
}

// Unwrap makes the error match ErrConflict.
func (e *IDTakenError) Unwrap() error { return ErrConflict }

// ClaimLostError refuses an idempotency write (renew, complete, release)
// whose claim no longer holds its key: it expired and another request
// took the key over.
type ClaimLostError struct {
	// Op is the write refused: "renew", "complete" or "release".
	Op string
}

func (e *ClaimLostError) Error() string {
	return fmt.Sprintf("idempotency %s: %v: the claim no longer holds the key", e.Op, ErrIdempotencyInFlight)
}

// Unwrap makes the error match ErrIdempotencyInFlight.
func (e *ClaimLostError) Unwrap() error { return ErrIdempotencyInFlight }
