package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/redis/redistest"
)

// TestConsoleRedisGoesAwayAndComesBack: the real binary's console on a
// private Redis (append-only file on, so a restart keeps the jobs) in
// tmux. The server stops while the screen is quiet: the header stops
// saying live and says unreachable, the status line says why, and
// nothing else reaches the screen (go-redis's own "failed to dial" lines
// went to stderr, over the console, until the store's logger took them).
// The server comes back: the console says live again by itself, no key
// pressed, and shows the jobs.
func TestConsoleRedisGoesAwayAndComesBack(t *testing.T) {
	bin := e2eBinary(t)
	ctx := context.Background()
	srv := redistest.PrivateServer(t, redistest.ServerOptions{AppendFsync: "everysec"})
	storeURL := redistest.URLOn(t, srv.URL())
	logFile := filepath.Join(t.TempDir(), "demo.log")
	// No trickle and no backlog: once the seed has settled nothing changes
	// on screen, so only the console's own probe can find the outage.
	c := startConsole(t, "redis-away", "", fmt.Sprintf("%s demo --store '%s' --trickle 0 --backlog 0 --log-file %s", bin, storeURL, logFile))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(logFile)
			t.Logf("---- demo log ----\n%s", tailText(string(out), 4000))
		}
	})
	c.waitFor(`● live`, 60*time.Second)
	c.waitFor(`(?m)^› demo-`, 30*time.Second)

	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	screen := c.waitFor(`○ unreachable`, 30*time.Second)[0]
	c.waitFor(`⚠ .*failed: .*connection refused`, 15*time.Second)
	// A few more probes' worth of the outage, for anything to scribble.
	time.Sleep(6 * time.Second)
	screen = c.screen()
	for _, bad := range []string{"pool.go", "failed to dial after", "● live"} {
		if strings.Contains(screen, bad) {
			t.Fatalf("with the store away the screen shows %q:\n%s", bad, screen)
		}
	}
	if !strings.Contains(strings.SplitN(screen, "\n", 2)[0], "unreachable") {
		t.Fatalf("the header does not say unreachable:\n%s", screen)
	}

	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitUntil("the console live again, the warning gone", 30*time.Second, func(s string) bool {
		return strings.Contains(strings.SplitN(s, "\n", 2)[0], "● live") && !strings.Contains(s, "⚠") &&
			strings.Contains(s, "demo-")
	})
	c.quit()
}
