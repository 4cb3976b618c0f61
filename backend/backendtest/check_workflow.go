package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Durable workflows (engine.Step) and dead-letter routing: the checkpoint
// write under the lease, and the dead-letter job written with the death.

func workflowChecks() []check {
	return []check{
		{name: "StepsReplayAfterFailure", fn: testStepsReplay},
		{name: "CheckpointFencedAndRefusedAfterExpiry", fn: testCheckpointFenced},
		{name: "CheckpointGroupEachItemFenced", fn: testCheckpointGroup},
		{name: "ZombieStopsAtNextStepNotRecorded", fn: testZombieStep},
		{name: "StepMismatchUndecodableThenUpgraderCompletes", fn: testStepMismatch},
		{name: "NewerStepSetLeftForNewerWorker", fn: testNewerStepSet},
		{name: "CrashInsideStepCountedOnStep", fn: testStepCrash},
		{name: "StepCrashCountsKeptByTheCrashWrite", fn: testStepCrashCounts},
	}
}

func deadLetterChecks() []check {
	return []check{
		{name: "WrittenWithTheDeathOrNotAtAll", fn: testDeadLetterAtomic},
		{name: "PerKindRuleBeatsDefaultNoTagsOnDeadOnce", fn: testDeadLetterRules},
		{name: "RedrivenDeathRetriesExistingDeadLetter", fn: testDeadLetterRedrive},
		{name: "DyingDeadLetterJobNotRouted", fn: testDeadLetterNotRerouted},
		{name: "QuarantineTripperRouted", fn: testDeadLetterQuarantine},
		{name: "DeadlineDeathAtClaimRoutedPerKindInsertOrRetry", fn: testDeadLetterAtClaim},
		{name: "DeadlineDeathAtClaimEngineRuleBeatsDefault", fn: testDeadLetterAtClaimEngine},
	}
}

// stepCounter counts the runs of each step (the side effects).
type stepCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *stepCounter) ran(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *stepCounter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func checkpointOf(t testing.TB, j *engine.Job) engine.Checkpoint {
	t.Helper()
	cp, err := engine.ParseCheckpoint(j.Checkpoint)
	if err != nil {
		t.Fatalf("job %s: %v", j.ID, err)
	}
	return cp
}

func stepNames(cp engine.Checkpoint) string {
	var b strings.Builder
	for i, s := range cp.Steps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%s", s.Name, s.State)
	}
	return b.String()
}

