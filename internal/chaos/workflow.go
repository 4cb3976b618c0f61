package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// The workflow kinds of the fault tests: chaos.workflow, whose steps write
// side effects a test counts, and chaos.fail, which always fails (its
// deaths are routed to chaos.triage, which succeeds).

// Kind names of the workflow fault tests.
const (
	KindWorkflow = "chaos.workflow"
	KindFail     = "chaos.fail"
	KindTriage   = "chaos.triage"
)

// Workflow is chaos.workflow's payload: Steps steps named s1..sN, each of
// which appends "run <job> <step> <pid>" to the file Log when it runs.
// Step Block, on its first run only, then blocks until the process dies
// or the job's context ends: the moment a test kills the process.
type Workflow struct {
	Steps int    `json:"steps"`
	Log   string `json:"log"`
	Block int    `json:"block,omitempty"`
}

// StepLine is the side-effect line step n of job id writes.
func StepLine(id string, n int) string { return fmt.Sprintf("run %s s%d", id, n) }

// CountStepRuns counts the runs of step n of job id in a Workflow log.
func CountStepRuns(path, id string, n int) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	want := StepLine(id, n) + " "
	c := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), want) {
			c++
		}
	}
	return c, sc.Err()
}

func workflowKinds() []engine.Kind {
	return []engine.Kind{
		{Name: KindWorkflow, Handler: engine.TypedHandler(workflow), Backoff: backoff},
		{Name: KindFail, MaxAttempts: 1, DeadLetter: &engine.DeadLetterRule{Kind: KindTriage}, Backoff: backoff,
			Handler: func(context.Context, *engine.Job) error { return errors.New("chaos.fail: it always fails") }},
		{Name: KindTriage, Backoff: backoff, Handler: func(context.Context, *engine.Job) error { return nil }},
	}
}

func workflow(ctx context.Context, j *engine.Job, p Workflow) error {
	for n := 1; n <= p.Steps; n++ {
		if _, err := engine.Step(ctx, fmt.Sprintf("s%d", n), func(ctx context.Context) (int, error) {
			// The side effect first: a kill after it is a run that happened.
			if err := appendLine(p.Log, fmt.Sprintf("%s %d", StepLine(j.ID, n), os.Getpid())); err != nil {
				return 0, err
			}
			if n == p.Block {
				runs, err := CountStepRuns(p.Log, j.ID, n)
				if err != nil {
					return 0, err
				}
				if runs == 1 {
					t := time.NewTimer(time.Hour)
					defer t.Stop()
					select {
					case <-ctx.Done():
						return 0, ctx.Err()
					case <-t.C:
					}
				}
			}
			return n * 10, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("chaos.workflow: %w", err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("chaos.workflow: %w", err)
	}
	return f.Close()
}
