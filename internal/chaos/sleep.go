package chaos

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// KindSleeper is a workflow that sleeps between two steps: s1, a durable
// Sleep of Sleep, s2. Each step writes its side-effect line to Log
// (StepLine), so a test counts the runs across processes.
const KindSleeper = "chaos.sleeper"

// Sleeper is KindSleeper's payload.
type Sleeper struct {
	Sleep time.Duration `json:"sleep"`
	Log   string        `json:"log"`
}

func sleeperKinds() []engine.Kind {
	return []engine.Kind{{Name: KindSleeper, Handler: engine.TypedHandler(sleeper), Backoff: backoff}}
}

func sleeper(ctx context.Context, j *engine.Job, p Sleeper) error {
	step := func(n int) error {
		_, err := engine.Step(ctx, fmt.Sprintf("s%d", n), func(context.Context) (int, error) {
			return n, appendLine(p.Log, fmt.Sprintf("%s %d", StepLine(j.ID, n), os.Getpid()))
		})
		return err
	}
	if err := step(1); err != nil {
		return err
	}
	if err := engine.Sleep(ctx, "nap", p.Sleep); err != nil {
		return err
	}
	return step(2)
}
