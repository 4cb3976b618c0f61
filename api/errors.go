package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Errors of the transport itself, beside the engine's sentinels.
var (
	// ErrUnauthorized: no bearer token, or one the server does not know.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the caller's role (or the server's read-only mode)
	// does not allow the request.
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable: the server or its store cannot answer now; a retry
	// later may succeed.
	ErrUnavailable = errors.New("unavailable")
	// ErrIdempotency: an Idempotency-Key was reused for another request,
	// or is still in use by a request in flight.
	ErrIdempotency = errors.New("idempotency key conflict")
)

// Reasons: the short codes in an error body's "reason" field. The client
// maps them back to sentinel errors; the status code alone is ambiguous
// (409 is a conflict or a wrong state).
const (
	reasonInvalid             = "invalid"
	reasonPayloadTooLarge     = "payload_too_large"
	reasonBodyTooLarge        = "body_too_large"
	reasonBodyTimeout         = "body_timeout"
	reasonUnsupportedMedia    = "unsupported_media_type"
	reasonNotFound            = "not_found"
	reasonConflict            = "conflict"
	reasonWrongState          = "wrong_state"
	reasonQuarantined         = "quarantined"
	reasonUnsupported         = "unsupported"
	reasonUnavailable         = "unavailable"
	reasonUnauthorized        = "unauthorized"
	reasonForbidden           = "forbidden"
	reasonReadOnly            = "read_only"
	reasonMethodNotAllowed    = "method_not_allowed"
	reasonPreconditionNeeded  = "precondition_required"
	reasonIdempotencyMissing  = "idempotency_key_missing"
	reasonIdempotencyInFlight = "idempotency_in_flight"
	reasonIdempotencyMismatch = "idempotency_mismatch"
	reasonInternal            = "internal"
)

// errorBody is the JSON body of every error response.
type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
	// Role and Needs name the caller's role and the one required (403).
	Role  engine.Role `json:"role,omitempty"`
	Needs engine.Role `json:"needs,omitempty"`
}

// httpError is an error with the status and body it answers with.
type httpError struct {
	status int
	body   errorBody
}

func (e *httpError) Error() string { return e.body.Error }

func newHTTPError(status int, reason, format string, args ...any) *httpError {
	return &httpError{status: status, body: errorBody{Error: fmt.Sprintf(format, args...), Reason: reason}}
}

func badRequest(format string, args ...any) *httpError {
	return newHTTPError(http.StatusBadRequest, reasonInvalid, format, args...)
}

// errorResponse turns an error from the engine (or the server itself) into
// a status code and body. Errors that name no sentinel are taken for the
// store being unreachable: 503, which a client may retry.
func errorResponse(err error) (int, errorBody) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, he.body
	}
	msg := err.Error()
	switch {
	case errors.Is(err, engine.ErrPayloadTooLarge):
		return http.StatusRequestEntityTooLarge, errorBody{Error: msg, Reason: reasonPayloadTooLarge}
	case errors.Is(err, engine.ErrInvalid):
		return http.StatusBadRequest, errorBody{Error: msg, Reason: reasonInvalid}
	case errors.Is(err, engine.ErrNotFound):
		return http.StatusNotFound, errorBody{Error: msg, Reason: reasonNotFound}
	case errors.Is(err, engine.ErrWrongState), errors.Is(err, engine.ErrInvalidTransition):
		return http.StatusConflict, errorBody{Error: msg, Reason: reasonWrongState}
	case errors.Is(err, engine.ErrConflict):
		return http.StatusConflict, errorBody{Error: msg, Reason: reasonConflict}
	case errors.Is(err, engine.ErrQuarantined):
		return http.StatusLocked, errorBody{Error: msg, Reason: reasonQuarantined}
	case errors.Is(err, engine.ErrUnsupported):
		return http.StatusNotImplemented, errorBody{Error: msg, Reason: reasonUnsupported}
	case errors.Is(err, engine.ErrIdempotencyInFlight):
		return http.StatusConflict, errorBody{Error: msg, Reason: reasonIdempotencyInFlight}
	case errors.Is(err, engine.ErrIdempotencyMismatch):
		return http.StatusUnprocessableEntity, errorBody{Error: msg, Reason: reasonIdempotencyMismatch}
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, errorBody{Error: msg, Reason: reasonForbidden}
	}
	// ErrClosed, a deadline, a driver error: the store is not answering.
	return http.StatusServiceUnavailable, errorBody{Error: msg, Reason: reasonUnavailable}
}

