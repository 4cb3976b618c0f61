// Package chaos holds the job kinds of the process fault tests and the
// chaos harness (cli/fault_test.go, cli/chaos_test.go, scripts/chaos):
// chaos.sleep sleeps and succeeds; chaos.panic panics while its job has
// crashed fewer times than its payload says; chaos.exit kills its own
// process with SIGKILL. They are built only into the test worker binary,
// internal/testworker, never into sluice: a product worker must not carry
// a kind that takes its process down.
//
// The harness itself (Run, harness.go) starts testworker processes on a
// store, drives faults at them, and checks the jobs afterwards against the
// executions the workers recorded in a side table (record.go) and the
// fenced writes their store accepted (witness.go).
package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Queue holds the chaos kinds in the fault tests. The harness uses a queue
// of its own per run (see Run).
const Queue = "chaos"

// Kind names.
const (
	KindSleep = "chaos.sleep"
	KindExit  = "chaos.exit"
	KindPanic = "chaos.panic"
)

// Sleep is chaos.sleep's payload. N makes each job's payload, and so its
// fingerprint, its own: a job quarantined by the harness's kills must not
// hold its innocent twins with it.
type Sleep struct {
	MS int `json:"ms"`
	N  int `json:"n,omitempty"`
	// Run names the harness run, so that a fingerprint quarantined in one
	// run on a store is not refused in the next.
	Run string `json:"run,omitempty"`
}

// Panic is chaos.panic's payload: the handler panics while the job's
// crash_attempt is below Times, then succeeds.
type Panic struct {
	Times int    `json:"times"`
	N     int    `json:"n,omitempty"`
	Run   string `json:"run,omitempty"`
}

// Exit is chaos.exit's payload (any object will do; N keeps fingerprints
// apart).
type Exit struct {
	N   int    `json:"n,omitempty"`
	Run string `json:"run,omitempty"`
}

// backoff is the retry delay: attempt n waits n seconds, at most five.
func backoff(attempt int) time.Duration {
	return time.Duration(min(max(attempt, 1), 5)) * time.Second
}

// Register adds the chaos kinds to e.
func Register(e *engine.Engine) error { return RegisterRecording(nil)(e) }

// RegisterRecording returns a Register that also records each handler run
// in rec (nil records nothing), under the engine's worker id.
func RegisterRecording(rec *Recorder) func(*engine.Engine) error {
	return RegisterCounting(rec, nil)
}

// RegisterCounting is RegisterRecording that also hands each handler run
// to count (nil: none), after the side table has it: a second account
// kept elsewhere (testworker --count-redis keeps one in a Redis key).
func RegisterCounting(rec *Recorder, count func(*engine.Job)) func(*engine.Engine) error {
	return func(e *engine.Engine) error {
		// The process as the harness named it (--worker-id), as the
		// witness records its writes, without the incarnation suffix.
		process := processName(e.WorkerID())
		note := func(j *engine.Job) {
			if rec != nil {
				rec.Execution(j, process)
			}
			if count != nil {
				count(j)
			}
		}
		for _, k := range []engine.Kind{
			{Name: KindSleep, Handler: func(ctx context.Context, j *engine.Job) error {
				note(j)
				return engine.TypedHandler(sleep)(ctx, j)
			}, Backoff: backoff},
			{Name: KindExit, Handler: func(ctx context.Context, j *engine.Job) error {
				note(j)
				return exit(ctx, j)
			}, Backoff: backoff},
			{Name: KindPanic, Handler: func(ctx context.Context, j *engine.Job) error {
				note(j)
				return engine.TypedHandler(panics)(ctx, j)
			}, Backoff: backoff},
		} {
			if err := e.Register(k); err != nil {
				return fmt.Errorf("chaos: %w", err)
			}
		}
		for _, k := range append(append(workflowKinds(), sleeperKinds()...), outageKinds()...) {
			if err := e.Register(k); err != nil {
				return fmt.Errorf("chaos: %w", err)
			}
		}
		return nil
	}
}

func sleep(ctx context.Context, _ *engine.Job, p Sleep) error {
	if p.MS <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(time.Duration(p.MS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// panics is chaos.panic: a handler that panics (the engine charges a
// crash, the process lives) until the job has crashed p.Times times.
func panics(_ context.Context, j *engine.Job, p Panic) error {
	if j.CrashAttempt < p.Times {
		panic(fmt.Sprintf("chaos.panic: crash %d of %d", j.CrashAttempt+1, p.Times))
	}
	return nil
}

// exit kills its own process with SIGKILL: the poison pill that takes the
// whole worker down every time, so only the reaper of another process can
// charge the crash.
func exit(context.Context, *engine.Job) error {
	killSelf()
	// Not reached where SIGKILL exists.
	return errors.New("chaos.exit: the process survived")
}
