package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Workflows that wait (engine/wait.go): the signal buffer and the fenced
// wake of the store (backend.WaitStore), and sleeps, signals and children
// run by an engine, holding no worker while they wait.

func waitChecks() []check {
	return []check{
		{name: "SignalsBufferedInOrderTakenOnceUnderLease", fn: testSignalStore},
		{name: "SignalsGoWithTheirJob", fn: testSignalsGoWithJob},
		{name: "WakeFencedOnStateAndFence", fn: testWakeFenced},
		{name: "SignalAndItsWakeInOneWrite", fn: testSignalWithWake},
		{name: "ListedWaitingJobCarriesItsWait", fn: testListedWait},
		{name: "SleepResumesAfterLastStepNoAttemptNoLease", fn: testSleep},
		{name: "WaitThatEndsTheHandlerRecordedCompleted", fn: testWaitEndRecorded},
		{name: "SignalBeforeAndDuringWaitEachOnceThenTimeout", fn: testSignalWait},
		{name: "FanOutHundredThreeDieReplayDoesNotSpawn", fn: testFanOut},
		{name: "ThousandWaitersLeaveSlotsFree", fn: testWaitersHoldNoSlots, alone: true},
	}
}

// testSignalStore: SignalSend refuses a missing or terminal job, buffers
// the rest in order; SignalConsume takes one only under the job's lease,
// with the checkpoint, and not twice.
func testSignalStore(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	if _, err := s.SignalSend(ctx, &backend.SignalSendParams{JobID: "nope", Name: "go", Payload: json.RawMessage(`1`)}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("signal to a missing job: %v, want ErrNotFound", err)
	}
	insert(t, s, jobParams("dead", "sq"))
	d := claimOne(t, s, "sq", "dead")
	if _, err := s.JobFinish(ctx, Outcome{JobRef: refOf(d), To: engine.StateCancelled, Reason: engine.ReasonCancelled}.Plan(d)); err != nil {
		t.Fatalf("finish: %v", err)
	}
	var se *engine.StateError
	if _, err := s.SignalSend(ctx, &backend.SignalSendParams{JobID: "dead", Name: "go", Payload: json.RawMessage(`1`)}); !errors.As(err, &se) || se.State != engine.StateCancelled {
		t.Fatalf("signal to a cancelled job: %v, want a *StateError naming cancelled", err)
	}

	insert(t, s, jobParams("j", "sq"))
	for i, name := range []string{"go", "other", "go"} {
		if _, err := s.SignalSend(ctx, &backend.SignalSendParams{JobID: "j", Name: name, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatalf("SignalSend %d: %v", i, err)
		}
	}
	list := func(name string) []*engine.Signal {
		t.Helper()
		sigs, err := s.SignalList(ctx, &backend.SignalListParams{JobID: "j", Name: name})
		if err != nil {
			t.Fatalf("SignalList: %v", err)
		}
		return sigs
	}
	gos := list("go")
	if len(gos) != 2 || !jsonEqual(gos[0].Payload, []byte(`{"n":0}`)) || !jsonEqual(gos[1].Payload, []byte(`{"n":2}`)) ||
		gos[0].Seq >= gos[1].Seq || gos[0].SentAt.IsZero() {
		t.Fatalf("signals named go: %+v, want n 0 then n 2", gos)
	}
	if all := list(""); len(all) != 3 {
		t.Fatalf("all signals: %d, want 3", len(all))
	}

	j := claimOne(t, s, "sq", "j")
	cp := json.RawMessage(`{"version":1,"steps":[{"name":"go","state":"completed","result":{"payload":{"n":0}},"attempts":1}]}`)
	bad := refOf(j)
	bad.Fence++
	err := s.SignalConsume(ctx, &backend.SignalConsumeParams{JobRef: bad, Name: "go", Seq: gos[0].Seq, Checkpoint: cp})
	if !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("consume under a stale fence: %v, want ErrLeaseLost", err)
	}
	if len(list("go")) != 2 || len(getJob(t, s, "j").Checkpoint) != 0 {
		t.Fatalf("a refused consume changed something: %d signals, checkpoint %s", len(list("go")), getJob(t, s, "j").Checkpoint)
	}
	if err := s.SignalConsume(ctx, &backend.SignalConsumeParams{JobRef: refOf(j), Name: "go", Seq: gos[0].Seq, Checkpoint: cp}); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if got := list("go"); len(got) != 1 || got[0].Seq != gos[1].Seq {
		t.Fatalf("after consume: %+v, want the second go alone", got)
	}
	if !jsonEqual(getJob(t, s, "j").Checkpoint, cp) {
		t.Fatalf("checkpoint %s, want %s", getJob(t, s, "j").Checkpoint, cp)
	}
	err = s.SignalConsume(ctx, &backend.SignalConsumeParams{JobRef: refOf(j), Name: "go", Seq: gos[0].Seq, Checkpoint: cp})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("consume twice: %v, want ErrNotFound", err)
	}
	err = s.SignalConsume(ctx, &backend.SignalConsumeParams{JobRef: refOf(j), Name: "other", Seq: gos[1].Seq, Checkpoint: cp})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("consume under another name: %v, want ErrNotFound", err)
	}
}