func stopEngine(t testing.TB, e *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// testStepsReplay: a 3-step handler whose third step fails once; the
// retry replays steps 1 and 2 from the checkpoint (their results feed the
// next steps) and runs step 3 again.
func testStepsReplay(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var c stepCounter
	handler := func(ctx context.Context, j *engine.Job) error {
		a, err := engine.Step(ctx, "one", func(context.Context) (int, error) { c.ran("one"); return 20, nil })
		if err != nil {
			return err
		}
		b, err := engine.Step(ctx, "two", func(context.Context) (int, error) { c.ran("two"); return a + 1, nil })
		if err != nil {
			return err
		}
		_, err = engine.Step(ctx, "three", func(context.Context) (string, error) {
			c.ran("three")
			if c.get("three") == 1 {
				return "", errors.New("three fails once")
			}
			return fmt.Sprintf("got %d", b*2), nil
		})
		return err
	}
	e := startEngine(t, s, fast("w", "wf"), engine.Kind{Name: "wf", Handler: handler})
	enqueue(t, e, engine.EnqueueParams{ID: "j", Queue: "wf", Kind: "wf"})
	j := waitState(t, s, "j", engine.StateCompleted)
	if c.get("one") != 1 || c.get("two") != 1 || c.get("three") != 2 {
		t.Fatalf("runs one=%d two=%d three=%d, want 1 1 2", c.get("one"), c.get("two"), c.get("three"))
	}
	cp := checkpointOf(t, j)
	if got := stepNames(cp); got != "one:completed,two:completed,three:completed" {
		t.Fatalf("checkpoint steps %s", got)
	}
	if string(cp.Steps[2].Result) != `"got 42"` || cp.Steps[2].Attempts != 2 || cp.Steps[0].Attempts != 1 {
		t.Fatalf("checkpoint %+v", cp.Steps)
	}
}

// testCheckpointFenced: a step's write applies under the job's lease only,
// and not once the lease has expired by the store's clock.
func testCheckpointFenced(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("c", "cq"))
	j := claimP(t, s, backend.JobClaimParams{Queue: "cq", WorkerID: "w-a", LeaseID: "lease-a", Limit: 1, LeaseDuration: time.Hour}).Jobs[0]
	ref := refOf(j)
	cp1 := json.RawMessage(`{"version":1,"steps":[{"name":"a","state":"completed","result":1,"attempts":1}]}`)
	if err := checkpointOne(s, ref, cp1); err != nil {
		t.Fatalf("checkpoint under the lease: %v", err)
	}
	if got := getJob(t, s, "c"); !jsonEqual(got.Checkpoint, cp1) {
		t.Fatalf("checkpoint %s, want %s", got.Checkpoint, cp1)
	}
	before := snap(t, s, "c")
	for _, bad := range []backend.JobRef{
		{ID: "c", LeaseID: "lease-x", Fence: ref.Fence},
		{ID: "c", LeaseID: ref.LeaseID, Fence: ref.Fence + 1},
		{ID: "nope", LeaseID: ref.LeaseID, Fence: ref.Fence},
	} {
		err := checkpointOne(s, bad, json.RawMessage(`{"steps":[]}`))
		if !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("checkpoint with %+v: %v, want ErrLeaseLost", bad, err)
		}
	}
	sameSnapshot(t, "refused checkpoints", before, snap(t, s, "c"))

	// A lease that ran out records no step, though no one took the job yet.
	insert(t, s, jobParams("d", "dq"))
	d := claimP(t, s, backend.JobClaimParams{Queue: "dq", WorkerID: "w-a", LeaseID: "lease-d", Limit: 1, LeaseDuration: 50 * time.Millisecond}).Jobs[0]
	eventually(t, waitLong, func() bool {
		xs, err := s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 10})
		if err != nil {
			t.Fatalf("JobListExpiredLeases: %v", err)
		}
		for _, x := range xs {
			if x.Job.ID == "d" {
				return true
			}
		}
		return false
	}, "d's lease to expire")
	before = snap(t, s, "d")
	if err := checkpointOne(s, refOf(d), cp1); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("checkpoint after the lease expired: %v, want ErrLeaseLost", err)
	}
	sameSnapshot(t, "checkpoint after expiry", before, snap(t, s, "d"))

	// A finish plan's checkpoint is written with the outcome.
	cp2 := json.RawMessage(`{"version":1,"steps":[{"name":"a","state":"failed","attempts":1,"error":"boom"}]}`)
	p := Outcome{JobRef: ref, To: engine.StateRetryable, Charge: backend.ChargeAttempt, Delay: time.Hour,
		Error: &engine.AttemptError{Message: "boom"}, Event: engine.EventFailed}.Plan(j)
	p.Checkpoint = &backend.CheckpointWrite{Checkpoint: cp2}
	w, err := s.JobFinish(ctx, p)
	if err != nil {
		t.Fatalf("JobFinish with a checkpoint: %v", err)
	}
	if !jsonEqual(w.Checkpoint, cp2) || !jsonEqual(getJob(t, s, "c").Checkpoint, cp2) {
		t.Fatalf("checkpoint after finish: returned %s, stored %s, want %s", w.Checkpoint, getJob(t, s, "c").Checkpoint, cp2)
	}
}

// checkpointOne writes one step's checkpoint and returns its item's
// outcome.
func checkpointOne(s backend.Store, ref backend.JobRef, raw json.RawMessage) error {
	res, err := s.JobCheckpoint(context.Background(), &backend.JobCheckpointParams{Items: []backend.JobCheckpointItem{{JobRef: ref, Checkpoint: raw}}})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("JobCheckpoint: %d results for 1 item", len(res))
	}
	return res[0]
}

