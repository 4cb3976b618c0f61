package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Cross-process wake-ups (backend.Notifier), driven through two engines on
// two stores of the same data, as two processes would run them. A store
// that declares backend.CapabilityWakeups runs these from its own tests.

// wakeupDeadline bounds every wait: generous, and far below the hour-long
// poll interval the wake-up checks give their workers.
const wakeupDeadline = 60 * time.Second

// wakeupWorker starts an engine with workers for queue "wq" on s, polling
// every poll, and returns it with the ids its handler ran.
func wakeupWorker(t *testing.T, s backend.Store, poll time.Duration) (*engine.Engine, <-chan string) {
	t.Helper()
	e, err := engine.New(s, engine.Config{
		Queues:       map[string]engine.QueueConfig{"wq": {Concurrency: 2}},
		PollInterval: poll,
		// No maintenance: its ticks must not be what finds the work.
		NoMaintenance: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 1024)
	if err := e.Register(engine.Kind{Name: "k", Handler: func(_ context.Context, j *engine.Job) error {
		ran <- j.ID
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(ctx) })
	return e, ran
}

// wakeupClient is an engine without workers or maintenance on s: a
// process that only enqueues.
func wakeupClient(t *testing.T, s backend.Store) *engine.Engine {
	t.Helper()
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// awaitListener returns once b's listener hears a write through a: until
// then a wake-up could be lost for want of a listener, not of a hook.
func awaitListener(t *testing.T, client *engine.Engine, b backend.Store) {
	t.Helper()
	n, ok := backend.NotifierOf(b)
	if !ok {
		t.Fatalf("%s declares no wake-ups", b.Backend())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := n.Wakeups(ctx)
	deadline := time.Now().Add(wakeupDeadline)
	for i := 0; ; i++ {
		// A queue nobody works: the probes stay available.
		if _, err := client.Enqueue(ctx, engine.EnqueueParams{ID: fmt.Sprintf("probe-%d", i), Queue: "probe", Kind: "k", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		t0 := time.After(200 * time.Millisecond)
	wait:
		for {
			select {
			case q := <-ch:
				if q == "probe" {
					return
				}
			case <-t0:
				break wait
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener never heard a write")
		}
	}
}

func awaitRun(t *testing.T, ran <-chan string, want map[string]bool) {
	t.Helper()
	deadline := time.After(wakeupDeadline)
	for len(want) > 0 {
		select {
		case id := <-ran:
			delete(want, id)
		case <-deadline:
			t.Fatalf("jobs never ran: %v", want)
		}
	}
}

// CrossProcessWakeups: a's enqueue wakes the idle worker of b's engine,
// whose poll interval is an hour, so the job runs only if the wake-up
// crossed; and Subscribe on b's engine reports a's writes.
func CrossProcessWakeups(t *testing.T, a, b backend.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := wakeupClient(t, a)
	worker, ran := wakeupWorker(t, b, time.Hour)
	changes, err := worker.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awaitListener(t, client, b)
	// Rounds: after the first, the worker has run dry and sleeps on its
	// hour-long poll when the next job arrives.
	for round := range 3 {
		id := fmt.Sprintf("wq-%d", round)
		if _, err := client.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "wq", Kind: "k", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		awaitRun(t, ran, map[string]bool{id: true})
		deadline := time.After(wakeupDeadline)
	sub:
		for {
			select {
			case c, ok := <-changes:
				if !ok {
					t.Fatal("subscription closed")
				}
				if c.Kind == engine.ChangeJob && c.Queue == "wq" && c.State == engine.StateAvailable {
					break sub
				}
			case <-deadline:
				t.Fatalf("round %d: Subscribe never reported the other process's enqueue", round)
			}
		}
	}
}

// WakeupPollFallback: with b's listener cut by cut (nil: b's listener
// never gets a connection), jobs a enqueues still run on b's engine by its
// poll.
func WakeupPollFallback(t *testing.T, a, b backend.Store, cut func(t *testing.T)) {
	ctx := context.Background()
	client := wakeupClient(t, a)
	_, ran := wakeupWorker(t, b, 100*time.Millisecond)
	if cut != nil {
		awaitListener(t, client, b)
		cut(t)
	}
	want := map[string]bool{}
	ps := make([]engine.EnqueueParams, 20)
	for i := range ps {
		id := fmt.Sprintf("fb-%02d", i)
		ps[i] = engine.EnqueueParams{ID: id, Queue: "wq", Kind: "k", Payload: []byte(`{}`)}
		want[id] = true
	}
	if _, err := client.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	awaitRun(t, ran, want)
}