// testSignalsGoWithJob: a deleted job's buffered signals go with it,
// whether an operator or retention deletes it; a new job under the same
// id starts with none.
func testSignalsGoWithJob(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	signals := func(id string) int {
		t.Helper()
		sigs, err := s.SignalList(ctx, &backend.SignalListParams{JobID: id})
		if err != nil {
			t.Fatalf("SignalList %s: %v", id, err)
		}
		return len(sigs)
	}
	send := func(id string) {
		t.Helper()
		if _, err := s.SignalSend(ctx, &backend.SignalSendParams{JobID: id, Name: "go", Payload: json.RawMessage(`1`)}); err != nil {
			t.Fatalf("SignalSend %s: %v", id, err)
		}
	}
	insert(t, s, jobParams("op", "gq"))
	send("op")
	if err := deleteJob(t, s, actionParams{ID: "op", Actor: "test"}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if n := signals("op"); n != 0 {
		t.Fatalf("%d signals left of a job an operator deleted", n)
	}
	insert(t, s, jobParams("op", "gq"))
	if n := signals("op"); n != 0 {
		t.Fatalf("a new job under a deleted job's id starts with %d of its signals", n)
	}

	insert(t, s, jobParams("ret", "rq"))
	send("ret")
	j := claimOne(t, s, "rq", "ret")
	if _, err := s.JobFinish(ctx, Outcome{JobRef: refOf(j), To: engine.StateCancelled, Reason: engine.ReasonCancelled}.Plan(j)); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if n, err := s.JobDeleteExpired(ctx, &backend.JobDeleteExpiredParams{
		Retention: map[engine.State]time.Duration{engine.StateCancelled: 0}, Limit: 100}); err != nil || n != 1 {
		t.Fatalf("retention: %d deleted, %v; want 1", n, err)
	}
	if tryJob(s, "ret") != nil {
		t.Fatalf("retention left the cancelled job")
	}
	if n := signals("ret"); n != 0 {
		t.Fatalf("%d signals left of a job retention deleted", n)
	}
}

// testWakeFenced: JobWake moves a job only while it is in From at Fence,
// writes its event and moves the counters.
func testWakeFenced(t *testing.T, h Harness) {
	s := h.NewStore(t)
	tr := h.truth(t, s)
	ctx := context.Background()
	j, w := waitingJob(t, s, "w", "wq")
	wake := func(from engine.State, fence int64) bool {
		t.Helper()
		moved, err := s.JobWake(ctx, &backend.JobWakeParams{ID: "w", From: from, Fence: fence, To: engine.StateAvailable,
			Event:  backend.EventWrite{Kind: engine.EventWoken, Actor: "t", From: from, To: engine.StateAvailable, Message: "signal \"go\""},
			Counts: []backend.CountDelta{{Queue: "wq", From: from, To: engine.StateAvailable, N: 1}}})
		if err != nil {
			t.Fatalf("JobWake: %v", err)
		}
		return moved
	}
	before := snap(t, s, "w")
	if wake(engine.StateScheduled, w.Fence+1) || wake(engine.StateRetryable, w.Fence) {
		t.Fatal("a wake with a stale fence or state moved the job")
	}
	sameSnapshot(t, "refused wakes", before, snap(t, s, "w"))
	if !wake(engine.StateScheduled, w.Fence) {
		t.Fatal("the wake did not move the job")
	}
	got := getJob(t, s, "w")
	if got.State != engine.StateAvailable || got.Lease != nil || got.ScheduledAt.After(storeNow(t, s)) || got.Attempt != j.Attempt {
		t.Fatalf("woken job: %s", describe(got))
	}
	if !hasEvent(events(t, s, "w"), engine.EventWoken) {
		t.Fatalf("no woken event: %v", eventKinds(events(t, s, "w")))
	}
	if wake(engine.StateScheduled, w.Fence) {
		t.Fatal("a second wake moved the job again")
	}
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{Queue: "wq"})
	if err != nil {
		t.Fatalf("JobCountByQueue: %v", err)
	}
	if truth := tr.JobCounts(t)["wq"]; counts["wq"][engine.StateAvailable] != 1 || truth[engine.StateAvailable] != 1 || counts["wq"][engine.StateScheduled] != 0 {
		t.Fatalf("counters %v, truth %v", counts["wq"], truth)
	}
}