// testCheckpointGroup: one group of step writes, each fenced on its own:
// the stale item is refused, the others are written.
func testCheckpointGroup(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("g1", "gq"), jobParams("g2", "gq"), jobParams("g3", "gq"))
	js := claimP(t, s, backend.JobClaimParams{Queue: "gq", WorkerID: "w", LeaseID: "lease-g", Limit: 3, LeaseDuration: time.Hour}).Jobs
	if len(js) != 3 {
		t.Fatalf("claimed %v", ids(js))
	}
	items := make([]backend.JobCheckpointItem, 3)
	for i, j := range js {
		items[i] = backend.JobCheckpointItem{JobRef: refOf(j), Checkpoint: json.RawMessage(fmt.Sprintf(`{"steps":[{"name":"s","state":"completed","result":%d,"attempts":1}]}`, i))}
	}
	items[1].Fence++
	stale := items[1].ID
	before := snap(t, s, stale)
	res, err := s.JobCheckpoint(ctx, &backend.JobCheckpointParams{Items: items})
	if err != nil || len(res) != 3 {
		t.Fatalf("JobCheckpoint: %v %v", res, err)
	}
	for i, it := range items {
		got := getJob(t, s, it.ID)
		if i == 1 {
			if !errors.Is(res[i], engine.ErrLeaseLost) {
				t.Fatalf("stale item: %v, want ErrLeaseLost", res[i])
			}
			continue
		}
		if res[i] != nil || !jsonEqual(got.Checkpoint, it.Checkpoint) {
			t.Fatalf("item %s: %v, checkpoint %s, want %s", it.ID, res[i], got.Checkpoint, it.Checkpoint)
		}
	}
	sameSnapshot(t, "a stale item of a group", before, snap(t, s, stale))
}

// testZombieStep: while step two runs, the job's lease is taken from the
// worker (released and claimed by another). The worker's result of step
// two is not recorded and it runs no further step.
func testZombieStep(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	var c stepCounter
	var stepErr error
	var stolen *engine.Job
	done := make(chan struct{})
	handler := func(hctx context.Context, j *engine.Job) error {
		defer close(done)
		ref := refOf(j)
		if _, err := engine.Step(hctx, "one", func(context.Context) (int, error) { c.ran("one"); return 1, nil }); err != nil {
			return err
		}
		_, err := engine.Step(hctx, "two", func(context.Context) (int, error) {
			c.ran("two")
			// Another party takes the job over: the reaper releases it and
			// worker B claims it, while this worker still runs the step.
			if _, err := s.JobFinish(ctx, Outcome{JobRef: ref, To: engine.StateAvailable, Event: engine.EventLeaseLost, Actor: "reaper"}.Plan(j)); err != nil {
				return 0, err
			}
			res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "zw", WorkerID: "w-b", LeaseID: "lease-b", Limit: 1,
				Kinds: map[string]int{"zw": 1}, LeaseDuration: time.Hour})
			if err != nil || len(res.Jobs) != 1 {
				return 0, fmt.Errorf("claim of B: %v %v", res, err)
			}
			stolen = res.Jobs[0]
			return 2, nil
		})
		stepErr = err
		if err != nil {
			return err
		}
		_, err = engine.Step(hctx, "three", func(context.Context) (int, error) { c.ran("three"); return 3, nil })
		return err
	}
	cfg := fast("w-a", "zw")
	// No prefetch: with its one slot busy, the engine would otherwise
	// claim the released job ahead of B (seen through PgBouncer in CI).
	cfg.Queues["zw"] = engine.QueueConfig{Concurrency: 1, Prefetch: -1}
	e := startEngine(t, s, cfg, engine.Kind{Name: "zw", Handler: handler})
	enqueue(t, e, engine.EnqueueParams{ID: "z", Queue: "zw", Kind: "zw"})
	select {
	case <-done:
	case <-time.After(waitLong):
		t.Fatal("handler did not end")
	}
	if stolen == nil {
		t.Fatalf("B did not take the job over: %v", stepErr)
	}
	if !errors.Is(stepErr, engine.ErrLeaseLost) {
		t.Fatalf("step two of the zombie returned %v, want ErrLeaseLost", stepErr)
	}
	if c.get("three") != 0 {
		t.Fatal("the zombie ran step three")
	}
	j := getJob(t, s, "z")
	if j.State != engine.StateRunning || j.Lease == nil || j.Lease.ID != "lease-b" {
		t.Fatalf("job after the zombie: %s, want running under B's lease", describe(j))
	}
	if got := stepNames(checkpointOf(t, j)); got != "one:completed" {
		t.Fatalf("checkpoint after the zombie: %s, want one:completed only", got)
	}
}

