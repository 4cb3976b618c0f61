package tui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// sheetState is the state line of the open sheet, as drawn.
func sheetState(screen string) string {
	for _, l := range strings.Split(screen, "\n") {
		if i := strings.Index(l, "│ state "); i >= 0 {
			return strings.TrimSpace(l[i+len("│ state "):])
		}
	}
	return ""
}

// TestSheetHearsAnotherProcesssReaper: the sheet is open on a running
// job whose worker is gone; another process's reaper takes the job back
// (a crash charged, the job available again). That process publishes
// the change on its own bus: the console, in a process of its own, hears
// of it only as a change of the counters that names no job, which it
// took for the list's only; the sheet went on saying running, its lease
// "until … (1m ago)", until esc enter. Now every change heard reaches
// the open sheet, and so does the age tick, which re-reads the sheet
// (claims and renewals are never published).
func TestSheetHearsAnotherProcesssReaper(t *testing.T) {
	f := setup(t, false)
	ctx := context.Background()
	if _, err := f.eng.Enqueue(ctx, engine.EnqueueParams{ID: "ship-0001", Queue: "shipping", Kind: "label.print",
		Payload: json.RawMessage(`{"order":7}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := f.store.JobClaim(ctx, &backend.JobClaimParams{Queue: "shipping", WorkerID: "worker-gone", LeaseID: "lease-gone",
		Limit: 1, Kinds: map[string]int{"label.print": 1}, LeaseDuration: 300 * time.Millisecond})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("claim: %v %v", res, err)
	}
	o := testOptions()
	o.Query = "id:ship-0001 state:running,available,retryable"
	s := start(t, f.eng, o)
	s.waitFor("ship-0001")
	s.keys("<enter>")
	if st := sheetState(s.waitFor("lease")); !strings.HasPrefix(st, "running") {
		t.Fatalf("the sheet opened on %q, want running", st)
	}

	// The other process: its reaper charges the crash once it trusts
	// its view (three beats and a grace).
	other, err := engine.New(f.store, engine.Config{WorkerID: "reaper-process", MaintenanceInterval: 20 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = other.Stop(sctx)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		d, err := f.eng.GetJob(ctx, "ship-0001", false)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.State != engine.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other process never reaped the job")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Within a poll of the counters and the refresh delay when heard,
	// the age tick's 5s at worst; never, before.
	within := time.Now().Add(10 * time.Second)
	for {
		screen := ansi.Strip(s.h.last())
		if st := sheetState(screen); !strings.HasPrefix(st, "running") && strings.Contains(screen, "crashed") {
			break
		}
		if time.Now().After(within) {
			t.Fatalf("the sheet still shows the job as before the reaper:\n%s", screen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRefreshKeyReloadsTheSheet: ctrl+r reads the open sheet's job again
// whether or not a change was heard for it (it reloaded the list and the
// counts only; the sheet waited for a change that named its job).
func TestRefreshKeyReloadsTheSheet(t *testing.T) {
	f := setup(t, false)
	ctx := context.Background()
	m := f.stillConsole(t, goldenW, goldenH, func(o *Options) { o.Query = "id:evil-0001 state:archived,available" })
	runCmd(m, m.loadCounts())
	runCmd(m, m.loadList(listReplace, "", 0))
	_, cmd := m.Update(keyMsg("<enter>"))
	runCmd(m, cmd)
	if st := sheetState(ansi.Strip(m.Render())); !strings.HasPrefix(st, "archived") {
		t.Fatalf("the sheet opened on %q, want archived:\n%s", st, ansi.Strip(m.Render()))
	}
	// Another process retries it; nothing is heard (no live updates).
	other, err := engine.New(f.store, engine.Config{WorkerID: "other", NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Apply(ctx, engine.ActionRetry, []string{"evil-0001"}); err != nil {
		t.Fatal(err)
	}
	_, cmd = m.Update(keyMsg("<ctrl+r>"))
	runCmd(m, cmd)
	if st := sheetState(ansi.Strip(m.Render())); !strings.HasPrefix(st, "available") {
		t.Fatalf("after ctrl+r the sheet says %q, want available:\n%s", st, ansi.Strip(m.Render()))
	}
}
