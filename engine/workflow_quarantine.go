package engine

import (
	"context"
	"fmt"
)

// Crashes per (fingerprint, step) for the quarantine screen: each
// fingerprint's crashed jobs are read, a bounded few, and the crashes
// their checkpoints record per step are summed.

const (
	// stepCrashFingerprints is how many fingerprints of a Quarantine
	// answer get their step counts; stepCrashJobs how many of each one's
	// crashed jobs are read.
	stepCrashFingerprints = 100
	stepCrashJobs         = 10
)

// addStepCrashes fills StepCrashes on the first fingerprints of fps.
func (e *Engine) addStepCrashes(ctx context.Context, fps []*Fingerprint) error {
	for i, fp := range fps {
		if i == stepCrashFingerprints {
			break
		}
		page, err := e.ListJobs(ctx, ListJobsParams{Filter: Filter{States: AllStates, Fingerprint: fp.Fingerprint}, Limit: 50})
		if err != nil {
			return fmt.Errorf("fingerprint %s: step crashes: %w", fp.Fingerprint, err)
		}
		var jobs []*Job
		for _, row := range page.Jobs {
			if row.CrashAttempt == 0 {
				continue
			}
			j, err := e.store.JobGetByID(ctx, &JobGetByIDParams{ID: row.ID})
			if err != nil {
				continue // gone meanwhile
			}
			jobs = append(jobs, j)
			if len(jobs) == stepCrashJobs {
				break
			}
		}
		if m := StepCrashes(jobs); len(m) > 0 {
			fp.StepCrashes = m
		}
	}
	return nil
}
