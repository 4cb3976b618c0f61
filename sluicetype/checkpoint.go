package sluicetype

import (
	"encoding/json"
	"fmt"
	"time"
)

// ReasonStepMismatch is the terminal reason of an undecodable job whose
// handler asked for a step other than the one recorded at that position.
const ReasonStepMismatch TerminalReason = "step_mismatch"

// StepState is where one recorded step is.
type StepState string

// StepRecord is one step of a job's checkpoint.
type StepRecord struct {
	Name  string    `json:"name"`
	State StepState `json:"state"`
	// Result is the step's JSON result, once completed.
	Result json.RawMessage `json:"result,omitempty"`
	// Attempts counts the runs of the step (replays are not runs).
	Attempts int `json:"attempts"`
	// Crashes counts the crashes while the step ran: with the job's
	// fingerprint, the crash count per (fingerprint, step).
	Crashes int `json:"crashes,omitempty"`
	// Error is the error of the step's last failed run.
	Error string `json:"error,omitempty"`
	// StartedAt and Duration are of the step's last run, by the store's
	// clock as this process knows it.
	StartedAt time.Time     `json:"started_at,omitzero"`
	Duration  time.Duration `json:"duration_ns,omitempty"`
}

// Fork links a job replayed from a step to the job it was forked from,
// or a job to the forks made from it.
type Fork struct {
	JobID string `json:"job_id"`
	// Step is the 1-based position the new job runs from.
	Step int `json:"step"`
	// Ref, on a replay's forked_from, is the Ref of the original's last
	// error entry (AttemptError.Ref): its first run points back at the
	// attempt that died.
	Ref string `json:"ref,omitempty"`
}

// Checkpoint is what a workflow job records: its steps in the order they
// ran, and the step-set version of the code that wrote them.
type Checkpoint struct {
	// Version is the kind's StepVersion when the checkpoint was written
	// (1 when 0).
	Version int          `json:"version,omitempty"`
	Steps   []StepRecord `json:"steps"`
	// ForkedFrom is set on a job made by replay from a step.
	ForkedFrom *Fork `json:"forked_from,omitempty"`
	// Forks lists the jobs replayed from this one.
	Forks []Fork `json:"forks,omitempty"`
	// Wait is what the job waits for while it is scheduled by a wait
	// (engine/wait.go); Children are the ids of the jobs it spawned.
	Wait     *Wait    `json:"wait,omitempty"`
	Children []string `json:"children,omitempty"`
}

// ParseCheckpoint decodes a job's checkpoint; an empty one is the zero
// Checkpoint.
func ParseCheckpoint(raw json.RawMessage) (Checkpoint, error) {
	var cp Checkpoint
	if len(raw) == 0 || string(raw) == "null" {
		return cp, nil
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint: %v", ErrInvalid, err)
	}
	return cp, nil
}

// Encode writes the checkpoint as JSON.
func (cp Checkpoint) Encode() (json.RawMessage, error) {
	if cp.Steps == nil {
		cp.Steps = []StepRecord{}
	}
	// A step's error text is the handler's, so it may hold what no store
	// keeps (text.go); the records are copied before they are changed.
	copied := false
	for i := range cp.Steps {
		if e := StorableText(cp.Steps[i].Error); e != cp.Steps[i].Error {
			if !copied {
				cp.Steps, copied = append([]StepRecord(nil), cp.Steps...), true
			}
			cp.Steps[i].Error = e
		}
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return b, nil
}

// StepWaiting: the step is a wait that is not over.
const StepWaiting StepState = "waiting"

// WaitSummary is a listed job's wait: the checkpoint's Wait with the
// number of children in place of their ids, so a page of parents stays
// small. A store's JobListPage writes it from the stored checkpoint, for
// scheduled jobs only (as WaitOf).
type WaitSummary struct {
	Kind   WaitKind  `json:"kind"`
	Step   int       `json:"step"`
	Name   string    `json:"name"`
	Until  time.Time `json:"until,omitzero"`
	Signal string    `json:"signal,omitempty"`
	// Done of Total children had ended when the job last looked.
	Done  int `json:"done,omitempty"`
	Total int `json:"total,omitempty"`
}

// ParseWaitSummary decodes the summary a store's list query extracted
// from the checkpoint (the wait object, its children replaced by their
// count as "total"); nil for none. A store whose rows carry the whole
// checkpoint uses WaitSummaryOf instead.
func ParseWaitSummary(raw []byte) (*WaitSummary, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s WaitSummary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("wait summary: %w", err)
	}
	if s.Kind == "" {
		return nil, nil
	}
	return &s, nil
}

// WaitKind says what a job waits for.
type WaitKind string

const (
	WaitKindSleep    WaitKind = "sleep"
	WaitKindSignal   WaitKind = "signal"
	WaitKindChildren WaitKind = "children"
)

// Wait is what a scheduled workflow job waits for, recorded in its
// checkpoint.
type Wait struct {
	Kind WaitKind `json:"kind"`
	// Step is the wait's 1-based position, Name its step name.
	Step int    `json:"step"`
	Name string `json:"name"`
	// Until is when the job is due again: a sleep's end, a signal's
	// timeout, a parent's next re-check. Zero for a signal without one.
	Until time.Time `json:"until,omitzero"`
	// Signal is the name of the signal waited for.
	Signal string `json:"signal,omitempty"`
	// Children are the ids waited for, Done how many had ended when the
	// job last looked.
	Children []string `json:"children,omitempty"`
	Done     int      `json:"done,omitempty"`
}

// Describe says in a few words what the job waits for.
func (w *Wait) Describe() string {
	if w == nil {
		return ""
	}
	until := ""
	if !w.Until.IsZero() {
		until = w.Until.UTC().Format(time.RFC3339)
	}
	switch w.Kind {
	case WaitKindSleep:
		return "sleep until " + until
	case WaitKindSignal:
		if until == "" {
			return fmt.Sprintf("signal %q", w.Signal)
		}
		return fmt.Sprintf("signal %q (timeout %s)", w.Signal, until)
	case WaitKindChildren:
		return fmt.Sprintf("children %d/%d done", w.Done, len(w.Children))
	}
	return string(w.Kind)
}

// Summary is w as a list row carries it.
func (w *Wait) Summary() *WaitSummary {
	if w == nil {
		return nil
	}
	return &WaitSummary{Kind: w.Kind, Step: w.Step, Name: w.Name, Until: w.Until, Signal: w.Signal, Done: w.Done, Total: len(w.Children)}
}

// WaitSummaryOf is the summary of a job that carries its checkpoint: nil
// unless it is scheduled with a wait. Only the wait is decoded.
func WaitSummaryOf(j *Job) *WaitSummary {
	if j == nil || j.State != StateScheduled || len(j.Checkpoint) == 0 {
		return nil
	}
	var cp struct {
		Wait *Wait `json:"wait"`
	}
	if err := json.Unmarshal(j.Checkpoint, &cp); err != nil {
		return nil
	}
	return cp.Wait.Summary()
}
