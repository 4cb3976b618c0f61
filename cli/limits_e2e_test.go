package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
)

// TestConsoleLimitHoldsRunningJobs: on the real binary in tmux, with two
// worker processes running six chaos.sleep jobs at once, a limit of 2
// set from the console (:limit kind chaos.sleep 2, then y) brings the
// running count the :limits screen shows down to 2, and it stays at most
// 2, on the screen and in the store, while jobs keep starting.
func TestConsoleLimitHoldsRunningJobs(t *testing.T) {
	bin := e2eBinary(t)
	// The workers are internal/testworker: sluice with the chaos kinds.
	tw := filepath.Join(t.TempDir(), "testworker")
	if out, err := exec.Command("go", "build", "-o", tw, "github.com/sluicehq/sluice/internal/testworker").CombinedOutput(); err != nil {
		t.Fatalf("build testworker: %v\n%s", err, out)
	}
	db := sqlitetest.Path(t)
	url := "sqlite://" + db
	ctx := context.Background()
	e, err := engine.New(openStore(t, url), engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	// Enough sleeps of 300–700 ms that the workers never run out: six at
	// once finish about a dozen a second.
	r := rand.New(rand.NewPCG(2, 6))
	ps := make([]engine.EnqueueParams, 3000)
	for i := range ps {
		ps[i] = engine.EnqueueParams{Queue: chaos.Queue, Kind: chaos.KindSleep, Args: chaos.Sleep{MS: 300 + r.IntN(401), N: i}}
	}
	if _, err := e.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		name := "limit-e2e-" + strconv.Itoa(i+1)
		cmd := exec.Command(tw, "worker", "--store", url, "--queues", chaos.Queue, "--worker-id", name,
			"--concurrency", "3", "--poll", "50ms", "--log-level", "error")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	counts := func() (running, completed int64) {
		c, err := e.Counts(ctx, chaos.Queue)
		if err != nil {
			t.Fatal(err)
		}
		return c.Total[engine.StateRunning], c.Total[engine.StateCompleted]
	}
	waitUntil(t, "six chaos.sleep jobs running at once", func() bool { n, _ := counts(); return n == 6 })

	c := startConsole(t, "limits", db, fmt.Sprintf("%s tui --store %s", bin, url))
	c.waitFor(`● live`, 30*time.Second)
	c.command("queues")
	c.waitFor(`(?m)^› chaos\s+active\s+[\d,]+\s+6\s`, 30*time.Second)
	c.command("limit kind chaos.sleep 2")
	c.waitFor(`Limit kind chaos\.sleep: none → 2\?`, 15*time.Second)
	c.send("y")
	c.waitFor(`limit kind chaos\.sleep: none → 2`, 15*time.Second)
	c.command("limits")
	row := regexp.MustCompile(`(?m)^› kind\s+chaos\.sleep\s+(\d+)\s+(\d+)\s`)
	running := func(screen string) int {
		m := row.FindStringSubmatch(screen)
		if m == nil || m[1] != "2" {
			return -1
		}
		n, _ := strconv.Atoi(m[2])
		return n
	}
	c.waitUntil("the limits screen to show chaos.sleep running 2 of 2", 60*time.Second, func(s string) bool { return running(s) == 2 })

	// From here every read, of the screen and of the store, is at most 2,
	// while 40 more jobs start and finish under the limit.
	_, from := counts()
	seen := map[int]int{}
	for {
		s := c.screen()
		n := running(s)
		if n < 0 || n > 2 {
			t.Fatalf("the limits screen shows chaos.sleep running %d under a limit of 2:\n%s", n, s)
		}
		seen[n]++
		store, done := counts()
		if store > 2 {
			t.Fatalf("%d chaos.sleep jobs run under a limit of 2", store)
		}
		if done-from >= 40 {
			t.Logf("%d jobs completed under the limit; the screen read running %v (value: reads)", done-from, seen)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if seen[2] == 0 {
		t.Fatalf("the screen never showed 2 running while jobs ran: %v", seen)
	}
	c.quit()
}
