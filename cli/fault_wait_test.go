package cli_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
)

// TestFaultSleepResumesAcrossRestart: a workflow sleeping 2 s holds no
// worker; its worker process is SIGKILLed while it sleeps, and a new
// process runs it on after the sleep, past its completed first step, on
// every store.
func TestFaultSleepResumesAcrossRestart(t *testing.T) {
	skipUnlessFault(t)
	for _, sc := range workflowStoreCases() {
		t.Run(sc.name, func(t *testing.T) { sleepResumes(t, sc.url(t)) })
	}
}

func sleepResumes(t *testing.T, storeURL string) {
	store, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	ctx := context.Background()
	log := filepath.Join(t.TempDir(), "steps.log")
	j, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "nap-1", Queue: chaos.Queue, Kind: chaos.KindSleeper,
		Args: chaos.Sleeper{Sleep: 2 * time.Second, Log: log}})
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
	first := startWorker(t, bin, storeURL, "fault-nap-1")
	var asleep *engine.Job
	waitFor(t, "the workflow to sleep in the first worker", 60*time.Second, func() bool {
		if first.exited() {
			t.Fatalf("first worker exited early: %v", first.err)
		}
		asleep, err = store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		return engine.WaitOf(asleep) != nil || asleep.State == engine.StateCompleted
	})
	first.kill(t)
	w := engine.WaitOf(asleep)
	if w == nil || w.Kind != engine.WaitKindSleep || asleep.Lease != nil || asleep.Attempt != 0 ||
		!asleep.ScheduledAt.After(asleep.StateChangedAt) {
		t.Fatalf("sleeping job: %s, lease %v, attempt %d, due %s, wait %+v", asleep.State, asleep.Lease, asleep.Attempt, asleep.ScheduledAt, w)
	}

	second := startWorker(t, bin, storeURL, "fault-nap-2")
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
	if got := []int{runs(1), runs(2)}; !equalInts(got, []int{1, 1}) {
		t.Fatalf("step runs %v, want [1 1]: s1 in the first process only, s2 once after the sleep", got)
	}
	cp, err := engine.ParseCheckpoint(done.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Steps) != 3 || cp.Steps[1].Name != "nap" || cp.Steps[1].State != engine.StepCompleted {
		t.Fatalf("checkpoint %+v", cp.Steps)
	}
	// It ran again no earlier than its sleep's due time, by the store's
	// clock (the claim that resumed it stamps attempted_at).
	if done.AttemptedAt.Before(asleep.ScheduledAt) {
		t.Fatalf("resumed at %s, before its sleep was due at %s", done.AttemptedAt, asleep.ScheduledAt)
	}
	if done.Attempt != 0 || done.CrashAttempt != 0 {
		t.Fatalf("attempt %d crash_attempt %d: a sleep spends neither", done.Attempt, done.CrashAttempt)
	}
}
