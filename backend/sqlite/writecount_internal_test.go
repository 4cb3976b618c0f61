package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/commithook"
)

// TestCommitHookCountsEveryWrite: a commit hook carried by the contexts an
// engine is given (Enqueue, Start, Stop) is called once for every write
// transaction the store commits while the engine runs, maintenance and
// its leader resignations at Stop included. The benchmark's
// write_tx_per_job counts writes so, with no counter on the store.
func TestCommitHookCountsEveryWrite(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var hooked atomic.Uint64
	ctx = commithook.With(ctx, func() { hooked.Add(1) })
	const n = 200
	var handled atomic.Int64
	done := make(chan struct{})
	e, err := engine.New(s, engine.Config{
		Queues:    map[string]engine.QueueConfig{"q": {Concurrency: 8}},
		Retention: map[engine.State]time.Duration{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "k", Handler: func(_ context.Context, j *engine.Job) error {
		if handled.Add(1) == n {
			close(done)
		}
		if j.Attempt == 1 && handled.Load()%7 == 0 {
			return fmt.Errorf("fails once")
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	before := s.writes.Load()
	hooked.Store(0)
	ps := make([]engine.EnqueueParams, n)
	for i := range ps {
		ps[i] = engine.EnqueueParams{Queue: "q", Kind: "k", Payload: []byte(`{}`)}
	}
	for i := 0; i < n; i += 50 {
		if _, err := e.EnqueueMany(ctx, ps[i:i+50]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	committed := s.writes.Load() - before
	if committed == 0 || hooked.Load() != committed {
		t.Errorf("the hook counted %d write transactions; the store committed %d", hooked.Load(), committed)
	}
}
