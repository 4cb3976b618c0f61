package backendtest

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Crash counts per (fingerprint, step), kept by each crash's own write.

// stepCrash is the crash outcome of j inside step (its plan names it),
// quarantining the fingerprint when quarantine is set.
func stepCrash(j *engine.Job, step string, quarantine bool) *backend.JobFinishParams {
	o := Outcome{JobRef: refOf(j), To: engine.StateRetryable, Charge: backend.ChargeCrash, Delay: time.Hour,
		Error: &engine.AttemptError{Crash: true, Message: "crash in " + step}, Event: engine.EventCrashed, Actor: "w"}
	if quarantine {
		o.To, o.Reason, o.Delay, o.Quarantine, o.Event = engine.StateQuarantined, engine.ReasonQuarantined, 0, true, engine.EventQuarantined
	}
	p := o.Plan(j)
	p.Fingerprint.StepCrash = step
	return p
}

// testStepCrashCounts: each crash inside a step adds one to its
// (fingerprint, step) count in the crash's write, before any record
// exists too; a refused crash (a lost lease) counts nothing; the record
// returns the counts (list and get); a release keeps them; another
// fingerprint's counts are its own.
func testStepCrashCounts(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	mk := func(id, fp string) *backend.JobInsertParams {
		j := djob(id, "q", "k")
		j.Fingerprint = fp
		return j
	}
	insertRes(t, s, mk("a", "pill"), mk("b", "pill"), mk("c", "pill"), mk("o", "other"))
	js := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 4}).Jobs
	by := map[string]*engine.Job{}
	for _, j := range js {
		by[j.ID] = j
	}
	if len(by) != 4 {
		t.Fatalf("claimed %v", ids(js))
	}
	// A crash refused for a stale lease counts nothing.
	stale := stepCrash(by["a"], "render", false)
	stale.Fence++
	if _, err := s.JobFinish(ctx, stale); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("stale crash: %v, want ErrLeaseLost", err)
	}
	for _, p := range []*backend.JobFinishParams{
		stepCrash(by["a"], "render", false),
		stepCrash(by["b"], "#2", false),
		stepCrash(by["o"], "upload", true),
		stepCrash(by["c"], "render", true),
	} {
		if _, err := s.JobFinish(ctx, p); err != nil {
			t.Fatalf("crash of %s: %v", p.ID, err)
		}
	}
	want := map[string]map[string]int{"pill": {"render": 2, "#2": 1}, "other": {"upload": 1}}
	check := func(when string) {
		t.Helper()
		fps, err := s.FingerprintList(ctx, &backend.FingerprintListParams{})
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, fp := range fps {
			if w, ok := want[fp.Fingerprint]; ok {
				seen++
				if !maps.Equal(fp.StepCrashes, w) {
					t.Fatalf("%s: list: step crashes of %s %v, want %v", when, fp.Fingerprint, fp.StepCrashes, w)
				}
			}
		}
		if seen != len(want) {
			t.Fatalf("%s: list has %d of the fingerprints, want %d", when, seen, len(want))
		}
		fp, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "pill"})
		if err != nil || !maps.Equal(fp.StepCrashes, want["pill"]) {
			t.Fatalf("%s: get: step crashes of pill %v (%v), want %v", when, fp, err, want["pill"])
		}
	}
	check("quarantined")
	if _, err := s.FingerprintRelease(ctx, releasePlan(t, "pill", "")); err != nil {
		t.Fatal(err)
	}
	check("released")
}
