package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// cappedRedis is a Redis store whose scan budget (40 jobs) stops the
// count of an error-text filter, with an engine over it and n dead jobs
// whose error says "partner", under 30 others.
func cappedRedis(t *testing.T, n int) (*redis.Store, *engine.Engine) {
	t.Helper()
	s, err := redis.Open(context.Background(), redistest.URL(t), redis.Options{Migrate: true, ScanBudget: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	eng, err := engine.New(s, engine.Config{MaxAttempts: 1, WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	killJobs(t, s, eng, "other", 30, "template not found: receipt-v1")
	killJobs(t, s, eng, "partner", n, "partner api: 503")
	return s, eng
}

// killJobs enqueues n jobs and fails each once, to archived, with msg.
func killJobs(t *testing.T, s backend.Store, eng *engine.Engine, prefix string, n int, msg string) {
	t.Helper()
	ctx := context.Background()
	var ps []engine.EnqueueParams
	for i := range n {
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("%s-%d-%04d", prefix, time.Now().UnixNano(), i), Queue: "billing",
			Kind: "invoice.generate", Payload: json.RawMessage(`{}`), MaxAttempts: 1})
	}
	res, err := eng.EnqueueMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	claimed, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "billing", WorkerID: testWorker, LeaseID: "lease-" + prefix,
		Limit: n, Kinds: map[string]int{"invoice.generate": 1}, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed.Jobs) != n {
		t.Fatalf("claimed %d jobs, want %d", len(claimed.Jobs), n)
	}
	for _, job := range claimed.Jobs {
		p := backendtest.Outcome{
			JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
			Charge: backend.ChargeAttempt, Event: engine.EventArchived, Actor: testWorker, Message: msg,
			Error: &engine.AttemptError{Message: msg, Worker: testWorker}, ErrorPattern: engine.NormalizeError(msg),
			To: engine.StateArchived, Reason: engine.ReasonAttemptsExhausted,
		}
		if _, err := s.JobFinish(ctx, p.Plan(job)); err != nil {
			t.Fatal(err)
		}
	}
}

// deliver runs cmd (a load, not a timer) and gives its message to m.
func deliver(t *testing.T, m *Model, cmd tea.Cmd) {
	t.Helper()
	if cmd == nil {
		t.Fatal("no command to run")
	}
	m.Update(cmd())
}

// tabAndStatus is the tabs line and the status line of m's frame.
func tabAndStatus(m *Model) (string, string) {
	lines := strings.Split(ansi.Strip(m.Render()), "\n")
	return lines[1], lines[len(lines)-1]
}

// TestIdleRecountCountsWhole: on Redis a filter the store counts by
// reading jobs stops at its scan budget: the tab read "archived 9,484+"
// while a dry run said 9,997. When the console is idle (no key for
// IdleRecount, no load on its way) it counts the tab's state whole, and
// the tab shows that figure, as of when it was counted; once the count
// changes it is capped again until the next idle recount. A recount
// never starts while the operator types or another load is on its way,
// and a key stops one on its way.
func TestIdleRecountCountsWhole(t *testing.T) {
	t.Parallel()
	s, eng := cappedRedis(t, 100)
	clock := time.Date(2026, 12, 5, 7, 31, 2, 0, time.UTC)
	m := New(eng, Options{NoSubscribe: true, Now: func() time.Time { return clock }, Theme: "dark", Query: "error:partner",
		IdleRecount: 3 * time.Second, Getenv: func(string) string { return "" }})
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: 240, Height: 12})
	deliver(t, m, m.loadCounts())
	tab, status := tabAndStatus(m)
	if !strings.Contains(tab, "+") || !strings.Contains(status, "scan budget stopped the count") {
		t.Fatalf("the count is not capped at the scan budget:\n%s\n%s", tab, status)
	}
	capped := tab + "\n" + status

	// Typing a filter: no recount, however long the operator takes.
	m.Update(keyMsg("/"))
	clock = clock.Add(time.Minute)
	if cmd := m.idleTick(); m.idle.seq != 0 || cmd == nil {
		t.Fatal("a recount started while the operator typed (or the idle wait was given up)")
	}
	m.Update(keyMsg("<esc>"))
	clock = clock.Add(time.Second)
	if m.idleTick(); m.idle.seq != 0 {
		t.Fatal("a recount started a second after a key")
	}
	// A load on its way: no recount either.
	clock = clock.Add(time.Minute)
	load := m.loadCounts()
	if m.idleTick(); m.idle.seq != 0 {
		t.Fatal("a recount started while the counts were being read")
	}
	deliver(t, m, load)

	// Idle: the recount starts; a key stops it and its answer is dropped.
	recount := m.idleTick()
	if m.idle.seq == 0 || recount == nil {
		t.Fatal("no recount started on an idle console")
	}
	if tab, status := tabAndStatus(m); !strings.Contains(status, "counting them whole") {
		t.Fatalf("the status line does not say the count is being taken whole:\n%s\n%s", tab, status)
	}
	m.Update(keyMsg("j"))
	msg := recount()
	if rm, ok := msg.(recountMsg); !ok || rm.err == nil {
		t.Fatalf("a key did not stop the recount on its way: %#v", msg)
	}
	m.Update(msg)
	if tab, _ := tabAndStatus(m); !strings.Contains(tab, "+") {
		t.Fatalf("a recount the operator interrupted was shown:\n%s", tab)
	}

	// Idle again: counted whole, the tab shows the figure and when.
	clock = clock.Add(time.Minute)
	deliver(t, m, m.idleTick())
	tab, status = tabAndStatus(m)
	if !strings.Contains(tab, "archived 100 ") || !strings.Contains(status, "archived 100 as counted whole at 07:34:03, while idle") {
		t.Fatalf("the idle recount's figure is not shown:\n%s\n%s", tab, status)
	}
	exact := tab + "\n" + status
	if m.idleTick(); m.idle.seq != 0 {
		t.Fatal("an unchanged count was counted whole again")
	}

	// Five more die: the count changed, the tab is capped again until the
	// next idle recount, which counts them.
	killJobs(t, s, eng, "partner", 5, "partner api: 503")
	deliver(t, m, m.loadCounts())
	if tab, _ := tabAndStatus(m); !strings.Contains(tab, "+") || strings.Contains(tab, "archived 100 ") {
		t.Fatalf("a whole count outlived a change of the count:\n%s", tab)
	}
	clock = clock.Add(time.Minute)
	deliver(t, m, m.idleTick())
	if tab, _ := tabAndStatus(m); !strings.Contains(tab, "archived 105 ") {
		t.Fatalf("the next idle recount did not count the change:\n%s", tab)
	}
	golden.RequireEqual(t, normalize(capped+"\n"+exact))
}

