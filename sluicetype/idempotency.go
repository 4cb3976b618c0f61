package sluicetype

import (
	"encoding/json"
	"time"
)

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