// namedSteps runs steps of the given names, counting them; the step named
// fail returns an error.
func namedSteps(c *stepCounter, fail string, names ...string) engine.Handler {
	return func(ctx context.Context, j *engine.Job) error {
		for _, n := range names {
			if _, err := engine.Step(ctx, n, func(context.Context) (string, error) {
				c.ran(n)
				if n == fail {
					return "", errors.New(n + " fails")
				}
				return n + "!", nil
			}); err != nil {
				return err
			}
		}
		return nil
	}
}

// testStepMismatch: a job recorded by steps a,b (c failed) meets code whose
// second step is x: undecodable, step_mismatch. Deployed with a step-set
// version 2 and an upgrader (keep a, run the rest anew) and redriven, it
// completes, a having run once.
func testStepMismatch(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	var c stepCounter
	e1 := start(t, newEngine(t, s, fast("w1", "sm"), engine.Kind{Name: "sm", MaxAttempts: 1, Handler: namedSteps(&c, "c", "a", "b", "c")}))
	enqueue(t, e1, engine.EnqueueParams{ID: "m", Queue: "sm", Kind: "sm"})
	waitState(t, s, "m", engine.StateArchived)
	stopEngine(t, e1)

	e2 := start(t, newEngine(t, s, fast("w2", "sm"), engine.Kind{Name: "sm", MaxAttempts: 1, Handler: namedSteps(&c, "", "a", "x", "b", "c")}))
	if _, err := e2.Retry(ctx, "m", engine.RetryOptions{}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	j := waitState(t, s, "m", engine.StateUndecodable)
	if j.TerminalReason != engine.ReasonStepMismatch {
		t.Fatalf("terminal reason %q, want %q", j.TerminalReason, engine.ReasonStepMismatch)
	}
	if c.get("x") != 0 || c.get("a") != 1 {
		t.Fatalf("mismatched run ran a=%d x=%d, want 1 0", c.get("a"), c.get("x"))
	}
	stopEngine(t, e2)

	up := map[int]engine.StepUpgrader{1: func(steps []engine.StepRecord) ([]engine.StepRecord, error) {
		return steps[:1], nil // x is new after a: b and c run again
	}}
	start(t, newEngine(t, s, fast("w3", "sm"), engine.Kind{Name: "sm", MaxAttempts: 1, StepVersion: 2, StepUpgraders: up,
		Handler: namedSteps(&c, "", "a", "x", "b", "c")}))
	if _, err := e2.Retry(ctx, "m", engine.RetryOptions{}); err != nil {
		t.Fatalf("Retry after the upgrader: %v", err)
	}
	j = waitState(t, s, "m", engine.StateCompleted)
	if c.get("a") != 1 || c.get("x") != 1 || c.get("b") != 2 || c.get("c") != 2 {
		t.Fatalf("runs a=%d x=%d b=%d c=%d, want 1 1 2 2", c.get("a"), c.get("x"), c.get("b"), c.get("c"))
	}
	if cp := checkpointOf(t, j); cp.Version != 2 || stepNames(cp) != "a:completed,x:completed,b:completed,c:completed" {
		t.Fatalf("checkpoint v%d %s", cp.Version, stepNames(cp))
	}
}

// testNewerStepSet: a job recorded by step-set version 2 is not run by a
// worker that knows version 1 (left, uncharged, for a newer worker), and a
// newer worker finishes it.
func testNewerStepSet(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	var c stepCounter
	e2 := start(t, newEngine(t, s, fast("w2", "ns"), engine.Kind{Name: "ns", MaxAttempts: 1, StepVersion: 2, Handler: namedSteps(&c, "b", "a", "b")}))
	enqueue(t, e2, engine.EnqueueParams{ID: "n", Queue: "ns", Kind: "ns"})
	waitState(t, s, "n", engine.StateArchived)
	stopEngine(t, e2)

	old := start(t, newEngine(t, s, fast("w1", "ns"), engine.Kind{Name: "ns", MaxAttempts: 1, StepVersion: 1, Handler: namedSteps(&c, "", "a", "b")}))
	if _, err := old.Retry(ctx, "n", engine.RetryOptions{}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	eventually(t, waitLong, func() bool { return hasEvent(events(t, s, "n"), engine.EventSnoozed) }, "the old worker to leave the job")
	stopEngine(t, old)
	if c.get("a") != 1 || c.get("b") != 1 {
		t.Fatalf("the old worker ran steps: a=%d b=%d", c.get("a"), c.get("b"))
	}
	if j := getJob(t, s, "n"); j.Attempt != 1 || j.State.Terminal() {
		t.Fatalf("left job: %s, want waiting with attempt 1 (uncharged)", describe(j))
	}
	start(t, newEngine(t, s, fast("w3", "ns"), engine.Kind{Name: "ns", MaxAttempts: 1, StepVersion: 2, Handler: namedSteps(&c, "", "a", "b")}))
	waitState(t, s, "n", engine.StateCompleted)
	if c.get("a") != 1 || c.get("b") != 2 {
		t.Fatalf("runs a=%d b=%d, want 1 2", c.get("a"), c.get("b"))
	}
}

// testStepCrash: a panic inside step two is a crash of that step: its
// crash count is on the step, and the next run resumes at step two.
func testStepCrash(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var c stepCounter
	handler := func(ctx context.Context, j *engine.Job) error {
		for _, n := range []string{"a", "b", "c"} {
			if _, err := engine.Step(ctx, n, func(context.Context) (int, error) {
				c.ran(n)
				if n == "b" && c.get("b") == 1 {
					panic("b crashes once")
				}
				return 0, nil
			}); err != nil {
				return err
			}
		}
		return nil
	}
	e := startEngine(t, s, fast("w", "sc"), engine.Kind{Name: "sc", Handler: handler})
	enqueue(t, e, engine.EnqueueParams{ID: "x", Queue: "sc", Kind: "sc"})
	j := waitState(t, s, "x", engine.StateCompleted)
	if j.CrashAttempt != 1 || c.get("a") != 1 || c.get("b") != 2 || c.get("c") != 1 {
		t.Fatalf("crash_attempt %d, runs a=%d b=%d c=%d", j.CrashAttempt, c.get("a"), c.get("b"), c.get("c"))
	}
	cp := checkpointOf(t, j)
	if cp.Steps[1].Crashes != 1 || cp.Steps[0].Crashes != 0 {
		t.Fatalf("crashes per step %+v", cp.Steps)
	}
	if got := engine.StepCrashes([]*engine.Job{j}); got["b"] != 1 || len(got) != 1 {
		t.Fatalf("StepCrashes %v, want b:1", got)
	}
}

// deadLetterWrite is a store-level route for the death of job id.
func deadLetterWrite(id, queue string) *backend.DeadLetterWrite {
	p := jobParams(engine.DeadLetterID(id), queue)
	p.Kind = "triage"
	p.Payload = json.RawMessage(fmt.Sprintf(`{"dead_job_id":%q,"error":"boom"}`, id))
	p.Fingerprint = "fp-dlq-" + id
	return &backend.DeadLetterWrite{Job: p, RetryEvent: backend.EventWrite{Kind: engine.EventRetried, Actor: "w", To: engine.StateAvailable, Message: "died again"}}
}

// testDeadLetterAtomic: the route is written by the death's own write, and
// a refused death (a lost lease) writes no route.
func testDeadLetterAtomic(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("a", "q"))
	j := claimOne(t, s, "q", "a")
	die := Outcome{JobRef: refOf(j), To: engine.StateArchived, Reason: engine.ReasonAttemptsExhausted, Charge: backend.ChargeAttempt,
		Error: &engine.AttemptError{Message: "boom"}, Event: engine.EventArchived}
	stale := die
	stale.Fence++
	p := stale.Plan(j)
	p.DeadLetter = deadLetterWrite("a", "dq")
	if _, err := s.JobFinish(ctx, p); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("stale death: %v, want ErrLeaseLost", err)
	}
	if tryJob(s, "dlq:a") != nil {
		t.Fatal("a refused death wrote its dead-letter job")
	}
	p = die.Plan(j)
	p.DeadLetter = deadLetterWrite("a", "dq")
	if _, err := s.JobFinish(ctx, p); err != nil {
		t.Fatalf("death: %v", err)
	}
	d := getJob(t, s, "dlq:a")
	if d.State != engine.StateAvailable || d.Queue != "dq" || d.Kind != "triage" || d.DeadLetterOf != "a" || len(d.Tags) != 0 {
		t.Fatalf("dead-letter job %s dead_letter_of=%q tags=%v", describe(d), d.DeadLetterOf, d.Tags)
	}
	if !jsonEqual(d.Payload, p.DeadLetter.Job.Payload) {
		t.Fatalf("dead-letter payload %s", d.Payload)
	}
	if h.Truth != nil {
		checkCounts(t, s, h.Truth(t, s), "after a routed death")
	}
}

