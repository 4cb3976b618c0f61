package sluicetype

import (
	"encoding/json"
	"time"
)

// EnqueueParams describes one job to enqueue.
type EnqueueParams struct {
	// ID makes the enqueue idempotent: the same id with the same content
	// (kind, queue, canonical payload) returns the existing job; the same
	// id with other content is ErrConflict. A UUIDv7 when empty.
	ID    string
	Queue string // "default" when empty
	Kind  string
	// Payload is a JSON object. Args, when set instead, is marshalled.
	Payload json.RawMessage
	Args    any
	// SchemaVersion of the payload; the registered kind's version (or 1)
	// when 0.
	SchemaVersion int
	Metadata      json.RawMessage
	Tags          []string
	Priority      int
	MaxAttempts   int
	// Delay or ScheduledAt put the job off; ScheduledAt wins.
	Delay       time.Duration
	ScheduledAt *time.Time
	// Deadline after which the work is no longer useful.
	Deadline *time.Time
	// Timeout bounds one attempt; the kind's timeout when 0.
	Timeout time.Duration
	// Unique, when set, makes the enqueue unique (see UniqueOpts): while
	// a job with the same unique key holds it, this enqueue returns that
	// job with Existing set.
	Unique *UniqueOpts
}

// EnqueueResult is the outcome for one job of EnqueueMany.
type EnqueueResult struct {
	Job      *Job
	Existing bool
	Err      error
}
