package backend

import (
	"context"
	"encoding/json"

	"github.com/sluicehq/sluice/sluicetype"
)

// WaitStore is what waiting workflows (wait.go) need from storage: the
// signals buffered per (job, name) and the fenced wake of a waiting job.
// Every store implements it (backendtest's Waits group checks it).
type WaitStore interface {
	// SignalSend buffers one signal for a job: stored per (job, name) in
	// the order sent, until a wait of that name takes it. ErrNotFound when
	// the job does not exist; a *StateError when it is terminal (nobody
	// will ever take it). With Wake it also applies that wake, as JobWake
	// would, in the same transaction, and reports in Signal.Woke whether
	// the job moved: a signal and the wake it causes commit together.
	SignalSend(ctx context.Context, p *SignalSendParams) (*sluicetype.Signal, error)
	// SignalList returns a job's buffered signals of one name (every name
	// when Name is ""), oldest first.
	SignalList(ctx context.Context, p *SignalListParams) ([]*sluicetype.Signal, error)
	// SignalConsume takes one buffered signal and writes the job's
	// checkpoint in one transaction, under the job's lease (fenced like
	// JobCheckpoint: ErrLeaseLost otherwise, and nothing is taken). A
	// signal no longer buffered is ErrNotFound. This is what makes the
	// delivery exactly once: the signal leaves the buffer in the same
	// write that records it as the wait's result.
	SignalConsume(ctx context.Context, p *SignalConsumeParams) error
	// JobWake moves a job that is still in From at Fence to To (scheduled
	// now), with Event and the counter deltas, in one transaction. It
	// reports whether it moved the job: a job that has moved on since
	// (claimed, cancelled, woken already) is left as it is.
	JobWake(ctx context.Context, p *JobWakeParams) (bool, error)
}

type SignalSendParams struct {
	JobID   string
	Name    string
	Payload json.RawMessage
	// Wake, when set, is the wake of the job as the engine read it
	// waiting for this signal, fenced as JobWake's.
	Wake *JobWakeParams
}

type SignalListParams struct {
	JobID string
	Name  string
}

type SignalConsumeParams struct {
	JobRef
	Name string
	Seq  int64
	// Checkpoint replaces the job's: the wait's step completed with the
	// signal's payload.
	Checkpoint json.RawMessage
}

// JobWakeParams is a wake resolved by the engine from the table's row
// (TriggerSignal, TriggerChildren): the store checks the state and the
// fence and writes, deciding nothing.
type JobWakeParams struct {
	ID    string
	From  sluicetype.State
	Fence int64
	To    sluicetype.State
	// Event is written when the job moves (Kind "" for none).
	Event  EventWrite
	Counts []CountDelta
}

// SignalStates are the states a job takes signals in: every one that is
// not terminal. A store refusing a signal names them in its StateError.
func SignalStates() []sluicetype.State {
	var out []sluicetype.State
	for _, st := range sluicetype.AllStates {
		if !st.Terminal() {
			out = append(out, st)
		}
	}
	return out
}
