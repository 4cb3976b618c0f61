package sluicetype

import "time"

// FingerprintStatus is the state of a quarantine record.
type FingerprintStatus string

const (
	FingerprintQuarantined FingerprintStatus = "quarantined"
	// FingerprintProbation: released, but the next crash quarantines it
	// again; it ends when one of its jobs completes.
	FingerprintProbation FingerprintStatus = "probation"
)

// Fingerprint is the quarantine record of one payload fingerprint.
type Fingerprint struct {
	Fingerprint string            `json:"fingerprint"`
	Kind        string            `json:"kind"`
	Status      FingerprintStatus `json:"status"`
	Since       time.Time         `json:"since"`
	Crashes     int               `json:"crashes"`
	LastError   string            `json:"last_error"`
	LastJobID   string            `json:"last_job_id"`
	// Held counts the fingerprint's jobs in the quarantined state.
	Held int `json:"held"`
	// StepCrashes counts the crashes inside workflow steps, by step name:
	// the store's counts per (fingerprint, step), kept by each crash's own
	// write (FingerprintWrite.StepCrash) and read with the record.
	StepCrashes map[string]int `json:"step_crashes,omitempty"`
}
