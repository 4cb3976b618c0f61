package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/tui"
)

// start opens a fresh SQLite file and starts the program's engine on it
// with the sample jobs enqueued.
func start(t *testing.T) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "embedded.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e, err := newEngine(store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err := enqueueSamples(ctx, e); err != nil {
		t.Fatal(err)
	}
	return e
}

// settled waits until the sample jobs have all ended and returns how many
// are in each state.
func settled(t *testing.T, e *engine.Engine) map[engine.State]int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		states := map[engine.State]int{}
		for _, j := range page.Jobs {
			states[j.State]++
		}
		if states[engine.StateCompleted]+states[engine.StateArchived] == len(page.Jobs) && len(page.Jobs) == 6 {
			return states
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not settled after 60s: %v", states)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWorkersRunTheProgramsKinds(t *testing.T) {
	t.Parallel()
	e := start(t)
	states := settled(t, e)
	if states[engine.StateCompleted] != 4 || states[engine.StateArchived] != 2 {
		t.Fatalf("states %v, want 4 completed and 2 archived", states)
	}
	ctx := context.Background()
	dead, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]engine.TerminalReason{}
	for _, j := range dead.Jobs {
		reasons[j.Kind] = j.TerminalReason
	}
	if reasons[KindWelcome] != engine.ReasonSkipped || reasons[KindThumb] != engine.ReasonAttemptsExhausted {
		t.Errorf("dead jobs' reasons %v", reasons)
	}
}

// recorder keeps the console's last frame.
type recorder struct {
	*tui.Model
	mu    sync.Mutex
	frame string
}

func (r *recorder) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := r.Model.Update(msg)
	return r, cmd
}

func (r *recorder) View() tea.View {
	v := r.Model.View()
	r.mu.Lock()
	r.frame = v.Content
	r.mu.Unlock()
	return v
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.frame
}

// The console runs in the program's process over its engine: it opens on
// the dead jobs and shows the one the workers archived; q quits it.
func TestConsoleOverTheEngine(t *testing.T) {
	t.Parallel()
	e := start(t)
	settled(t, e)
	r := &recorder{Model: tui.New(e, tui.Options{Theme: "mono", Source: "sqlite://embedded.db",
		Getenv: func(string) string { return "" }})}
	tm := teatest.NewTestModel(t, r, teatest.WithInitialTermSize(140, 40))
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.last(), KindThumb) || !strings.Contains(r.last(), KindWelcome) {
		if time.Now().After(deadline) {
			t.Fatalf("the console never showed the dead jobs; last frame:\n%s", r.last())
		}
		time.Sleep(20 * time.Millisecond)
	}
	tm.Send(tea.KeyPressMsg{Code: 'q', Text: "q"})
	tm.WaitFinished(t, teatest.WithFinalTimeout(30*time.Second))
	_, _ = io.ReadAll(tm.FinalOutput(t))
}
