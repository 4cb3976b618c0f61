package sluicetype

import "time"

// ArchivedJob is a job as the retention sweep archived it.
type ArchivedJob struct {
	*Job
	EvictedAt time.Time `json:"evicted_at"`
}
