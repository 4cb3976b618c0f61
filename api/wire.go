package api

import (
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