// waitingJob inserts job id on queue, claims it and writes it waiting
// (scheduled an hour ahead with a waiting event); it returns the job as
// claimed and as written.
func waitingJob(t *testing.T, s backend.Store, id, queue string) (claimed, written *engine.Job) {
	t.Helper()
	insert(t, s, jobParams(id, queue))
	j := claimOne(t, s, queue, id)
	w, err := s.JobFinish(context.Background(), Outcome{JobRef: refOf(j), To: engine.StateScheduled, Delay: time.Hour, Event: engine.EventWaiting}.Plan(j))
	if err != nil {
		t.Fatalf("finish to scheduled: %v", err)
	}
	return j, w
}

// testSignalWithWake: SignalSend with a wake buffers the signal and
// moves the job in one write; with a stale fence the signal is buffered
// and the job left as it is.
func testSignalWithWake(t *testing.T, h Harness) {
	s := h.NewStore(t)
	tr := h.truth(t, s)
	ctx := context.Background()
	_, w := waitingJob(t, s, "w", "wq")
	send := func(fence int64) *engine.Signal {
		t.Helper()
		sig, err := s.SignalSend(ctx, &backend.SignalSendParams{JobID: "w", Name: "go", Payload: json.RawMessage(`{"n":1}`),
			Wake: &backend.JobWakeParams{ID: "w", From: engine.StateScheduled, Fence: fence, To: engine.StateAvailable,
				Event:  backend.EventWrite{Kind: engine.EventWoken, Actor: "t", From: engine.StateScheduled, To: engine.StateAvailable, Message: "signal \"go\""},
				Counts: []backend.CountDelta{{Queue: "wq", From: engine.StateScheduled, To: engine.StateAvailable, N: 1}}}})
		if err != nil {
			t.Fatalf("SignalSend: %v", err)
		}
		return sig
	}
	if sig := send(w.Fence + 1); sig.Woke || getJob(t, s, "w").State != engine.StateScheduled {
		t.Fatalf("a signal whose wake has a stale fence moved the job (woke %v)", sig.Woke)
	}
	if sig := send(w.Fence); !sig.Woke {
		t.Fatal("the signal's wake did not move the job")
	}
	got := getJob(t, s, "w")
	if got.State != engine.StateAvailable || !hasEvent(events(t, s, "w"), engine.EventWoken) {
		t.Fatalf("woken job: %s, events %v", describe(got), eventKinds(events(t, s, "w")))
	}
	sigs, err := s.SignalList(ctx, &backend.SignalListParams{JobID: "w", Name: "go"})
	if err != nil || len(sigs) != 2 {
		t.Fatalf("signals buffered: %d (%v), want both", len(sigs), err)
	}
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{Queue: "wq"})
	if err != nil {
		t.Fatalf("JobCountByQueue: %v", err)
	}
	if truth := tr.JobCounts(t)["wq"]; counts["wq"][engine.StateAvailable] != 1 || truth[engine.StateAvailable] != 1 || counts["wq"][engine.StateScheduled] != 0 {
		t.Fatalf("counters %v, truth %v", counts["wq"], truth)
	}
}

