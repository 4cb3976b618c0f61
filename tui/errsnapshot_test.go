package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestErrorGroupsFramesOneMoment: once over SSH an :errors row was
// missing for 2 s while jobs died, and the list was not one the store
// ever held (Redis read the groups one by one). Jobs die one by one, in
// a known order, into four groups on each real store while the console
// shows :errors live; every frame drawn must list the groups as they
// stood after some number T of deaths (T the sum of its counts): each
// group once, no group missing, no count from another moment.
func TestErrorGroupsFramesOneMoment(t *testing.T) {
	t.Parallel()
	// Fewer on PostgreSQL, whose claims one at a time are slower: all
	// die well within the wait for the last frame.
	for _, tc := range []struct {
		name string
		open func(testing.TB) backend.Store
		n    int
	}{
		{"sqlite", func(tb testing.TB) backend.Store { return sqlitetest.New(tb) }, 400},
		{"postgres", func(tb testing.TB) backend.Store { return pgtest.New(tb) }, 120},
		{"redis", func(tb testing.TB) backend.Store { return redistest.New(tb) }, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errorGroupsFramesOneMoment(t, tc.open(t), tc.n)
		})
	}
}

func errorGroupsFramesOneMoment(t *testing.T, store backend.Store, n int) {
	ctx := context.Background()
	// One worker running one job at a time: the jobs die in the order
	// they were enqueued, each heard live by the console.
	eng, err := engine.New(store, engine.Config{WorkerID: "console-test", MaxAttempts: 1, PollInterval: 5 * time.Millisecond,
		Queues: map[string]engine.QueueConfig{"billing": {Concurrency: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(engine.Kind{Name: "invoice.generate", Handler: engine.TypedHandler(
		func(_ context.Context, _ *engine.Job, p struct{ Msg string }) error { return errors.New(p.Msg) })}); err != nil {
		t.Fatal(err)
	}
	patterns := []string{"upstream a timed out", "upstream b refused", "upstream c reset", "upstream d gone"}
	pick := func(i int) int { return (i*i + i/3) % len(patterns) }
	prefix := make([]map[string]int64, n+1)
	prefix[0] = map[string]int64{}
	for i := range n {
		msg := patterns[pick(i)]
		if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: fmt.Sprintf("egf-%03d", i), Queue: "billing", Kind: "invoice.generate",
			Payload: json.RawMessage(fmt.Sprintf(`{"Msg":%q}`, msg))}); err != nil {
			t.Fatal(err)
		}
		prefix[i+1] = maps.Clone(prefix[i])
		prefix[i+1][engine.NormalizeError(msg)]++
	}

	s := start(t, eng, testOptions())
	s.waitFor(fmt.Sprintf("available %d", n))
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	s.waitFor("no dead jobs")
	s.h.mu.Lock()
	s.h.record = true
	s.h.mu.Unlock()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(sctx)
	})
	var wants []string
	for _, p := range patterns {
		wants = append(wants, fmt.Sprintf(" %d    ", prefix[n][engine.NormalizeError(p)]))
	}
	// Every job has to die first: on a loaded machine under -race, 400
	// deaths on SQLite have been seen to outlast waitFor's 10 s.
	s.waitForWithin(time.Minute, wants...)
	s.h.mu.Lock()
	frames := s.h.frames
	s.h.mu.Unlock()
	checked, shown := 0, map[int64]bool{}
	for _, f := range frames {
		got, ok := groupRows(ansi.Strip(f))
		if !ok {
			continue
		}
		var total int64
		for _, c := range got {
			total += c
		}
		if total > int64(n) || !maps.Equal(got, prefix[total]) {
			t.Fatalf("a frame shows groups the store never held: %v (%d jobs); after %d deaths they were %v:\n%s",
				got, total, total, prefix[min(total, int64(n))], ansi.Strip(f))
		}
		checked++
		shown[total] = true
	}
	t.Logf("%d frames checked of %d drawn, %d moments shown", checked, len(frames), len(shown))
}

// groupRows reads the :errors rows of a frame: pattern → jobs (false when
// it shows no rows). A pattern seen twice fails the frame.
func groupRows(screen string) (map[string]int64, bool) {
	lines := strings.Split(screen, "\n")
	head := -1
	for i, l := range lines {
		if strings.Contains(l, "QUEUE") && strings.Contains(l, "JOBS") {
			head = i
			break
		}
	}
	if head < 0 {
		return nil, false
	}
	got := map[string]int64{}
	for _, l := range lines[head+1:] {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "›"))
		if len(f) < 6 || f[0] != "billing" {
			continue
		}
		c, err := strconv.ParseInt(strings.ReplaceAll(f[2], ",", ""), 10, 64)
		if err != nil {
			continue
		}
		p := strings.Join(f[5:], " ")
		if _, twice := got[p]; twice {
			got[p+" (twice)"] = c
			continue
		}
		got[p] = c
	}
	return got, len(got) > 0
}