// Error is an error answer from the server. It unwraps to the engine
// sentinel (or this package's) that its status and reason name, so
// errors.Is(err, engine.ErrNotFound) works on the client as on the engine.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Reason is the short code of the error body (not_found, wrong_state,
	// ...), empty when the body had none.
	Reason string
	// Message is the server's message.
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Message
}

// Unwrap returns the sentinels the error stands for.
func (e *Error) Unwrap() []error {
	switch e.Reason {
	case reasonPayloadTooLarge:
		return []error{engine.ErrPayloadTooLarge, engine.ErrInvalid}
	case reasonInvalid, reasonBodyTooLarge, reasonBodyTimeout, reasonUnsupportedMedia, reasonIdempotencyMissing, reasonPreconditionNeeded:
		return []error{engine.ErrInvalid}
	case reasonNotFound:
		return []error{engine.ErrNotFound}
	case reasonWrongState:
		return []error{engine.ErrWrongState}
	case reasonConflict:
		return []error{engine.ErrConflict}
	case reasonQuarantined:
		return []error{engine.ErrQuarantined}
	case reasonUnsupported:
		return []error{engine.ErrUnsupported}
	case reasonUnauthorized:
		return []error{ErrUnauthorized, engine.ErrDenied}
	case reasonForbidden, reasonReadOnly:
		return []error{ErrForbidden, engine.ErrDenied}
	case reasonIdempotencyInFlight:
		return []error{ErrIdempotency, engine.ErrIdempotencyInFlight}
	case reasonIdempotencyMismatch:
		return []error{ErrIdempotency, engine.ErrIdempotencyMismatch}
	case reasonUnavailable:
		return []error{ErrUnavailable}
	}
	switch {
	case e.Status == http.StatusRequestEntityTooLarge:
		return []error{engine.ErrPayloadTooLarge, engine.ErrInvalid}
	case e.Status == http.StatusNotFound:
		return []error{engine.ErrNotFound}
	case e.Status == http.StatusConflict, e.Status == http.StatusPreconditionFailed:
		return []error{engine.ErrConflict}
	case e.Status == http.StatusLocked:
		return []error{engine.ErrQuarantined}
	case e.Status == http.StatusNotImplemented:
		return []error{engine.ErrUnsupported}
	case e.Status == http.StatusUnauthorized:
		return []error{ErrUnauthorized, engine.ErrDenied}
	case e.Status == http.StatusForbidden:
		return []error{ErrForbidden, engine.ErrDenied}
	case e.Status == http.StatusServiceUnavailable, e.Status == http.StatusBadGateway, e.Status == http.StatusGatewayTimeout:
		return []error{ErrUnavailable}
	case e.Status >= 400 && e.Status < 500:
		return []error{engine.ErrInvalid}
	}
	return nil
}

// decodeError reads an error response's body into an *Error.
func decodeError(status int, body []byte) *Error {
	e := &Error{Status: status}
	var b errorBody
	if json.Unmarshal(body, &b) == nil && b.Error != "" {
		e.Message, e.Reason = b.Error, b.Reason
		return e
	}
	e.Message = strings.TrimSpace(string(body))
	if len(e.Message) > 200 {
		e.Message = e.Message[:200]
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("%d %s", status, http.StatusText(status))
	}
	return e
}

// isCanceled reports whether err is the caller's own context ending.
func isCanceled(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