// testWaitEndRecorded: a wait that is the handler's last call (a sleep,
// children) is recorded completed in the checkpoint the store keeps, not
// left "waiting" on a completed job.
func testWaitEndRecorded(t *testing.T, h Harness) {
	s := h.NewStore(t)
	handler := func(ctx context.Context, j *engine.Job) error {
		if j.Kind == "kid" {
			return nil
		}
		ids, err := engine.Spawn(ctx, "spawn", []engine.EnqueueParams{{Queue: "we", Kind: "kid"}})
		if err != nil {
			return err
		}
		if _, err := engine.WaitAll(ctx, "kids", ids); err != nil {
			return err
		}
		return engine.Sleep(ctx, "nap", 200*time.Millisecond)
	}
	e := startEngine(t, s, fast("w", "we"), engine.Kind{Name: "last", Handler: handler}, engine.Kind{Name: "kid", Handler: handler})
	enqueue(t, e, engine.EnqueueParams{ID: "l", Queue: "we", Kind: "last"})
	j := waitState(t, s, "l", engine.StateCompleted)
	if got := stepNames(checkpointOf(t, j)); got != "spawn:completed,kids:completed,nap:completed" {
		t.Fatalf("checkpoint of the completed job: %s, want every step completed", got)
	}
}

// testSleep: a job sleeping after its first step leaves its worker in
// scheduled (no lease, no attempt spent, the wait recorded), and runs on
// after the step once the time has come; the first step ran once.
func testSleep(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var c stepCounter
	handler := func(ctx context.Context, j *engine.Job) error {
		if _, err := engine.Step(ctx, "before", func(context.Context) (int, error) { c.ran("before"); return 1, nil }); err != nil {
			return err
		}
		if err := engine.Sleep(ctx, "nap", 400*time.Millisecond); err != nil {
			return err
		}
		_, err := engine.Step(ctx, "after", func(context.Context) (int, error) { c.ran("after"); return 2, nil })
		return err
	}
	e := startEngine(t, s, fast("w", "sl"), engine.Kind{Name: "sleeper", Handler: handler})
	enqueue(t, e, engine.EnqueueParams{ID: "z", Queue: "sl", Kind: "sleeper"})
	var waiting *engine.Job
	eventually(t, waitLong, func() bool {
		waiting = tryJob(s, "z")
		return waiting != nil && (engine.WaitOf(waiting) != nil || waiting.State == engine.StateCompleted)
	}, "z to sleep")
	if waiting.State != engine.StateCompleted {
		// Seen asleep (a loaded machine may sleep past the nap first).
		w := engine.WaitOf(waiting)
		if waiting.Lease != nil || w.Kind != engine.WaitKindSleep || w.Name != "nap" || w.Step != 2 || waiting.Attempt != 0 {
			t.Fatalf("sleeping job: %s, wait %+v", describe(waiting), w)
		}
	}
	j := waitState(t, s, "z", engine.StateCompleted)
	if c.get("before") != 1 || c.get("after") != 1 {
		t.Fatalf("runs before=%d after=%d, want 1 1", c.get("before"), c.get("after"))
	}
	cp := checkpointOf(t, j)
	if got := stepNames(cp); got != "before:completed,nap:completed,after:completed" || cp.Wait != nil {
		t.Fatalf("checkpoint %s, wait %+v", got, cp.Wait)
	}
	if j.Attempt != 0 || j.Fence != 2 {
		t.Fatalf("attempt %d fence %d, want 0 and 2 (two runs, no attempt spent)", j.Attempt, j.Fence)
	}
	if ev := events(t, s, "z"); !hasEvent(ev, engine.EventWaiting) {
		t.Fatalf("no waiting event: %v", eventKinds(ev))
	}
}

