package api

import (
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Response bodies that wrap lists, so fields can be added later.
type (
	fingerprintsResponse struct {
		Fingerprints []*engine.Fingerprint `json:"fingerprints"`
	}
	queuesResponse struct {
		Queues []engine.QueueInfo `json:"queues"`
	}
	errorGroupsResponse struct {
		Groups []engine.ErrorGroup `json:"groups"`
	}
	// signalResponse leaves the payload out: the caller sent it, and
	// payloads are for inspectors.
	signalResponse struct {
		Signal signalSent `json:"signal"`
	}
	signalSent struct {
		JobID  string    `json:"job_id"`
		Name   string    `json:"name"`
		Seq    int64     `json:"seq"`
		SentAt time.Time `json:"sent_at"`
	}
	releasedResponse struct {
		Released int `json:"released"`
	}
	queueStateResponse struct {
		Queue  string `json:"queue"`
		Paused bool   `json:"paused"`
	}
	deletedResponse struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
	}
)
