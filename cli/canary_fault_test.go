package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
)

// TestFaultCanaryResumesInItsStage: a canary retry run by `sluice serve`,
// the server SIGKILLed during the sample's wait and again during the
// halting window. Each restarted server takes the operation over in the
// stage it was in: the sample is neither picked nor redriven again, the
// window keeps the jobs redriven before the kill, the run halts on what
// they did, and no server redrives a job past the halt until it is
// resumed. The jobs fail while a flag file exists (chaos.outage), so the
// test turns the outage on and off between the processes' steps; with no
// worker running, redriven jobs stay waiting, which holds each stage
// still for its kill.
func TestFaultCanaryResumesInItsStage(t *testing.T) {
	bin, storeURL, store, e := faultSetup(t)
	ctx := context.Background()
	flag := filepath.Join(t.TempDir(), "outage")
	outage := func(on bool) {
		t.Helper()
		if on {
			if err := os.WriteFile(flag, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(flag); err != nil {
			t.Fatal(err)
		}
	}
	outage(true)
	const n = 40
	ps := make([]engine.EnqueueParams, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("outage-%02d", i)
		ps[i] = engine.EnqueueParams{ID: ids[i], Queue: chaos.Queue, Kind: chaos.KindOutage, MaxAttempts: 1,
			Args: chaos.Outage{Flag: flag, N: i}}
	}
	if _, err := e.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, bin, storeURL, "w1")
	waitFor(t, "every job dead of the outage", time.Minute, func() bool {
		return countStates(jobs(t, store, ids))[engine.StateArchived] == n
	})
	w.stop(t)

	dry, err := e.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{States: []engine.State{engine.StateArchived},
		Kinds: []string{chaos.KindOutage}}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Bulk(ctx, engine.BulkParams{Plan: dry.Plan, Canary: &engine.CanaryParams{Size: 8, MinSuccess: 0.9,
		HaltFailureRate: 0.2, Window: 16, Timeout: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Operation.ID
	op := func() *engine.Operation {
		t.Helper()
		o, err := store.OperationGet(ctx, &backend.OperationGetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	serve := func(name string) *child {
		return startChild(t, bin, name, "serve", "--store", storeURL, "--listen", "127.0.0.1:0", "--log-level", "debug")
	}

	// The sample is redriven, and waits: no worker runs it. Killed there.
	srv := serve("serve-1")
	waitFor(t, "the sample redriven, its outcomes awaited", time.Minute, func() bool {
		c := op().Canary
		return c.Stage == engine.CanaryWaiting
	})
	srv.kill(t)
	sample := op().Canary.Sample
	if len(sample) != 8 || !slices.Equal(redriven(t, store, ids), sorted(sample)) {
		t.Fatalf("after the kill in the wait: sample %v, redriven %v", sample, redriven(t, store, ids))
	}

	// The fix holds for the sample: a worker runs it to success, then the
	// outage returns and the worker stops, before any server looks.
	outage(false)
	w = startWorker(t, bin, storeURL, "w2")
	waitFor(t, "the sample's jobs completed", time.Minute, func() bool {
		js := jobs(t, store, sample)
		return countStates(js)[engine.StateCompleted] == len(sample)
	})
	w.stop(t)
	outage(true)

	// The next server takes the wait over (once the dead one's lease ran
	// out), finds the sample passed, and redrives on: half a window (8)
	// at most ahead of the outcomes it has seen, which no worker gives.
	// Killed there, during the halting window.
	srv = serve("serve-2")
	waitFor(t, "the run watching 8 redriven jobs past its sample", time.Minute, func() bool {
		c := op().Canary
		return c.Stage == engine.CanaryWatching && len(c.Recent) == 16
	})
	srv.kill(t)
	o := op()
	if got := redriven(t, store, ids); len(got) != 16 || !slices.Equal(sorted(o.Canary.Recent), got) || o.Canary.SampleOutcomes.OK != 8 ||
		!slices.Equal(o.Canary.Sample, sample) {
		t.Fatalf("after the kill in the window: redriven %v, canary %+v", got, o.Canary)
	}

	// The redriven fail again: a worker runs them into the outage, and the
	// third server, taking over the window as it was, halts the run.
	w = startWorker(t, bin, storeURL, "w3")
	srv = serve("serve-3")
	waitFor(t, "the run halted", time.Minute, func() bool { return op().Status == engine.OperationHalted })
	o = op()
	if !strings.Contains(o.Error, "of the last 16 redriven failed again") || !strings.Contains(o.Error, chaos.OutageError) ||
		o.Canary.Stage != engine.CanaryHalted || len(redriven(t, store, ids)) != 16 {
		t.Fatalf("the halted run: %q %+v, redriven %d", o.Error, o.Canary, len(redriven(t, store, ids)))
	}

	// Killed once more and restarted: the halted run stays as it is. A
	// later operation that the new server completes shows its runner
	// passed over the halted one (the oldest is taken first).
	srv.kill(t)
	srv = serve("serve-4")
	later, err := e.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{IDs: []string{"no-such-job"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a later operation completed", time.Minute, func() bool {
		l, err := store.OperationGet(ctx, &backend.OperationGetParams{ID: later.Operation.ID})
		return err == nil && l.Status == engine.OperationCompleted
	})
	if o := op(); o.Status != engine.OperationHalted || len(redriven(t, store, ids)) != 16 {
		t.Fatalf("a restarted server redrove past the halt: %s, %d redriven", o.Status, len(redriven(t, store, ids)))
	}

	// Fixed for good and resumed: the rest is redriven, each job once.
	outage(false)
	if _, err := e.ResumeOperation(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed run completed", 2*time.Minute, func() bool { return op().Status == engine.OperationCompleted })
	if got := redriven(t, store, ids); len(got) != n {
		t.Fatalf("after the resume %d of %d jobs redriven", len(got), n)
	}
	for _, id := range ids {
		if k := len(retries(t, store, id)); k != 1 {
			t.Fatalf("job %s redriven %d times", id, k)
		}
	}
	srv.stop(t)
	w.stop(t)
}

// retries are the operator retries of job id.
func retries(t *testing.T, s *sqlite.Store, id string) []engine.Event {
	t.Helper()
	evs, err := s.JobEventList(context.Background(), &backend.JobEventListParams{JobID: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []engine.Event
	for _, ev := range evs {
		if ev.Kind == engine.EventRetried {
			out = append(out, ev)
		}
	}
	return out
}

// redriven is the ids among ids retried at least once, sorted.
func redriven(t *testing.T, s *sqlite.Store, ids []string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		if len(retries(t, s, id)) > 0 {
			out = append(out, id)
		}
	}
	return sorted(out)
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