// testSignalWait: a signal sent while the job runs, before its wait, is
// buffered and taken by the wait; one sent while it waits wakes it; each
// is delivered once (the next wait of the same name finds none and times
// out, which the handler handles).
func testSignalWait(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	release := map[string]chan struct{}{"early": make(chan struct{}), "late": make(chan struct{})}
	var mu sync.Mutex
	got := map[string][]string{}
	handler := func(ctx context.Context, j *engine.Job) error {
		if _, err := engine.Step(ctx, "hold", func(context.Context) (bool, error) { <-release[j.ID]; return true, nil }); err != nil {
			return err
		}
		p, err := engine.WaitSignal(ctx, "go", time.Hour)
		if err != nil {
			return err
		}
		_, err = engine.WaitSignal(ctx, "go", 300*time.Millisecond)
		timedOut := errors.Is(err, engine.ErrWaitTimeout)
		if err != nil && !timedOut {
			return err
		}
		_, err = engine.Step(ctx, "record", func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			got[j.ID] = append(got[j.ID], string(p), fmt.Sprint(timedOut))
			return true, nil
		})
		return err
	}
	e := startEngine(t, s, fast("w", "sg"), engine.Kind{Name: "waiter", Handler: handler})
	enqueue(t, e, engine.EnqueueParams{ID: "early", Queue: "sg", Kind: "waiter"})
	enqueue(t, e, engine.EnqueueParams{ID: "late", Queue: "sg", Kind: "waiter"})

	waitState(t, s, "early", engine.StateRunning)
	if _, err := e.Signal(ctx, "early", "go", json.RawMessage(`{"who":"early"}`)); err != nil {
		t.Fatalf("Signal early: %v", err)
	}
	close(release["early"])

	close(release["late"])
	eventually(t, waitLong, func() bool {
		w := engine.WaitOf(tryJob(s, "late"))
		return w != nil && w.Kind == engine.WaitKindSignal && w.Step == 2
	}, "late to wait for its signal")
	if j := getJob(t, s, "late"); j.Lease != nil || j.Attempt != 0 {
		t.Fatalf("waiting job: %s", describe(j))
	}
	if _, err := e.Signal(ctx, "late", "go", json.RawMessage(`{"who":"late"}`)); err != nil {
		t.Fatalf("Signal late: %v", err)
	}
	for _, id := range []string{"early", "late"} {
		j := waitState(t, s, id, engine.StateCompleted)
		mu.Lock()
		g := got[id]
		mu.Unlock()
		want := []string{fmt.Sprintf(`{"who":%q}`, id), "true"}
		if len(g) != 2 || !jsonEqual([]byte(g[0]), []byte(want[0])) || g[1] != "true" {
			t.Fatalf("job %s got %v, want %v (its signal once, then a timeout)", id, g, want)
		}
		if j.Attempt != 0 {
			t.Fatalf("job %s spent %d attempts waiting", id, j.Attempt)
		}
		left, err := s.SignalList(ctx, &backend.SignalListParams{JobID: id})
		if err != nil || len(left) != 0 {
			t.Fatalf("job %s: signals left %v (%v)", id, left, err)
		}
	}
	if _, err := e.Signal(ctx, "early", "go", nil); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("signal to a completed job: %v, want ErrWrongState", err)
	}
}

