package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
)

// TestFaultPoisonPillQuarantinedUnderOneWorkerID: a supervisor that
// restarts its worker on exit under the same --worker-id (a pod name that
// survives container restarts). The poison pill SIGKILLs every process
// that runs it; each restart is a new incarnation, so the dead one's lease
// is charged a crash, and the pill is quarantined after three, on every
// store. The crashes name the incarnation that ran the pill, never the
// reaper.
func TestFaultPoisonPillQuarantinedUnderOneWorkerID(t *testing.T) {
	skipUnlessFault(t)
	for _, sc := range workflowStoreCases() {
		t.Run(sc.name, func(t *testing.T) { pillUnderOneWorkerID(t, sc.url(t)) })
	}
}

func pillUnderOneWorkerID(t *testing.T, storeURL string) {
	store, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	ctx := context.Background()
	pill, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: chaos.Queue, Kind: chaos.KindExit,
		Args: map[string]any{"why": "kills its own process"}})
	if err != nil {
		t.Fatal(err)
	}
	const name, maxStarts = "pod-0", 8
	starts := 0
	var w *child
	waitFor(t, "the poison pill quarantined", 2*time.Minute, func() bool {
		if w == nil || w.exited() {
			if starts == maxStarts {
				p, _ := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: pill.ID})
				t.Fatalf("%d starts of %s and the pill is not quarantined: %s crash_attempt %d, errors %+v",
					starts, name, p.State, p.CrashAttempt, p.Errors)
			}
			starts++
			w = startWorker(t, bin, storeURL, name, "--crash-limit", "3")
		}
		p, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: pill.ID})
		if err != nil {
			t.Fatal(err)
		}
		return p.State == engine.StateQuarantined
	})
	w.stop(t)
	p, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: pill.ID})
	if err != nil {
		t.Fatal(err)
	}
	if p.CrashAttempt != 3 || crashErrors(p) != 3 {
		t.Errorf("pill: crash_attempt %d, %d crash errors; want 3 and 3: %+v", p.CrashAttempt, crashErrors(p), p.Errors)
	}
	ran := map[string]bool{}
	for _, er := range p.Errors {
		if !strings.HasPrefix(er.Worker, name+"/") || !strings.Contains(er.Message, "worker "+er.Worker+" stopped heartbeating") {
			t.Errorf("a crash not credited to the incarnation of %s that ran the pill: %+v", name, er)
		}
		ran[er.Worker] = true
	}
	if len(ran) != len(p.Errors) {
		t.Errorf("crashes of one incarnation charged twice: %+v", p.Errors)
	}
	d, err := e.GetJob(ctx, pill.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range d.Timeline {
		switch {
		case ev.Kind == engine.EventLeaseLost:
			t.Errorf("a dead incarnation's lease released as a living one's: %+v", ev)
		case ev.Kind == engine.EventClaimed && strings.HasPrefix(ev.Actor, "reaper:"):
			t.Errorf("a claim credited to the reaper: %+v", ev)
		}
	}
	t.Logf("quarantined after %d starts of %s", starts, name)
}
