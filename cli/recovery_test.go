package cli_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
)

// TestFaultRecoveryAfterPillKill: a process running 50 jobs, one of them a
// poison pill, dies. The 49 innocents come back at close to the normal
// rate — their first crash admits them in groups that grow as they
// succeed — none is quarantined, and the pill alone reaches the crash
// limit, taking down no more processes than that limit. The recovery's
// time next to 49 ordinary jobs on the same workers is logged, not
// asserted: on a loaded machine it is a figure, not a verdict.
func TestFaultRecoveryAfterPillKill(t *testing.T) {
	bin, storeURL, store, e := faultSetup(t)
	ctx := context.Background()
	const ms, remaining, crashLimit = 1000, 2, 3
	completedAll := func(ids []string) func() bool {
		return func() bool { return countStates(jobs(t, store, ids))[engine.StateCompleted] == len(ids) }
	}
	spawned := 0
	spawn := func(extra ...string) *child {
		spawned++
		return startWorker(t, bin, storeURL, fmt.Sprintf("rec-%d", spawned), append([]string{"--crash-limit", fmt.Sprint(crashLimit)}, extra...)...)
	}

	// The baseline: 49 ordinary jobs on the remaining workers.
	var ws []*child
	for range remaining {
		ws = append(ws, spawn())
	}
	t0 := time.Now()
	base := enqueueSleeps(t, e, 49, ms, ms)
	waitFor(t, "49 ordinary jobs completed", 60*time.Second, completedAll(base))
	ordinary := time.Since(t0)
	for _, w := range ws {
		w.stop(t)
	}

	// The crash: one process of concurrency 50 takes the 49 jobs and the
	// pill; the pill takes the process down under them.
	innocents := enqueueSleeps(t, e, 49, ms, ms)
	pill, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: chaos.Queue, Kind: chaos.KindExit,
		Args: map[string]any{"why": "kills its own process"}})
	if err != nil {
		t.Fatal(err)
	}
	big := spawn("--concurrency", "50")
	select {
	case <-big.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the process with the pill did not die")
	}

	// Recovery on the remaining workers, replaced when the pill takes one
	// down. It is timed from the moment every innocent is due again (the
	// reaper charged the crash), so lease expiry is not counted.
	ws = ws[:0]
	for range remaining {
		ws = append(ws, spawn())
	}
	var due time.Time
	waitFor(t, "the innocents reaped and due again", 60*time.Second, func() bool {
		for _, j := range jobs(t, store, innocents) {
			if j.CrashAttempt != 1 || j.State == engine.StateRunning && j.Fence == 1 {
				return false
			}
		}
		due = time.Now()
		return true
	})
	var recovered time.Duration
	waitFor(t, "the innocents completed and the pill quarantined", 120*time.Second, func() bool {
		for i, w := range ws {
			if w.exited() {
				if spawned > 20 {
					t.Fatalf("%d workers started; the pill is still not quarantined", spawned)
				}
				ws[i] = spawn()
			}
		}
		if recovered == 0 && completedAll(innocents)() {
			recovered = time.Since(due)
		}
		p, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: pill.ID})
		if err != nil {
			t.Fatal(err)
		}
		return recovered > 0 && p.State == engine.StateQuarantined
	})
	for _, w := range ws {
		w.stop(t)
	}

	p, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: pill.ID})
	if err != nil {
		t.Fatal(err)
	}
	if p.CrashAttempt != crashLimit || p.TerminalReason != engine.ReasonQuarantined {
		t.Errorf("pill: %s crash_attempt %d reason %q, want quarantined at the crash limit %d", p.State, p.CrashAttempt, p.TerminalReason, crashLimit)
	}
	// The baseline's workers, the pill's first process, the two that
	// recover, and one replacement for each of the pill's later crashes.
	if most := remaining + 1 + remaining + crashLimit - 1; spawned > most {
		t.Errorf("%d worker processes started, want at most %d: the pill ran past its crash limit", spawned, most)
	}
	worst := 0
	for id, j := range jobs(t, store, innocents) {
		if j.State != engine.StateCompleted {
			t.Errorf("innocent %s: %s, want completed", id, j.State)
		}
		if j.CrashAttempt > 2 {
			t.Errorf("innocent %s: crash_attempt %d, want at most 2", id, j.CrashAttempt)
		}
		worst = max(worst, j.CrashAttempt)
	}
	ratio := float64(recovered) / float64(ordinary)
	t.Logf("49 ordinary jobs: %s; 49 innocents after the crash: %s (%.2f×); worst innocent crash_attempt %d; %d worker processes",
		ordinary.Round(time.Millisecond), recovered.Round(time.Millisecond), ratio, worst, spawned)
}