// testFanOut: a parent spawns 100 children, 3 of which die; WaitAll
// reports exactly those 3; the parent's retry replays the spawn without
// enqueueing again.
func testFanOut(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	const n = 100
	dies := map[int]bool{7: true, 42: true, 99: true}
	var spawns, parentRuns, merges atomic.Int32
	var mu sync.Mutex
	var reported []string
	parent := func(ctx context.Context, j *engine.Job) error {
		parentRuns.Add(1)
		children := make([]engine.EnqueueParams, n)
		for i := range children {
			children[i] = engine.EnqueueParams{Queue: "fo", Kind: "child", Args: map[string]int{"i": i}, MaxAttempts: 1}
		}
		ids, err := engine.Spawn(ctx, "spawn", children)
		if err != nil {
			return err
		}
		res, err := engine.WaitAll(ctx, "all", ids)
		var ce *engine.ChildrenError
		if !errors.As(err, &ce) {
			return fmt.Errorf("WaitAll: %v (want a *ChildrenError)", err)
		}
		if len(res) != n {
			return fmt.Errorf("WaitAll: %d results", len(res))
		}
		mu.Lock()
		reported = slices.Clone(ce.Died)
		mu.Unlock()
		_, err = engine.Step(ctx, "merge", func(context.Context) (int, error) {
			if merges.Add(1) == 1 {
				return 0, errors.New("merge fails once")
			}
			return len(res), nil
		})
		return err
	}
	child := func(ctx context.Context, j *engine.Job) error {
		var a struct{ I int }
		if err := json.Unmarshal(j.Payload, &a); err != nil {
			return err
		}
		if _, ok := engine.ParentOf(j.ID); ok && a.I == 0 {
			spawns.Add(1)
		}
		if dies[a.I] {
			return fmt.Errorf("child %d dies", a.I)
		}
		return nil
	}
	cfg := fast("w", "fo")
	cfg.Queues["fo"] = engine.QueueConfig{Concurrency: 8}
	e := startEngine(t, s, cfg, engine.Kind{Name: "parent", Handler: parent}, engine.Kind{Name: "child", Handler: child})
	enqueue(t, e, engine.EnqueueParams{ID: "p", Queue: "fo", Kind: "parent", MaxAttempts: 3})
	eventually(t, 3*waitLong, func() bool {
		j := tryJob(s, "p")
		return j != nil && j.State == engine.StateCompleted
	}, "parent p to complete")
	j := getJob(t, s, "p")

	want := []string{engine.ChildID("p", 1, 7), engine.ChildID("p", 1, 42), engine.ChildID("p", 1, 99)}
	mu.Lock()
	got := slices.Clone(reported)
	mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("died %v, want %v", got, want)
	}
	// Two runs at least: the merge fails once. A third only when the
	// first run parked in WaitAll; with the children quick it may find
	// them all finished and go on.
	if merges.Load() != 2 || parentRuns.Load() < 2 || j.Attempt != 1 {
		t.Fatalf("parent ran %d times, merged %d times, attempt %d: want its merge retried once", parentRuns.Load(), merges.Load(), j.Attempt)
	}
	if spawns.Load() != 1 {
		t.Fatalf("child 0 ran %d times: the spawn was not replayed", spawns.Load())
	}
	total, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{})
	if err != nil {
		t.Fatalf("JobCountMatching: %v", err)
	}
	if total != n+1 {
		t.Fatalf("%d jobs, want %d: a replay spawned again", total, n+1)
	}
	cp := checkpointOf(t, j)
	if len(cp.Children) != n || cp.Children[0] != engine.ChildID("p", 1, 0) {
		t.Fatalf("checkpoint children: %d, first %v", len(cp.Children), cp.Children[:min(1, len(cp.Children))])
	}
	for i, id := range cp.Children {
		c := getJob(t, s, id)
		wantState := engine.StateCompleted
		if dies[i] {
			wantState = engine.StateArchived
		}
		if c.State != wantState {
			t.Fatalf("child %s: %s, want %s", id, c.State, wantState)
		}
	}
}

