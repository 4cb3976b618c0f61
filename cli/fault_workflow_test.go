package cli_test

// Workflow fault tests: a workflow whose process is SIGKILLed inside a step
// resumes in a new process without repeating its completed steps, and a
// death's dead-letter route is written with the death or not at all.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
)

// workflowStoreCases are the stores the workflow fault tests run on: every
// store a URL can name (storeCases) and Redis.
func workflowStoreCases() []storeCase {
	return append(storeCases(), storeCase{"redis", func(t *testing.T) string { return redistest.URL(t) }})
}

// TestFaultWorkflowResumesAfterSIGKILL: a 5-step workflow is SIGKILLed
// during step 3; a new process runs steps 3 to 5 only. The side effects
// each step writes prove steps 1 and 2 ran once, in the killed process.
func TestFaultWorkflowResumesAfterSIGKILL(t *testing.T) {
	skipUnlessFault(t)
	for _, sc := range workflowStoreCases() {
		t.Run(sc.name, func(t *testing.T) { workflowResumes(t, sc.url(t)) })
	}
}

func workflowResumes(t *testing.T, storeURL string) {
	store, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	ctx := context.Background()
	log := filepath.Join(t.TempDir(), "steps.log")
	j, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "wf-1", Queue: chaos.Queue, Kind: chaos.KindWorkflow,
		Args: chaos.Workflow{Steps: 5, Log: log, Block: 3}})
	if err != nil {
		t.Fatal(err)
	}
	runs := func(n int) int {
		c, err := chaos.CountStepRuns(log, j.ID, n)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := startWorker(t, bin, storeURL, "fault-wf-1")
	waitFor(t, "step 3 to start in the first worker", 60*time.Second, func() bool {
		if first.exited() {
			t.Fatalf("first worker exited early: %v", first.err)
		}
		return runs(3) == 1
	})
	first.kill(t)

	mid, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := engine.ParseCheckpoint(mid.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if mid.State != engine.StateRunning || len(cp.Steps) != 2 || cp.Steps[1].State != engine.StepCompleted {
		t.Fatalf("after the kill: %s with steps %+v, want running with s1 and s2 recorded", mid.State, cp.Steps)
	}

	second := startWorker(t, bin, storeURL, "fault-wf-2")
	var done *engine.Job
	waitFor(t, "the workflow to complete in the second worker", 60*time.Second, func() bool {
		if second.exited() {
			t.Fatalf("second worker exited: %v", second.err)
		}
		done, err = store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		return done.State == engine.StateCompleted
	})
	second.stop(t)

	got := []int{runs(1), runs(2), runs(3), runs(4), runs(5)}
	if want := []int{1, 1, 2, 1, 1}; !equalInts(got, want) {
		t.Fatalf("step runs %v, want %v (steps 1-2 once, step 3 again after the kill, 4-5 once)", got, want)
	}
	cp, err = engine.ParseCheckpoint(done.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Steps) != 5 {
		t.Fatalf("checkpoint %+v, want 5 steps", cp.Steps)
	}
	for i, s := range cp.Steps {
		var v int
		if err := json.Unmarshal(s.Result, &v); err != nil || s.State != engine.StepCompleted || v != (i+1)*10 {
			t.Errorf("step %d: %+v (result %d, %v)", i+1, s, v, err)
		}
	}
	if cp.Steps[2].Crashes != 1 || cp.Steps[2].Name != "s3" || done.CrashAttempt != 1 {
		t.Errorf("crash of step 3 not counted on it: crash_attempt %d, step %+v", done.CrashAttempt, cp.Steps[2])
	}
	t.Logf("step runs %v; step 3 crashes %d", got, cp.Steps[2].Crashes)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFaultDeadLetterAtomic: a worker killed inside the transaction of a
// death with its dead-letter route, its statements run and its COMMIT not
// (on Redis, whose one script has no such point: as the script is about to
// be sent), leaves neither the archived job nor its dlq: job; killed just
// after the store committed it, it leaves both.
func TestFaultDeadLetterAtomic(t *testing.T) {
	skipUnlessFault(t)
	for _, sc := range workflowStoreCases() {
		t.Run(sc.name, func(t *testing.T) { deadLetterAtomic(t, sc) })
	}
}

func deadLetterAtomic(t *testing.T, sc storeCase) {
	for _, tc := range []struct {
		fault string
		both  bool
	}{
		{"dead-letter-before-commit", false},
		{"dead-letter-after-commit", true},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			storeURL := sc.url(t)
			store, e := urlSetup(t, storeURL)
			bin := testWorkerBinary(t)
			ctx := context.Background()
			j, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "dies", Queue: chaos.Queue, Kind: chaos.KindFail})
			if err != nil {
				t.Fatal(err)
			}
			w := startWorker(t, bin, storeURL, "fault-dlq", "--fault", tc.fault,
				"--record", filepath.Join(t.TempDir(), "record.db"), "--no-maintenance")
			waitFor(t, "the worker to kill itself at the death", 60*time.Second, w.exited)

			got, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: j.ID})
			if err != nil {
				t.Fatal(err)
			}
			_, dlqErr := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: engine.DeadLetterID(j.ID)})
			if tc.both {
				if got.State != engine.StateArchived || dlqErr != nil {
					t.Fatalf("killed after the commit: job %s, dlq: %v; want archived and its dlq: job", got.State, dlqErr)
				}
				return
			}
			if got.State != engine.StateRunning || dlqErr == nil {
				t.Fatalf("killed before the commit: job %s, dlq: %v; want still running and no dlq: job", got.State, dlqErr)
			}
			// Where it died: inside the open transaction on the stores
			// that have one (engine.BeforeCommit), before the script on
			// Redis.
			log, err := os.ReadFile(w.logPath)
			if err != nil {
				t.Fatal(err)
			}
			inside := strings.Contains(string(log), "killed inside the death's transaction")
			if want := !strings.HasPrefix(sc.name, "redis"); inside != want {
				t.Fatalf("killed inside the transaction: %v, want %v", inside, want)
			}
		})
	}
}
