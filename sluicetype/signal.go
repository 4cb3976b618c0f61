package sluicetype

import (
	"encoding/json"
	"time"
)

// Signal is one buffered signal.
type Signal struct {
	JobID string `json:"job_id"`
	Name  string `json:"name"`
	// Seq orders a job's signals; it names one for SignalConsume.
	Seq     int64           `json:"seq"`
	Payload json.RawMessage `json:"payload,omitempty"`
	SentAt  time.Time       `json:"sent_at"`
	// Woke reports that SignalSend's Wake moved the job (SignalSend
	// alone sets it).
	Woke bool `json:"-"`
}
