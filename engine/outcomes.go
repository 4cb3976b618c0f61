package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
)

// Handler outcomes other than success and an ordinary error. A handler
// returns one of these as its error.

type skipError struct{ reason string }

func (e *skipError) Error() string { return "skipped: " + e.reason }

// Skip stops retrying: the job is archived with reason skipped.
func Skip(reason string) error { return &skipError{reason: reason} }

type revokeError struct{}

func (revokeError) Error() string { return "revoked" }

// Revoke deletes the job: the work is no longer wanted.
func Revoke() error { return revokeError{} }

type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.d) }

// Snooze puts the job back to scheduled for d without using an attempt.
func Snooze(d time.Duration) error { return &snoozeError{d: d} }

type undecodableError struct{ err error }

func (e *undecodableError) Error() string { return "undecodable: " + e.err.Error() }
func (e *undecodableError) Unwrap() error { return e.err }

// Undecodable marks the job's payload as one this handler cannot read: the
// job becomes undecodable without spending an attempt.
func Undecodable(err error) error { return &undecodableError{err: err} }

// outcome maps a handler's return to the table's trigger.
func outcome(err error) (backend.Trigger, time.Duration) {
	if err == nil {
		return backend.TriggerSuccess, 0
	}
	var sk *skipError
	var sn *snoozeError
	var un *undecodableError
	switch {
	case errors.As(err, &sk):
		return backend.TriggerSkip, 0
	case errors.As(err, &sn):
		return backend.TriggerSnooze, sn.d
	case errors.As(err, &un):
		return backend.TriggerUndecodable, 0
	case errors.Is(err, revokeError{}):
		return backend.TriggerRevoke, 0
	}
	return backend.TriggerError, 0
}
