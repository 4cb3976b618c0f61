package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// testQuarantine: a poison pill crashes CrashLimit times, its fingerprint
// is quarantined with its waiting siblings; release puts it on probation,
// where one crash quarantines it again and one completion ends it.
func testQuarantine(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	cfg := fast("w1", "q")
	cfg.CrashLimit = 3
	// One job at a time, so "the next crash" after a release is one job's.
	cfg.Queues["q"] = engine.QueueConfig{Concurrency: 1}
	var healed atomic.Bool
	runs := &counter{}
	e := startEngine(t, s, cfg, engine.Kind{Name: "poison", Handler: func(_ context.Context, j *engine.Job) error {
		runs.inc(j.ID)
		if strings.Contains(string(j.Payload), "bad") && !healed.Load() {
			panic("poison pill")
		}
		return nil
	}})
	bad := json.RawMessage(`{"x":"bad"}`)
	// Siblings with the same payload, waiting (scheduled an hour ahead).
	for _, id := range []string{"sib-1", "sib-2"} {
		enqueue(t, e, engine.EnqueueParams{ID: id, Queue: "q", Kind: "poison", Payload: bad, Delay: time.Hour})
	}
	enqueue(t, e, engine.EnqueueParams{ID: "bad", Queue: "q", Kind: "poison", Payload: bad, MaxAttempts: 1})
	for i := range 3 {
		enqueue(t, e, engine.EnqueueParams{ID: fmt.Sprintf("good-%d", i), Queue: "q", Kind: "poison",
			Payload: json.RawMessage(fmt.Sprintf(`{"x":"good-%d"}`, i))})
	}

	j := waitState(t, s, "bad", engine.StateQuarantined)
	if j.CrashAttempt != 3 || j.Attempt != 0 || j.TerminalReason != engine.ReasonQuarantined || len(j.Errors) != 3 {
		t.Fatalf("quarantined job: %s", describe(j))
	}
	for _, er := range j.Errors {
		if !er.Crash || !strings.Contains(er.Message, "poison pill") || !strings.Contains(er.Trace, "panic") {
			t.Fatalf("crash error %+v", er)
		}
	}
	if runs.get("bad") != 3 {
		t.Fatalf("poison pill ran %d times, want 3", runs.get("bad"))
	}
	fp := j.Fingerprint
	rec, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
	if err != nil {
		t.Fatalf("FingerprintGet: %v", err)
	}
	if rec.Status != engine.FingerprintQuarantined || rec.Kind != "poison" ||
		!strings.Contains(rec.LastError, "poison pill") || rec.LastJobID != "bad" || rec.Since.IsZero() {
		t.Fatalf("quarantine record %+v", rec)
	}
	// The record counts the crashes across the fingerprint's jobs: all
	// three of the job's, not only the one that tripped the quarantine.
	if rec.Crashes != 3 {
		t.Errorf("quarantine record counts %d crashes, want 3 (the job crashed 3 times)", rec.Crashes)
	}
	for _, id := range []string{"sib-1", "sib-2"} {
		if sj := waitState(t, s, id, engine.StateQuarantined); sj.CrashAttempt != 0 || runs.get(id) != 0 {
			t.Fatalf("held sibling %s: %s, ran %d times", id, describe(sj), runs.get(id))
		}
	}
	if rec, err = s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp}); err != nil || rec.Held != 3 {
		t.Fatalf("record %+v %v: want 3 held", rec, err)
	}
	for i := range 3 {
		waitState(t, s, fmt.Sprintf("good-%d", i), engine.StateCompleted)
	}
	// The same kind and canonical payload is refused, however it is spelled.
	_, err = e.Enqueue(ctx, engine.EnqueueParams{ID: "bad-again", Queue: "q", Kind: "poison", Payload: json.RawMessage(`{ "x" : "bad" }`)})
	if !errors.Is(err, engine.ErrQuarantined) {
		t.Fatalf("enqueue of a quarantined fingerprint: %v, want ErrQuarantined", err)
	}
	if !gone(s, "bad-again") {
		t.Fatal("a refused job was stored")
	}

	// Release while still poisonous: the next crash quarantines again at once.
	n, err := s.FingerprintRelease(ctx, releasePlan(t, fp, "ops"))
	if err != nil || n != 3 {
		t.Fatalf("FingerprintRelease: %d %v, want 3", n, err)
	}
	eventually(t, waitLong, func() bool {
		r, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
		return err == nil && r.Status == engine.FingerprintQuarantined && r.Held == 3
	}, "the fingerprint to be quarantined again after a crash on probation")
	crashed := 0
	for _, id := range []string{"bad", "sib-1", "sib-2"} {
		sj := waitState(t, s, id, engine.StateQuarantined)
		switch sj.CrashAttempt {
		case 0:
		case 1:
			crashed++
		default:
			t.Fatalf("%s: crash_attempt %d after release: counters were not reset, or probation did not quarantine at once", id, sj.CrashAttempt)
		}
	}
	if crashed != 1 {
		t.Fatalf("%d jobs crashed after the release, want exactly 1 (the first crash quarantines)", crashed)
	}
	rec, _ = s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
	if rec.Crashes != 4 {
		t.Errorf("record counts %d crashes, want 4 (3, then 1 on probation)", rec.Crashes)
	}

	// Fixed: released jobs run and complete, and that ends probation.
	healed.Store(true)
	n, err = s.FingerprintRelease(ctx, releasePlan(t, fp, "ops"))
	if err != nil || n != 3 {
		t.Fatalf("second FingerprintRelease: %d %v, want 3", n, err)
	}
	for _, id := range []string{"bad", "sib-1", "sib-2"} {
		if sj := waitState(t, s, id, engine.StateCompleted); sj.CrashAttempt != 0 {
			t.Fatalf("%s completed with crash_attempt %d, want the reset 0", id, sj.CrashAttempt)
		}
	}
	rec, err = s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
	if err == nil && rec.Status == engine.FingerprintProbation {
		t.Fatalf("completions did not end probation: %+v", rec)
	}
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("FingerprintGet: %v", err)
	}
	enqueue(t, e, engine.EnqueueParams{ID: "bad-again", Queue: "q", Kind: "poison", Payload: bad})
	waitState(t, s, "bad-again", engine.StateCompleted)
}

