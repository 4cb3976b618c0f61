package cli

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
)

// TestConsolePauseScheduleHoldsEveryProcess: on the real binary in tmux,
// a schedule paused from the console's :schedules screen (P, then y) is
// enqueued by none of the two processes that fire it, for as long as its
// ticks pass; resumed the same way, it fires again.
func TestConsolePauseScheduleHoldsEveryProcess(t *testing.T) {
	bin := e2eBinary(t)
	db := sqlitetest.Path(t)
	url := "sqlite://" + db
	store := openStore(t, url)
	ss, err := backend.ScheduleStoreOf(store)
	if err != nil {
		t.Fatal(err)
	}
	// Two processes fire the schedules p-00000 and p-00001 every second.
	tw := filepath.Join(t.TempDir(), "testworker")
	if out, err := exec.Command("go", "build", "-o", tw, "github.com/sluicehq/sluice/internal/testworker").CombinedOutput(); err != nil {
		t.Fatalf("build testworker: %v\n%s", err, out)
	}
	for i := range 2 {
		name := "sched-e2e-" + strconv.Itoa(i+1)
		cmd := exec.Command(tw, "periodic", "--store", url, "--worker-id", name, "--queue", "e2e", "--schedules", "2", "--every", "1s")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	row := func(name string) *backend.ScheduleRow {
		r, err := ss.ScheduleGet(context.Background(), &backend.ScheduleGetParams{Name: name})
		if err != nil {
			return nil
		}
		return r
	}
	waitUntil(t, "p-00000 to fire", func() bool { r := row("p-00000"); return r != nil && r.LastJob != "" })

	c := startConsole(t, "sched", db, fmt.Sprintf("%s tui --store %s", bin, url))
	c.waitFor(`● live`, 30*time.Second)
	c.send(":")
	c.typeText("schedules")
	c.send("Enter")
	c.waitFor(`(?m)^› p-00000\s+@every 1s\s+UTC\s+active`, 30*time.Second)
	c.send("P")
	c.waitFor(`Pause schedule p-00000\?`, 15*time.Second)
	c.send("y")
	c.waitFor(`schedule p-00000 paused`, 15*time.Second)
	paused := row("p-00000")
	if !paused.Paused {
		t.Fatalf("p-00000 after P y: %+v", paused)
	}
	// Three ticks pass over it while its sibling fires on.
	waitUntil(t, "three ticks passed over", func() bool {
		r := row("p-00000")
		return r.LastTick.Sub(paused.LastTick) >= 3*time.Second
	})
	held := row("p-00000")
	if held.LastJob != paused.LastJob {
		t.Fatalf("paused p-00000 enqueued %s", held.LastJob)
	}
	for tk := paused.LastTick.Add(time.Second); !tk.After(held.LastTick); tk = tk.Add(time.Second) {
		if j, err := store.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: fmt.Sprintf("sched:p-00000:%d", tk.UnixMilli())}); err == nil {
			t.Fatalf("paused p-00000 enqueued %s", j.ID)
		}
	}
	if r := row("p-00001"); r.LastJob == "" || !strings.HasPrefix(r.LastJob, "sched:p-00001:") {
		t.Fatalf("the sibling stopped too: %+v", r)
	}
	c.send("P")
	c.waitFor(`Resume schedule p-00000\?`, 15*time.Second)
	c.send("y")
	c.waitFor(`schedule p-00000 resumed`, 15*time.Second)
	waitUntil(t, "p-00000 to fire after resume", func() bool { return row("p-00000").LastJob != held.LastJob })
	c.quit()
}

// waitUntil polls cond under a generous deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
