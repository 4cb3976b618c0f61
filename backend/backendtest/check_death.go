package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// deathCall is one call of a death handler, as recorded.
type deathCall struct {
	handler int
	jobID   string
	reason  engine.DeathReason
	// stored is the job's row as read inside the handler.
	stored *engine.Job
	// queue and errs are what the event's copy held when the handler
	// was called.
	queue string
	errs  int
	msg   string
}

type deathLog struct {
	mu    sync.Mutex
	calls []deathCall
}

func (l *deathLog) add(c deathCall) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *deathLog) forJob(id string) []deathCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []deathCall
	for _, c := range l.calls {
		if c.jobID == id {
			out = append(out, c)
		}
	}
	return out
}

// testDeathHandlers: each death (attempts exhausted, skipped, deadline at
// claim and while running, quarantined) calls every handler exactly once,
// in registration order, after the durable write, each on its own copy.
func testDeathHandlers(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cfg := fast("w1", "q")
	cfg.CrashLimit = 2
	e := newEngine(t, s, cfg,
		engine.Kind{Name: "fail", Handler: func(context.Context, *engine.Job) error { return errors.New("always fails") }},
		engine.Kind{Name: "skip", Handler: func(context.Context, *engine.Job) error { return engine.Skip("unwanted") }},
		engine.Kind{Name: "slow", Handler: func(ctx context.Context, _ *engine.Job) error { <-ctx.Done(); return ctx.Err() }},
		engine.Kind{Name: "crash", Handler: func(context.Context, *engine.Job) error { panic("crash for death") }},
		engine.Kind{Name: "ok", Handler: func(context.Context, *engine.Job) error { return nil }},
	)
	log := &deathLog{}
	record := func(n int) engine.DeathHandler {
		return func(ctx context.Context, ev engine.DeathEvent) {
			stored, _ := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: ev.Job.ID})
			c := deathCall{handler: n, jobID: ev.Job.ID, reason: ev.Reason, stored: stored,
				queue: ev.Job.Queue, errs: len(ev.Job.Errors), msg: ev.Error}
			log.add(c)
			// Vandalise this handler's copy; the next handler must not see it.
			ev.Job.Queue = "mutated"
			ev.Job.Errors = append(ev.Job.Errors, engine.AttemptError{Message: "added by a handler"})
			if len(ev.Job.Errors) > 1 {
				ev.Job.Errors[0].Message = "changed by a handler"
			}
			ev.Job.Tags = append(ev.Job.Tags, "mutated")
			if ev.Job.Lease != nil {
				ev.Job.Lease.Fence = -1
			}
		}
	}
	e.OnDead(record(1))
	e.OnDead(record(2))
	start(t, e)

	past := storeNow(t, s).Add(-time.Second)
	soon := storeNow(t, s).Add(300 * time.Millisecond)
	jobs := []struct {
		id     string
		p      engine.EnqueueParams
		state  engine.State
		reason engine.DeathReason
	}{
		{"d-exhausted", engine.EnqueueParams{Kind: "fail", MaxAttempts: 2}, engine.StateArchived, engine.ReasonAttemptsExhausted},
		{"d-skipped", engine.EnqueueParams{Kind: "skip"}, engine.StateArchived, engine.ReasonSkipped},
		{"d-deadline-claim", engine.EnqueueParams{Kind: "ok", Deadline: &past}, engine.StateArchived, engine.ReasonDeadlineExceeded},
		{"d-deadline-run", engine.EnqueueParams{Kind: "slow", Deadline: &soon}, engine.StateArchived, engine.ReasonDeadlineExceeded},
		{"d-quarantined", engine.EnqueueParams{Kind: "crash"}, engine.StateQuarantined, engine.ReasonQuarantined},
		{"d-alive", engine.EnqueueParams{Kind: "ok"}, engine.StateCompleted, ""},
	}
	for _, j := range jobs {
		j.p.ID, j.p.Queue, j.p.Tags = j.id, "q", []string{"orig"}
		enqueue(t, e, j.p)
	}
	for _, j := range jobs {
		waitState(t, s, j.id, j.state)
		if j.reason == "" {
			continue
		}
		eventually(t, waitLong, func() bool { return len(log.forJob(j.id)) >= 2 }, "both death handlers to be called for %s", j.id)
	}
	// Stop waits for the workers, so no call is still on its way.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	for _, j := range jobs {
		calls := log.forJob(j.id)
		if j.reason == "" {
			if len(calls) != 0 {
				t.Fatalf("%s completed, yet death handlers were called: %+v", j.id, calls)
			}
			continue
		}
		if len(calls) != 2 || calls[0].handler != 1 || calls[1].handler != 2 {
			t.Fatalf("%s: calls %+v, want handler 1 then handler 2, once each", j.id, calls)
		}
		for _, c := range calls {
			if c.reason != j.reason {
				t.Fatalf("%s: handler %d got reason %q, want %q", j.id, c.handler, c.reason, j.reason)
			}
			if c.stored == nil || c.stored.State != j.state || c.stored.TerminalReason != j.reason {
				t.Fatalf("%s: inside handler %d the store shows %s, want the durable %s/%s", j.id, c.handler, describe(c.stored), j.state, j.reason)
			}
			if c.queue != "q" {
				t.Fatalf("%s: handler %d saw queue %q: copies are shared", j.id, c.handler, c.queue)
			}
			if c.msg == "" {
				t.Fatalf("%s: handler %d got no error text", j.id, c.handler)
			}
		}
		if calls[0].errs != calls[1].errs {
			t.Fatalf("%s: handler 2 saw %d errors, handler 1 %d: copies are shared", j.id, calls[1].errs, calls[0].errs)
		}
		if st := getJob(t, s, j.id); st.Queue != "q" || len(st.Tags) != 1 {
			t.Fatalf("%s: a handler's changes reached the store: %+v", j.id, st)
		}
	}
}

// testDeathHandlersMisbehave: a death handler that panics and one that
// blocks forever do not stop the worker.
func testDeathHandlersMisbehave(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cfg := fast("w1", "q")
	e := newEngine(t, s, cfg,
		engine.Kind{Name: "skip", Handler: func(context.Context, *engine.Job) error { return engine.Skip("die") }},
		engine.Kind{Name: "ok", Handler: func(context.Context, *engine.Job) error { return nil }},
	)
	unblock := make(chan struct{})
	log := &deathLog{}
	e.OnDead(func(context.Context, engine.DeathEvent) { panic("death handler panics") })
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) {
		log.add(deathCall{handler: 2, jobID: ev.Job.ID, reason: ev.Reason})
	})
	e.OnDead(func(context.Context, engine.DeathEvent) { <-unblock }) // ignores its context
	start(t, e)
	t.Cleanup(func() { close(unblock) }) // runs before the engine's Stop

	for i := range 3 {
		enqueue(t, e, engine.EnqueueParams{ID: fmt.Sprintf("die-%d", i), Queue: "q", Kind: "skip"})
	}
	for i := range 3 {
		waitState(t, s, fmt.Sprintf("die-%d", i), engine.StateArchived)
	}
	for i := range 8 {
		enqueue(t, e, engine.EnqueueParams{ID: fmt.Sprintf("later-%d", i), Queue: "q", Kind: "ok"})
	}
	for i := range 8 {
		waitState(t, s, fmt.Sprintf("later-%d", i), engine.StateCompleted)
	}
	// The handler after the panicking one still ran.
	eventually(t, waitLong, func() bool { return len(log.forJob("die-0")) == 1 }, "the handler after a panicking one to run")
}
