package sluicetype

import "time"

// Bounds and defaults of a canary run (BulkParams.Canary).
const (
	// MaxCanarySize bounds a canary's sample and its window: both are
	// read back as one id filter (MaxApplyIDs).
	MaxCanarySize = MaxApplyIDs
	// DefaultCanaryWindow is how many of the latest redriven jobs the
	// halt rule looks at when the request names no window.
	DefaultCanaryWindow = 100
	// DefaultCanaryTimeout bounds the wait for the sample's outcomes.
	DefaultCanaryTimeout = 10 * time.Minute
	// DefaultCanaryMinSuccess and DefaultHaltFailureRate apply when a
	// canary is asked for without them.
	DefaultCanaryMinSuccess = 0.9
	DefaultHaltFailureRate  = 0.2
)

// CanaryParams asks a bulk retry to test the fix first: redrive Size jobs
// spread across the selection, wait up to Timeout for their outcomes, go
// on only if at least MinSuccess of them succeeded, and while going on
// halt as soon as more than HaltFailureRate of the last Window redriven
// jobs failed again.
type CanaryParams struct {
	Size            int           `json:"size"`
	MinSuccess      float64       `json:"min_success,omitempty"`
	HaltFailureRate float64       `json:"halt_failure_rate,omitempty"`
	Window          int           `json:"window,omitempty"`
	Timeout         time.Duration `json:"timeout_ns,omitempty"`
}

// CanaryStage is where a canary run is.
type CanaryStage string

const (
	// CanarySample: the sample is picked and being redriven.
	CanarySample CanaryStage = "sample"
	// CanaryWaiting: the sample is redriven; its outcomes are awaited.
	CanaryWaiting CanaryStage = "waiting"
	// CanaryWatching: the sample passed; the rest is redriven batch by
	// batch while the window's outcomes are watched.
	CanaryWatching CanaryStage = "watching"
	// CanaryHalted: the sample or the window failed; the operation is
	// halted until an operator resumes or cancels it.
	CanaryHalted CanaryStage = "halted"
)

// Outcomes counts what became of a set of redriven jobs: succeeded
// (completed), failed again (dead, undecodable, quarantined, or retrying
// after a new error), or still running (waiting to run, or running).
// Jobs gone since (cancelled or deleted) are in none.
type Outcomes struct {
	OK      int `json:"ok"`
	Failed  int `json:"failed"`
	Running int `json:"running"`
}

// Canary is a canary run's persisted state, on its operation: the
// request, the stage, the sample and the window's outcomes as last
// read. A runner that takes the operation over after a restart resumes
// from it.
type Canary struct {
	CanaryParams
	Stage CanaryStage `json:"stage"`
	// Sample is the sample's job ids, picked spread across the
	// selection; SampleDone how many of them were redriven.
	Sample     []string `json:"-"`
	SampleDone int      `json:"sample_done"`
	// SampleSize is len(Sample), for answers that leave the ids out.
	SampleSize int `json:"sample_size"`
	// WaitUntil is when the wait for the sample's outcomes gives up (the
	// store's clock), set when the sample is redriven.
	WaitUntil *time.Time `json:"wait_until,omitempty"`
	// SampleOutcomes is what became of the sample, as last read.
	SampleOutcomes Outcomes `json:"sample_outcomes"`
	// Recent is the ids of the last Window jobs redriven, oldest first;
	// the store appends a batch's ids in the batch's transaction.
	Recent []string `json:"-"`
	// WindowOutcomes is what became of Recent, as last read.
	WindowOutcomes Outcomes `json:"window_outcomes"`
	// Reason says why the run halted ("" while it did not).
	Reason string `json:"reason,omitempty"`
}

// Outcome sorts a redriven job's state: +1 succeeded, -1 failed again,
// 0 still running; gone reports a job no longer counted (cancelled, or
// not found). A retryable job failed again: its retry ran and erred.
func Outcome(st State) (verdict int, gone bool) {
	switch st {
	case StateCompleted:
		return 1, false
	case StateArchived, StateUndecodable, StateQuarantined, StateRetryable:
		return -1, false
	case StateScheduled, StateAvailable, StateRunning:
		return 0, false
	}
	return 0, true
}