// testSuspects: jobs on their first crash run in a group that grows as
// they succeed (so more than one runs at once, never more than the
// concurrency), and a job that crashed twice or more runs alone: nothing
// else runs in the process while it does.
func testSuspects(t *testing.T, h Harness) {
	s := h.NewStore(t)
	const firsts, lones, normals = 12, 3, 24
	// The jobs of two crashes first: each claim while they are made takes
	// the one job being made (a new job before suspects, a first-crash
	// suspect before jobs of two crashes).
	for i := range lones {
		p := jobParams(fmt.Sprintf("l-%d", i), "q")
		p.Kind = "l"
		makeSuspectN(t, s, p, 2)
	}
	for i := range firsts {
		p := jobParams(fmt.Sprintf("s-%d", i), "q")
		p.Kind = "s"
		makeSuspect(t, s, p)
	}
	for i := range normals {
		p := jobParams(fmt.Sprintf("n-%d", i), "q")
		p.Kind = "n"
		insert(t, s, p)
	}
	type gauge struct{ cur, max atomic.Int64 }
	var all gauge
	var loneBeside atomic.Int64 // the most jobs running while a lone one ran
	raise := func(g *gauge, c int64) {
		for {
			m := g.max.Load()
			if c <= m || g.max.CompareAndSwap(m, c) {
				return
			}
		}
	}
	track := func(g *gauge, lone bool) engine.Handler {
		return func(context.Context, *engine.Job) error {
			raise(g, g.cur.Add(1))
			n := all.cur.Add(1)
			raise(&all, n)
			for range 4 {
				if lone {
					for {
						m := loneBeside.Load()
						if now := all.cur.Load(); now <= m || loneBeside.CompareAndSwap(m, now) {
							break
						}
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			all.cur.Add(-1)
			g.cur.Add(-1)
			return nil
		}
	}
	var sg, lg, ng gauge
	cfg := fast("w1", "q")
	cfg.Queues["q"] = engine.QueueConfig{Concurrency: 8}
	startEngine(t, s, cfg, engine.Kind{Name: "s", Handler: track(&sg, false)},
		engine.Kind{Name: "l", Handler: track(&lg, true)}, engine.Kind{Name: "n", Handler: track(&ng, false)})
	for i := range firsts {
		waitState(t, s, fmt.Sprintf("s-%d", i), engine.StateCompleted)
	}
	for i := range lones {
		waitState(t, s, fmt.Sprintf("l-%d", i), engine.StateCompleted)
	}
	for i := range normals {
		waitState(t, s, fmt.Sprintf("n-%d", i), engine.StateCompleted)
	}
	if m := sg.max.Load(); m < 2 || m > 8 {
		t.Fatalf("%d first-crash suspects ran at once, want a group that grew past one and within the concurrency", m)
	}
	if m := lg.max.Load(); m != 1 {
		t.Fatalf("%d jobs of two crashes ran at once, want 1", m)
	}
	if m := loneBeside.Load(); m != 1 {
		t.Fatalf("a job of two crashes ran beside %d other jobs, want none", m-1)
	}
	if m := ng.max.Load(); m < 2 {
		t.Fatalf("ordinary jobs never ran side by side (max %d at once)", m)
	}
}

// testReleasedJobOnProbation: an operator releases one quarantined job
// (Control's ReleaseJob), its fingerprint staying quarantined. That job
// runs on probation: its next crash quarantines it again at once, whether
// its handler panics (the worker's path) or its worker dies and the
// reaper charges the expired lease (the reaper's path), instead of
// counting crashes from the reset zero up to the limit, killing a worker
// each time.
func testReleasedJobOnProbation(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	cfg := fast("w1", "q")
	cfg.CrashLimit = 3
	cfg.Queues["q"] = engine.QueueConfig{Concurrency: 1}
	// Fast backoff to reach the quarantine, then an hour: a crash that
	// does not quarantine leaves the job retryable, where it is seen.
	var slow atomic.Bool
	cfg.CrashBackoff = func(int) time.Duration {
		if slow.Load() {
			return time.Hour
		}
		return 2 * time.Millisecond
	}
	runs := &counter{}
	bad := json.RawMessage(`{"x":"bad"}`)
	// The reaper's job: its own fingerprint, in a queue no engine serves,
	// crashed into quarantine by a plan.
	insert(t, s, jobParams("ghost", "q-ghost"))
	quarantineJob(t, s, claimOne(t, s, "q-ghost", "ghost"), "boom")
	e := startEngine(t, s, cfg, engine.Kind{Name: "poison", Handler: func(_ context.Context, j *engine.Job) error {
		runs.inc(j.ID)
		panic("poison pill")
	}})
	enqueue(t, e, engine.EnqueueParams{ID: "sib", Queue: "q", Kind: "poison", Payload: bad, Delay: time.Hour})
	enqueue(t, e, engine.EnqueueParams{ID: "bad", Queue: "q", Kind: "poison", Payload: bad})
	j := waitState(t, s, "bad", engine.StateQuarantined)
	if j.CrashAttempt != 3 {
		t.Fatalf("quarantined job: %s, want 3 crashes", describe(j))
	}
	fp := j.Fingerprint
	waitState(t, s, "sib", engine.StateQuarantined)
	slow.Store(true)

	// The worker's path: the released job's handler panics again. q is
	// paused over the release and the read of the record: the engine
	// serving it would otherwise claim the released job and quarantine
	// it again before the read (CI on Redis cluster saw Held=2 there).
	if err := e.PauseQueue(ctx, "q"); err != nil {
		t.Fatalf("PauseQueue(q): %v", err)
	}
	r, err := e.ReleaseJob(ctx, "bad")
	if err != nil || r.State != engine.StateAvailable || r.CrashAttempt != 0 {
		t.Fatalf("ReleaseJob(bad): %s %v, want available with its crashes reset", describe(r), err)
	}
	if rec, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp}); err != nil ||
		rec.Status != engine.FingerprintQuarantined || rec.Held != 1 || runs.get("bad") != 3 {
		t.Fatalf("record after releasing one job: %+v %v (bad ran %d times), want quarantined with sib held, bad not run again",
			rec, err, runs.get("bad"))
	}
	if err := e.ResumeQueue(ctx, "q"); err != nil {
		t.Fatalf("ResumeQueue(q): %v", err)
	}
	var last *engine.Job
	eventually(t, waitLong, func() bool {
		last = tryJob(s, "bad")
		return runs.get("bad") >= 4 && last != nil && last.State != engine.StateAvailable && last.State != engine.StateRunning
	}, "the released job to run and crash (last seen: %s)", describe(last))
	// Errorf, so that the reaper's path below is checked too.
	if last.State != engine.StateQuarantined || last.CrashAttempt != 1 || last.TerminalReason != engine.ReasonQuarantined {
		t.Errorf("released job after a panic on probation: %s, want quarantined again at once with crash=1", describe(last))
	} else {
		if ev := events(t, s, "bad"); len(ev) == 0 || ev[len(ev)-1].Kind != engine.EventQuarantined {
			t.Fatalf("released job's events %v, want quarantined last", eventKinds(ev))
		}
		if n := runs.get("bad"); n != 4 {
			t.Fatalf("poison pill ran %d times, want 4 (3, then 1 after the release)", n)
		}
		rec, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
		if err != nil || rec.Status != engine.FingerprintQuarantined || rec.Held != 2 || rec.Crashes != 4 {
			t.Fatalf("record after the crash on probation: %+v %v, want quarantined, 2 held, 4 crashes", rec, err)
		}
		if sj := getJob(t, s, "sib"); sj.State != engine.StateQuarantined || runs.get("sib") != 0 {
			t.Fatalf("held sibling: %s, ran %d times, want held and never run", describe(sj), runs.get("sib"))
		}
	}

	// The reaper's path: the released job's worker dies while running it.
	if r, err = e.ReleaseJob(ctx, "ghost"); err != nil || r.State != engine.StateAvailable || r.CrashAttempt != 0 {
		t.Fatalf("ReleaseJob(ghost): %s %v, want available with its crashes reset", describe(r), err)
	}
	js := claimP(t, s, backend.JobClaimParams{Queue: "q-ghost", WorkerID: "ghost-dead", Limit: 1, LeaseDuration: 100 * time.Millisecond}).Jobs
	if len(js) != 1 || js[0].ID != "ghost" {
		t.Fatalf("claim of the released job: %v", ids(js))
	}
	eventually(t, waitLong, func() bool {
		last = tryJob(s, "ghost")
		return last != nil && last.State != engine.StateRunning
	}, "the reaper to charge the dead worker's lease (last seen: %s)", describe(last))
	if last.State != engine.StateQuarantined || last.CrashAttempt != 1 || last.TerminalReason != engine.ReasonQuarantined {
		t.Fatalf("released job after its worker died on probation: %s, want quarantined again at once with crash=1", describe(last))
	}
	if ev := events(t, s, "ghost"); len(ev) == 0 || ev[len(ev)-1].Kind != engine.EventQuarantined {
		t.Fatalf("reaped job's events %v, want quarantined last", eventKinds(ev))
	}
	if rec, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "fp-ghost"}); err != nil ||
		rec.Status != engine.FingerprintQuarantined || rec.Held != 1 || rec.Crashes != 2 {
		t.Fatalf("record after the reaped crash on probation: %+v %v, want quarantined, 1 held, 2 crashes", rec, err)
	}
}
