package sluicetype

import (
	"encoding/json"
	"strings"
)

// DeadLetterPayload is the payload of a dead-letter job.
type DeadLetterPayload struct {
	DeadJobID string          `json:"dead_job_id"`
	Kind      string          `json:"kind"`
	Queue     string          `json:"queue"`
	Payload   json.RawMessage `json:"payload"`
	Error     string          `json:"error"`
	Reason    TerminalReason  `json:"reason"`
}

// DeadLetterID is the id of the dead-letter job of the job id.
func DeadLetterID(id string) string { return DeadLetterPrefix + id }

// IsDeadLetter reports whether id names a dead-letter job.
func IsDeadLetter(id string) bool { return strings.HasPrefix(id, DeadLetterPrefix) }

// DeadLetterPrefix begins the id of every dead-letter handler job:
// dlq:<id of the dead job>. Such a job is never routed again when it dies.
const DeadLetterPrefix = "dlq:"