// testDeadLetterRules: kind k1 routes to triage-k1 on queue dlq, k2 falls
// back to the default rule (its own queue); tags are not copied; OnDead
// fires once per death.
func testDeadLetterRules(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cfg := fast("w", "q")
	cfg.DeadLetter = &engine.DeadLetterRule{Kind: "triage-default"}
	fail := func(context.Context, *engine.Job) error { return errors.New("it broke") }
	e := newEngine(t, s, cfg,
		engine.Kind{Name: "k1", MaxAttempts: 1, Handler: fail, DeadLetter: &engine.DeadLetterRule{Kind: "triage-k1", Queue: "dlq"}},
		engine.Kind{Name: "k2", MaxAttempts: 1, Handler: fail})
	var mu sync.Mutex
	deaths := map[string]int{}
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) {
		mu.Lock()
		deaths[ev.Job.ID]++
		mu.Unlock()
	})
	start(t, e)
	enqueue(t, e, engine.EnqueueParams{ID: "j1", Queue: "q", Kind: "k1", Tags: []string{"red"}, Payload: json.RawMessage(`{"n":1}`)})
	enqueue(t, e, engine.EnqueueParams{ID: "j2", Queue: "q", Kind: "k2", Payload: json.RawMessage(`{"n":2}`)})
	waitState(t, s, "j1", engine.StateArchived)
	waitState(t, s, "j2", engine.StateArchived)
	d1, d2 := getJob(t, s, "dlq:j1"), getJob(t, s, "dlq:j2")
	if d1.Kind != "triage-k1" || d1.Queue != "dlq" || d1.DeadLetterOf != "j1" || len(d1.Tags) != 0 {
		t.Fatalf("dlq:j1 %s tags %v dead_letter_of %q", describe(d1), d1.Tags, d1.DeadLetterOf)
	}
	if d2.Kind != "triage-default" || d2.Queue != "q" || d2.DeadLetterOf != "j2" {
		t.Fatalf("dlq:j2 %s", describe(d2))
	}
	if d, err := e.GetJob(context.Background(), "j1", false); err != nil || d.DeadLetter != "dlq:j1" {
		t.Fatalf("GetJob(j1) links its dead letter as %q (%v), want dlq:j1", d.DeadLetter, err)
	}
	var body engine.DeadLetterPayload
	if err := json.Unmarshal(d1.Payload, &body); err != nil {
		t.Fatal(err)
	}
	if body.DeadJobID != "j1" || body.Kind != "k1" || body.Queue != "q" || !jsonEqual(body.Payload, []byte(`{"n":1}`)) ||
		body.Error != "it broke" || body.Reason != engine.ReasonAttemptsExhausted {
		t.Fatalf("dead-letter payload %s", d1.Payload)
	}
	eventually(t, waitLong, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return deaths["j1"] == 1 && deaths["j2"] == 1
	}, "OnDead for both deaths")
	mu.Lock()
	defer mu.Unlock()
	if len(deaths) != 2 {
		t.Fatalf("OnDead calls %v", deaths)
	}
}

