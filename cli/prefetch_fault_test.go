package cli_test

// Jobs claimed ahead of free slots (engine.QueueConfig.Prefetch): a
// worker holds more jobs under lease than it runs. On a graceful stop the
// surplus goes back to available with nothing charged; after SIGKILL the
// reaper reclaims it, and charges it a crash, since the process died.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// faultConcurrency is startWorker's --concurrency.
const faultConcurrency = 8

// faultPrefetch is the surplus the tests' workers hold: fixed, since
// with the default it follows the rate, and these sleeping jobs run
// too slowly for one.
const faultPrefetch = "100"

// heldBy returns the jobs running in the store under worker's lease.
func heldBy(t *testing.T, s backend.Store, ids []string, worker string) map[string]bool {
	t.Helper()
	held := map[string]bool{}
	for id, j := range jobs(t, s, ids) {
		if j.State != engine.StateRunning {
			continue
		}
		if j.Lease == nil || !strings.HasPrefix(j.Lease.WorkerID, worker+"/") {
			t.Fatalf("job %s running without %s's lease: %+v", id, worker, j.Lease)
		}
		held[id] = true
	}
	return held
}

func TestFaultPrefetchReleasedOnStop(t *testing.T) {
	bin, dbPath, store, e := faultSetup(t)
	ids := enqueueSleeps(t, e, 300, 100, 200)

	w := startWorker(t, bin, dbPath, "prefetch-stop", "--prefetch", faultPrefetch)
	var held map[string]bool
	waitFor(t, "the worker to hold more jobs than it runs", 60*time.Second, func() bool {
		if w.exited() {
			t.Fatalf("worker exited early: %v", w.err)
		}
		held = heldBy(t, store, ids, "prefetch-stop")
		return len(held) > faultConcurrency
	})
	t.Logf("the worker held %d jobs at concurrency %d", len(held), faultConcurrency)
	w.stop(t)

	// Right after the exit, before any reaper could act: nothing is left
	// running, and what did not complete is available again, uncharged.
	// The running jobs finish well within the shutdown bound, so every
	// job released at shutdown is one held ahead of a slot.
	released := 0
	for id, j := range jobs(t, store, ids) {
		switch j.State {
		case engine.StateCompleted:
		case engine.StateAvailable:
			if j.Attempt != 0 || j.CrashAttempt != 0 || len(j.Errors) != 0 || j.Lease != nil {
				t.Errorf("job %s available after the stop was charged: attempt %d, crash_attempt %d, errors %+v, lease %+v",
					id, j.Attempt, j.CrashAttempt, j.Errors, j.Lease)
			}
			evs, err := store.JobEventList(context.Background(), &backend.JobEventListParams{JobID: id})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(evs); n > 0 && evs[n-1].Kind == engine.EventShutdown {
				released++
			}
		default:
			t.Errorf("job %s: state %s after a graceful stop, want completed or available", id, j.State)
		}
	}
	if released == 0 {
		t.Error("no job was released at shutdown, want the ones held ahead of a slot")
	}
	t.Logf("%d jobs held ahead of a slot were released at shutdown", released)
}

func TestFaultPrefetchReclaimedAfterKill(t *testing.T) {
	bin, dbPath, store, e := faultSetup(t)
	ids := enqueueSleeps(t, e, 300, 100, 200)

	first := startWorker(t, bin, dbPath, "prefetch-kill-1", "--prefetch", faultPrefetch)
	waitFor(t, "the first worker to hold more jobs than it runs", 60*time.Second, func() bool {
		if first.exited() {
			t.Fatalf("first worker exited early: %v", first.err)
		}
		return len(heldBy(t, store, ids, "prefetch-kill-1")) > faultConcurrency
	})
	first.kill(t)
	// Dead, it writes nothing more: what it held is what the store shows.
	held := heldBy(t, store, ids, "prefetch-kill-1")
	if len(held) <= faultConcurrency {
		t.Fatalf("the killed worker held %d jobs, want more than its concurrency %d", len(held), faultConcurrency)
	}
	t.Logf("killed the first worker holding %d jobs at concurrency %d", len(held), faultConcurrency)

	// The held jobs are not invisible: the second worker's reaper finds
	// them (lease expired, process gone) and every job completes.
	second := startWorker(t, bin, dbPath, "prefetch-kill-2")
	var final map[string]*engine.Job
	waitFor(t, "every job to complete", 120*time.Second, func() bool {
		if second.exited() {
			t.Fatalf("second worker exited: %v", second.err)
		}
		final = jobs(t, store, ids)
		return countStates(final)[engine.StateCompleted] == len(ids)
	})
	second.stop(t)

	for id, j := range final {
		switch {
		case held[id] && (j.CrashAttempt != 1 || crashErrors(j) != 1):
			t.Errorf("job %s held by the killed worker: crash_attempt %d, %d crash errors, want 1 and 1", id, j.CrashAttempt, crashErrors(j))
		case !held[id] && (j.CrashAttempt != 0 || crashErrors(j) != 0):
			t.Errorf("job %s not held by the killed worker: crash_attempt %d, errors %+v", id, j.CrashAttempt, j.Errors)
		}
	}
}