// testWaitersHoldNoSlots: while 1,000 jobs wait (sleeps, signals,
// children), ordinary jobs of the same queue run at full concurrency (a
// barrier only all slots together pass) and all complete; no waiter holds
// a lease meanwhile.
func testWaitersHoldNoSlots(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	const (
		waiters     = 1000
		concurrency = 4
		ordinary    = 40
	)
	waiter := func(ctx context.Context, j *engine.Job) error {
		var a struct{ I int }
		if err := json.Unmarshal(j.Payload, &a); err != nil {
			return err
		}
		switch a.I % 3 {
		case 0:
			return engine.Sleep(ctx, "nap", time.Hour)
		case 1:
			_, err := engine.WaitSignal(ctx, "go", time.Hour)
			return err
		}
		ids, err := engine.Spawn(ctx, "spawn", []engine.EnqueueParams{{Queue: "nobody", Kind: "child"}})
		if err != nil {
			return err
		}
		_, err = engine.WaitAll(ctx, "all", ids)
		return err
	}
	var inside, passed atomic.Int32
	gate := make(chan struct{})
	var once sync.Once
	plain := func(ctx context.Context, j *engine.Job) error {
		if inside.Add(1) == concurrency {
			once.Do(func() { close(gate) })
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		passed.Add(1)
		return nil
	}
	cfg := fast("w", "mix")
	cfg.Queues["mix"] = engine.QueueConfig{Concurrency: concurrency}
	e := startEngine(t, s, cfg, engine.Kind{Name: "waiter", Handler: waiter}, engine.Kind{Name: "plain", Handler: plain},
		engine.Kind{Name: "child", Handler: func(context.Context, *engine.Job) error { return nil }})
	ps := make([]engine.EnqueueParams, waiters)
	for i := range ps {
		ps[i] = engine.EnqueueParams{ID: fmt.Sprintf("w%04d", i), Queue: "mix", Kind: "waiter", Args: map[string]int{"i": i}}
	}
	for start := 0; start < waiters; start += 250 {
		res, err := e.EnqueueMany(ctx, ps[start:start+250])
		if err != nil {
			t.Fatalf("EnqueueMany: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("enqueue: %v", r.Err)
			}
		}
	}
	countIn := func(queue string, st engine.State) int64 {
		t.Helper()
		n, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: engine.Filter{Queues: []string{queue}, States: []engine.State{st}}})
		if err != nil {
			t.Fatalf("JobCountMatching: %v", err)
		}
		return n
	}
	eventually(t, 30*waitLong, func() bool { return countIn("mix", engine.StateScheduled) == waiters }, "all waiters to wait")

	for i := range ordinary {
		enqueue(t, e, engine.EnqueueParams{ID: fmt.Sprintf("o%02d", i), Queue: "mix", Kind: "plain"})
	}
	eventually(t, waitLong, func() bool { return countIn("mix", engine.StateCompleted) == ordinary }, "the ordinary jobs to complete")
	if passed.Load() != ordinary {
		t.Fatalf("%d ordinary jobs passed the barrier of %d, want %d", passed.Load(), concurrency, ordinary)
	}
	if n := countIn("mix", engine.StateScheduled); n != waiters {
		t.Fatalf("%d waiters scheduled, want %d", n, waiters)
	}
	if n := countIn("mix", engine.StateRunning); n != 0 {
		t.Fatalf("%d jobs running (holding leases) with only waiters left", n)
	}
	for _, id := range []string{"w0000", "w0001", "w0002"} {
		j := getJob(t, s, id)
		if w := engine.WaitOf(j); w == nil || j.Lease != nil || j.Attempt != 0 {
			t.Fatalf("waiter %s: %s, wait %+v", id, describe(j), w)
		}
	}
}

