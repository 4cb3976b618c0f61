package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/commithook"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Fault hooks of the dead-letter atomicity test: the process kills itself
// (SIGKILL) around the write of a death that carries a dead-letter route.
const (
	// faultBeforeDeadLetter dies inside the death's write transaction,
	// after its statements and before its commit (engine.BeforeCommit;
	// on a store of atomic scripts, as the script is about to be sent):
	// nothing of it may be found afterwards.
	faultBeforeDeadLetter = "dead-letter-before-commit"
	// faultAfterDeadLetter dies as soon as the store has committed it,
	// before the engine does anything else (death handlers, events):
	// both jobs must be found afterwards.
	faultAfterDeadLetter = "dead-letter-after-commit"
)

// faultStore kills the process around routed deaths, as fault says.
type faultStore struct {
	backend.Store
	fault string
	// hooks: the store underneath calls engine.BeforeCommit.
	hooks bool
}

func withFault(s backend.Store, fault string, hooks bool) (backend.Store, error) {
	switch fault {
	case "":
		return s, nil
	case faultBeforeDeadLetter, faultAfterDeadLetter:
		return &faultStore{Store: s, fault: fault, hooks: hooks}, nil
	}
	return nil, fmt.Errorf("unknown --fault %q (want %s or %s)", fault, faultBeforeDeadLetter, faultAfterDeadLetter)
}

func (f *faultStore) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*engine.Job, error) {
	if p.DeadLetter == nil {
		return f.Store.JobFinish(ctx, p)
	}
	if f.fault == faultBeforeDeadLetter {
		if f.hooks {
			// Inside the write: its statements ran, its commit has not.
			ctx = commithook.With(ctx, func() {
				fmt.Fprintln(os.Stderr, "testworker: killed inside the death's transaction, before its commit")
				killSelf()
			})
		} else {
			killSelf() // one atomic script: before it is sent
		}
	}
	j, err := f.Store.JobFinish(ctx, p)
	if err == nil && f.fault == faultAfterDeadLetter {
		killSelf()
	}
	return j, err
}

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for {
		time.Sleep(time.Second) // the signal is on its way
	}
}
