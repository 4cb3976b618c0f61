package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/backend"
)

// The running set: this process's hold on each job it runs or holds
// ahead of a slot, whose leases it renews and which a crash, a lost
// lease or a shutdown hands back.

// runState is this process's hold on one running job.
type runState struct {
	ref       backend.JobRef
	queue     string
	kind      string
	attempt   int // the job's attempt when claimed
	suspect   suspectKind
	ctx       context.Context
	cancel    context.CancelCauseFunc
	abandoned atomic.Bool // released at shutdown or lease lost: drop the result
	acked     atomic.Bool // success handed to the completer: not to be released
	// returned is set once the handler has returned: its outcome is being
	// written, so a renewal that finds the lease gone has found that
	// write (or the fence will refuse it), not a handler to cancel.
	returned atomic.Bool
}

var (
	errLeaseLostCause = errors.New("lease lost")
	errAttemptTimeout = errors.New("attempt timed out")
	errJobDeadline    = errors.New("job deadline passed")
)

func (r *runState) lost() {
	r.abandoned.Store(true)
	r.cancel(errLeaseLostCause)
}

// runningSet is every job this process holds a lease on, for renewal and
// shutdown.
type runningSet struct {
	mu sync.Mutex
	m  map[string]*runState
	// released is told of each job the process stops holding.
	released func(*runState)
}

func newRunningSet() *runningSet { return &runningSet{m: map[string]*runState{}} }

func (s *runningSet) add(j *Job, ctx context.Context, cancel context.CancelCauseFunc) *runState {
	r := &runState{queue: j.Queue, kind: j.Kind, attempt: j.Attempt, suspect: suspectOf(j), ctx: ctx, cancel: cancel}
	if j.Lease != nil {
		r.ref = backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Lease.Fence}
	} else {
		r.ref = backend.JobRef{ID: j.ID, Fence: j.Fence}
	}
	s.mu.Lock()
	s.m[j.ID] = r
	s.mu.Unlock()
	return r
}

func (s *runningSet) remove(id string) {
	s.mu.Lock()
	r := s.m[id]
	delete(s.m, id)
	s.mu.Unlock()
	if r != nil && s.released != nil {
		s.released(r)
	}
}

// len is how many jobs the process holds.
func (s *runningSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *runningSet) get(id string) *runState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

// abandonUnacked marks every held job whose success is not already with
// the completer as abandoned and returns them.
func (s *runningSet) abandonUnacked() []*runState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runState
	for _, r := range s.m {
		if r.acked.Load() {
			continue
		}
		if r.abandoned.CompareAndSwap(false, true) {
			out = append(out, r)
		}
	}
	return out
}

func (s *runningSet) all() []*runState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*runState, 0, len(s.m))
	for _, r := range s.m {
		out = append(out, r)
	}
	return out
}