// testListedWait: a listed scheduled job carries its checkpoint's wait as
// a summary (children counted, not listed), on the state branches and on
// the direct (ids) path alike; a job not scheduled, or scheduled without
// a wait, carries none, and no listed row carries a checkpoint.
func testListedWait(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	until := time.Date(2030, 1, 2, 14, 5, 0, 0, time.UTC)
	kids := []string{"lw-kid-0", "lw-kid-1", "lw-kid-2"}
	waits := map[string]*engine.Wait{
		"lw-sleep":  {Kind: engine.WaitKindSleep, Step: 1, Name: "nap", Until: until},
		"lw-signal": {Kind: engine.WaitKindSignal, Step: 2, Name: "confirm", Signal: "payment.confirmed"},
		"lw-kids":   {Kind: engine.WaitKindChildren, Step: 3, Name: "all", Children: kids, Done: 1, Until: until},
	}
	ids := []string{"lw-sleep", "lw-signal", "lw-kids", "lw-snoozed", "lw-woken"}
	for _, id := range ids {
		insert(t, s, jobParams(id, "lw"))
	}
	for _, id := range ids {
		j := claimOne(t, s, "lw", id)
		w := waits[id]
		if id == "lw-woken" {
			w = waits["lw-signal"] // its wait recorded, then woken below
		}
		p := Outcome{JobRef: refOf(j), To: engine.StateScheduled, Delay: time.Hour, Event: engine.EventWaiting}.Plan(j)
		if w != nil {
			raw, err := (&engine.Checkpoint{Version: 1, Children: w.Children, Wait: w}).Encode()
			if err != nil {
				t.Fatal(err)
			}
			p.Checkpoint = &backend.CheckpointWrite{Checkpoint: raw}
		}
		if _, err := s.JobFinish(ctx, p); err != nil {
			t.Fatalf("finish %s to scheduled: %v", id, err)
		}
	}
	woken := getJob(t, s, "lw-woken")
	if moved, err := s.JobWake(ctx, &backend.JobWakeParams{ID: woken.ID, From: engine.StateScheduled, Fence: woken.Fence, To: engine.StateAvailable,
		Event:  backend.EventWrite{Kind: engine.EventWoken, Actor: "t", From: engine.StateScheduled, To: engine.StateAvailable},
		Counts: []backend.CountDelta{{Queue: "lw", From: engine.StateScheduled, To: engine.StateAvailable, N: 1}}}); err != nil || !moved {
		t.Fatalf("wake lw-woken: %v %v", moved, err)
	}
	want := map[string]*engine.WaitSummary{
		"lw-sleep":  {Kind: engine.WaitKindSleep, Step: 1, Name: "nap", Until: until},
		"lw-signal": {Kind: engine.WaitKindSignal, Step: 2, Name: "confirm", Signal: "payment.confirmed"},
		"lw-kids":   {Kind: engine.WaitKindChildren, Step: 3, Name: "all", Done: 1, Total: 3, Until: until},
	}
	for _, f := range []engine.Filter{
		{Queues: []string{"lw"}},
		{Queues: []string{"lw"}, States: []engine.State{engine.StateScheduled, engine.StateAvailable}},
		{IDs: ids},
	} {
		js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: f, Limit: 100})
		if err != nil {
			t.Fatalf("JobListPage(%s): %v", f, err)
		}
		if len(js) != len(ids) {
			t.Fatalf("JobListPage(%s): %d jobs, want %d", f, len(js), len(ids))
		}
		for _, j := range js {
			got, w := j.Wait, want[j.ID]
			if len(j.Checkpoint) != 0 {
				t.Errorf("JobListPage(%s): %s carries its checkpoint %s; a listed row carries none", f, j.ID, j.Checkpoint)
			}
			switch {
			case w == nil && got != nil:
				t.Errorf("JobListPage(%s): %s (%s) carries the wait %+v, want none", f, j.ID, j.State, *got)
			case w != nil && got == nil:
				t.Errorf("JobListPage(%s): %s carries no wait, want %+v", f, j.ID, *w)
			case w != nil && (got.Kind != w.Kind || got.Step != w.Step || got.Name != w.Name || !got.Until.Equal(w.Until) ||
				got.Signal != w.Signal || got.Done != w.Done || got.Total != w.Total):
				t.Errorf("JobListPage(%s): %s carries the wait %+v, want %+v", f, j.ID, *got, *w)
			}
		}
	}
}