// TestIdleRecountLive: the idle recount runs in the program as it runs,
// over a live subscription: left alone, the capped tab comes to show its
// whole count.
func TestIdleRecountLive(t *testing.T) {
	t.Parallel()
	_, eng := cappedRedis(t, 100)
	opts := testOptions()
	opts.Query, opts.IdleRecount = "error:partner", 100*time.Millisecond
	s := start(t, eng, opts)
	screen := s.waitFor("archived 100 ", "archived 100 as counted whole at")
	if strings.Contains(strings.Split(screen, "\n")[1], "+") {
		t.Fatalf("the tab still reads at least:\n%s", screen)
	}
}

// TestIdleRecountPastTheBound: on SQLite a filter's count stops at the
// bound of 10,000 ("scheduled 10,000+"); the idle recount counts it
// without that bound (up to engine.MaxCountJobsMax) and the tab shows
// the whole figure.
func TestIdleRecountPastTheBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{WorkerID: "console-test", NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_050
	for i := 0; i < n; i += 1000 {
		var ps []engine.EnqueueParams
		for k := i; k < min(i+1000, n); k++ {
			ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("later-%05d", k), Queue: "billing", Kind: "invoice.generate",
				Payload: json.RawMessage(`{"tag":"x"}`), Delay: time.Hour})
		}
		if _, err := eng.EnqueueMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	clock := time.Date(2026, 12, 5, 7, 31, 2, 0, time.UTC)
	m := New(eng, Options{NoSubscribe: true, Now: func() time.Time { return clock }, Theme: "dark", Query: "payload.tag:x",
		State: engine.StateScheduled, IdleRecount: 3 * time.Second, Getenv: func(string) string { return "" }})
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: 240, Height: 12})
	deliver(t, m, m.loadCounts())
	tab, status := tabAndStatus(m)
	if !strings.Contains(tab, "scheduled 10,000+") || !strings.Contains(status, "counted to the bound of 10,000") {
		t.Fatalf("the count is not capped at its bound:\n%s\n%s", tab, status)
	}
	clock = clock.Add(time.Minute)
	deliver(t, m, m.idleTick())
	tab, status = tabAndStatus(m)
	if !strings.Contains(tab, "scheduled 10,050 ") || !strings.Contains(status, "scheduled 10,050 as counted whole at 07:32:02, while idle") {
		t.Fatalf("the idle recount's figure is not shown:\n%s\n%s", tab, status)
	}
}