// testDeadLetterRedrive: a dead job is triaged; redriven, it dies again,
// and its dead-letter job (completed) is retried with the new death.
func testDeadLetterRedrive(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	var c stepCounter
	var mu sync.Mutex
	var seen []string
	cfg := fast("w", "q")
	e := startEngine(t, s, cfg,
		engine.Kind{Name: "k", MaxAttempts: 1, DeadLetter: &engine.DeadLetterRule{Kind: "triage"},
			Handler: func(context.Context, *engine.Job) error {
				c.ran("k")
				return fmt.Errorf("death %d", c.get("k"))
			}},
		engine.Kind{Name: "triage", Handler: func(_ context.Context, j *engine.Job) error {
			var b engine.DeadLetterPayload
			if err := json.Unmarshal(j.Payload, &b); err != nil {
				return err
			}
			mu.Lock()
			seen = append(seen, b.Error)
			mu.Unlock()
			return nil
		}})
	enqueue(t, e, engine.EnqueueParams{ID: "r", Queue: "q", Kind: "k"})
	waitState(t, s, "dlq:r", engine.StateCompleted)
	if _, err := e.Retry(ctx, "r", engine.RetryOptions{}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	eventually(t, waitLong, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 2
	}, "the second death to be triaged")
	d := waitState(t, s, "dlq:r", engine.StateCompleted)
	mu.Lock()
	defer mu.Unlock()
	if seen[0] != "death 1" || seen[1] != "death 2" {
		t.Fatalf("triaged %q, want death 1 then death 2", seen)
	}
	if !hasEvent(events(t, s, "dlq:r"), engine.EventRetried) || d.DeadLetterOf != "r" {
		t.Fatalf("dlq:r events %v", eventKinds(events(t, s, "dlq:r")))
	}
}

