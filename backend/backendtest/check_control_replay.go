package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// testControlReplay: a 5-step job dead at step 4, replayed from step 3,
// runs steps 3 to 5 in a new job that links back both ways; the original
// stays archived. The preview says what is kept and what runs again, and
// a replacement result for step 2 feeds step 3.
func testControlReplay(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var c stepCounter
	handler := func(ctx context.Context, j *engine.Job) error {
		v := 0
		for n := 1; n <= 5; n++ {
			prev := v
			var err error
			v, err = engine.Step(ctx, fmt.Sprintf("s%d", n), func(context.Context) (int, error) {
				c.ran(fmt.Sprintf("%s/s%d", j.ID, n))
				if n == 4 && j.ID == "w" {
					return 0, errors.New("step 4 broke")
				}
				return prev + n, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	e := startEngine(t, s, fast("ctl-worker", "wf"), engine.Kind{Name: "wf5", MaxAttempts: 1, Handler: handler})
	ctl := h.control(t, e)
	ctx := engine.WithActor(context.Background(), "maya")
	enqueue(t, e, engine.EnqueueParams{ID: "w", Queue: "wf", Kind: "wf5"})
	waitState(t, s, "w", engine.StateArchived)

	plan, err := ctl.ReplayPreview(ctx, "w", engine.ReplayParams{Step: 3})
	if err != nil {
		t.Fatalf("ReplayPreview: %v", err)
	}
	if len(plan.Kept) != 2 || plan.Kept[1].Name != "s2" || len(plan.Rerun) != 2 || plan.Rerun[1].State != engine.StepFailed {
		t.Fatalf("preview kept %+v rerun %+v", plan.Kept, plan.Rerun)
	}
	if _, err := ctl.ReplayFromStep(ctx, "w", engine.ReplayParams{Step: 6}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("replay from step 6 of 4 recorded: %v, want ErrInvalid", err)
	}

	n, err := ctl.ReplayFromStep(ctx, "w", engine.ReplayParams{Step: 3, ID: "w-r"})
	if err != nil {
		t.Fatalf("ReplayFromStep: %v", err)
	}
	if n.ID != "w-r" || n.Kind != "wf5" || n.Queue != "wf" {
		t.Fatalf("replay job %s", describe(n))
	}
	done := waitState(t, s, "w-r", engine.StateCompleted)
	for step, want := range map[string]int{"w/s1": 1, "w/s2": 1, "w/s3": 1, "w/s4": 1, "w/s5": 0, "w-r/s1": 0, "w-r/s2": 0, "w-r/s3": 1, "w-r/s4": 1, "w-r/s5": 1} {
		if got := c.get(step); got != want {
			t.Errorf("%s ran %d times, want %d", step, got, want)
		}
	}
	cp := checkpointOf(t, done)
	if cp.ForkedFrom == nil || *cp.ForkedFrom != (engine.Fork{JobID: "w", Step: 3}) || len(cp.Steps) != 5 || string(cp.Steps[4].Result) != "15" {
		t.Fatalf("replay's checkpoint %+v", cp)
	}
	orig := getJob(t, s, "w")
	ocp := checkpointOf(t, orig)
	if orig.State != engine.StateArchived || len(ocp.Forks) != 1 || ocp.Forks[0] != (engine.Fork{JobID: "w-r", Step: 3}) || len(ocp.Steps) != 4 {
		t.Fatalf("original after the replay: %s, checkpoint %+v", describe(orig), ocp)
	}
	if !hasEvent(events(t, s, "w"), engine.EventForked) || !hasEvent(events(t, s, "w-r"), engine.EventForked) {
		t.Fatalf("fork events: original %v, replay %v", eventKinds(events(t, s, "w")), eventKinds(events(t, s, "w-r")))
	}

	// With a replacement result for step 2: step 3 reads it.
	if _, err := ctl.ReplayFromStep(ctx, "w", engine.ReplayParams{Step: 3, ID: "w-r2", Result: json.RawMessage(`100`)}); err != nil {
		t.Fatalf("ReplayFromStep with a result: %v", err)
	}
	done = waitState(t, s, "w-r2", engine.StateCompleted)
	if cp := checkpointOf(t, done); string(cp.Steps[1].Result) != "100" || string(cp.Steps[2].Result) != "103" {
		t.Fatalf("replay with a replacement result: %+v", cp.Steps)
	}
	// Retry with new input starts over: its copy has a clean checkpoint.
	rwi, err := ctl.RetryWithInput(ctx, "w", engine.RetryWithInputParams{ID: "w-input", Payload: json.RawMessage(`{"fixed":true}`)})
	if err != nil {
		t.Fatalf("RetryWithInput: %v", err)
	}
	if cp := checkpointOf(t, rwi); len(cp.Steps) != 0 || cp.ForkedFrom != nil {
		t.Fatalf("retry with input kept a checkpoint: %+v", cp)
	}
	waitState(t, s, "w-input", engine.StateCompleted)
	// Its steps ran (none was replayed from the original's checkpoint).
	if c.get("w-input/s1") != 1 || c.get("w-input/s5") != 1 {
		t.Fatalf("retry with input ran s1 %d times and s5 %d times, want once each", c.get("w-input/s1"), c.get("w-input/s5"))
	}
	// A job that is not terminal is not replayed.
	if _, err := ctl.ReplayFromStep(ctx, "w-r2", engine.ReplayParams{Step: 1}); err != nil {
		t.Fatalf("replay of a completed job from step 1: %v", err)
	}
	enqueue(t, e, engine.EnqueueParams{ID: "later", Queue: "elsewhere", Kind: "wf5"})
	if _, err := ctl.ReplayFromStep(ctx, "later", engine.ReplayParams{Step: 1}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("replay of a waiting job: %v, want ErrWrongState", err)
	}
}

// testControlQuarantineStepCrashes: a workflow whose second step crashes
// its process-worth of times is quarantined; Quarantine counts its crashes
// on that step.
func testControlQuarantineStepCrashes(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cfg := fast("ctl-worker", "wf")
	cfg.CrashLimit = 2
	e := startEngine(t, s, cfg, engine.Kind{Name: "pill", Handler: func(ctx context.Context, j *engine.Job) error {
		if _, err := engine.Step(ctx, "fetch", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := engine.Step(ctx, "render", func(context.Context) (int, error) { panic("render blew up") })
		return err
	}})
	ctl := h.control(t, e)
	enqueue(t, e, engine.EnqueueParams{ID: "pill-1", Queue: "wf", Kind: "pill"})
	j := waitState(t, s, "pill-1", engine.StateQuarantined)
	fps, err := ctl.Quarantine(context.Background())
	if err != nil {
		t.Fatalf("Quarantine: %v", err)
	}
	for _, fp := range fps {
		if fp.Fingerprint != j.Fingerprint {
			continue
		}
		if fp.StepCrashes["render"] != 2 || len(fp.StepCrashes) != 1 {
			t.Fatalf("step crashes of the pill's fingerprint: %v, want render:2", fp.StepCrashes)
		}
		return
	}
	t.Fatalf("the pill's fingerprint is not in Quarantine: %+v", fps)
}
