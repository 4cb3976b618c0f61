// Package chaos holds the job kinds of the process fault tests and the
// chaos harness (cli/fault_test.go, cli/chaos_test.go, scripts/chaos):
// chaos.sleep sleeps and succeeds; chaos.exit kills its own process with
// SIGKILL. They are built only into the test worker binary,
// internal/testworker, never into sluice: a product worker must not carry
// a kind that takes its process down.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Queue holds the chaos kinds.
const Queue = "chaos"

// Kind names.
const (
	KindSleep = "chaos.sleep"
	KindExit  = "chaos.exit"
)

// Sleep is chaos.sleep's payload.
type Sleep struct {
	MS int `json:"ms"`
}

// backoff is the retry delay: attempt n waits n seconds, at most five.
func backoff(attempt int) time.Duration {
	return time.Duration(min(max(attempt, 1), 5)) * time.Second
}

// Register adds the chaos kinds to e.
func Register(e *engine.Engine) error {
	for _, k := range []engine.Kind{
		{Name: KindSleep, Handler: engine.TypedHandler(sleep), Backoff: backoff},
		{Name: KindExit, Handler: exit, Backoff: backoff},
	} {
		if err := e.Register(k); err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
	}
	return nil
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

// exit kills its own process with SIGKILL: the poison pill that takes the
// whole worker down every time, so only the reaper of another process can
// charge the crash.
func exit(context.Context, *engine.Job) error {
	killSelf()
	// Not reached where SIGKILL exists.
	return errors.New("chaos.exit: the process survived")
}