// testDeadLetterNotRerouted: a dead-letter job that dies is not routed
// again, even under a default rule that names its own kind.
func testDeadLetterNotRerouted(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cfg := fast("w", "q")
	cfg.DeadLetter = &engine.DeadLetterRule{Kind: "triage"}
	fail := func(context.Context, *engine.Job) error { return errors.New("no") }
	e := startEngine(t, s, cfg,
		engine.Kind{Name: "k", MaxAttempts: 1, Handler: fail},
		engine.Kind{Name: "triage", MaxAttempts: 1, Handler: fail})
	enqueue(t, e, engine.EnqueueParams{ID: "n", Queue: "q", Kind: "k"})
	waitState(t, s, "dlq:n", engine.StateArchived)
	// Wait for the engine to settle: nothing is left to run.
	eventually(t, waitLong, func() bool {
		c, err := e.Counts(context.Background(), "q")
		return err == nil && c.Total[engine.StateAvailable] == 0 && c.Total[engine.StateRunning] == 0 && c.Total[engine.StateRetryable] == 0
	}, "the queue to settle")
	if tryJob(s, "dlq:dlq:n") != nil {
		t.Fatal("a dying dead-letter job was routed again")
	}
}

// testDeadLetterQuarantine: the job whose crash quarantines its
// fingerprint is routed, with reason quarantined.
func testDeadLetterQuarantine(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cfg := fast("w", "q")
	cfg.CrashLimit = 1
	cfg.DeadLetter = &engine.DeadLetterRule{Kind: "triage", Queue: "elsewhere"}
	e := startEngine(t, s, cfg, engine.Kind{Name: "k", Handler: func(context.Context, *engine.Job) error { panic("poison") }})
	enqueue(t, e, engine.EnqueueParams{ID: "p", Queue: "q", Kind: "k", Payload: json.RawMessage(`{"poison":true}`)})
	waitState(t, s, "p", engine.StateQuarantined)
	d := getJob(t, s, "dlq:p")
	var b engine.DeadLetterPayload
	if err := json.Unmarshal(d.Payload, &b); err != nil {
		t.Fatal(err)
	}
	if b.Reason != engine.ReasonQuarantined || d.Queue != "elsewhere" || b.DeadJobID != "p" {
		t.Fatalf("dlq:p %s payload %s", describe(d), d.Payload)
	}
}
