package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/redisserver"
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
	srv := redisserver.Private(t, redisserver.Options{AppendFsync: "everysec"})
	consoleThroughOutage(t, bin, "redis-away", redistest.URLOn(t, srv.URL()), srv.Stop, srv.Resume,
		[]string{"pool.go", "failed to dial after"})
}

// TestConsolePostgresGoesAwayAndComesBack: the same on a private
// PostgreSQL cluster (the console shows the store as down and recovers
// by itself), stopped and started again on its port.
func TestConsolePostgresGoesAwayAndComesBack(t *testing.T) {
	bin := e2eBinary(t)
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{})
	if errors.Is(err, pgcluster.ErrNotInstalled) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close the private cluster: %v", err)
		}
	})
	consoleThroughOutage(t, bin, "pg-away", c.URL()+"&schema=away", c.Stop, c.Resume, nil)
}

// consoleThroughOutage runs `sluice demo` on storeURL in tmux, stops the
// store while the screen is quiet and checks the console says so (and
// shows none of bad), then resumes it and checks the console is live
// again by itself.
func consoleThroughOutage(t *testing.T, bin, name, storeURL string, stop, resume func(context.Context) error, bad []string) {
	t.Helper()
	ctx := context.Background()
	logFile := filepath.Join(t.TempDir(), "demo.log")
	// No trickle, no backlog and an outage of the demo's that ends at once:
	// once the seed has settled nothing changes on screen, so only the
	// console's own probe can find the store's outage (a load on a live
	// change would find it too, and the test would prove nothing).
	c := startConsole(t, name, "", fmt.Sprintf("%s demo --store '%s' --trickle 0 --backlog 0 --outage 1s --log-file %s",
		bin, storeURL, logFile))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(logFile)
			t.Logf("---- demo log ----\n%s", tailText(string(out), 4000))
		}
	})
	c.waitFor(`● live`, 60*time.Second)
	c.waitFor(`(?m)^› demo-`, 30*time.Second)
	c.waitFor(`scheduled 0  available 0  running 0  retryable 0 `, 90*time.Second)
	time.Sleep(3 * time.Second) // the last refreshes of the settling

	if err := stop(ctx); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = resume(ctx)
		}
	}()
	c.waitFor(`○ unreachable`, 30*time.Second)
	c.waitFor(`⚠ .*failed: `, 15*time.Second)
	// A few more probes' worth of the outage, for anything to scribble.
	time.Sleep(6 * time.Second)
	screen := c.screen()
	for _, b := range append(bad, "● live") {
		if strings.Contains(screen, b) {
			t.Fatalf("with the store away the screen shows %q:\n%s", b, screen)
		}
	}
	if !strings.Contains(strings.SplitN(screen, "\n", 2)[0], "unreachable") {
		t.Fatalf("the header does not say unreachable:\n%s", screen)
	}

	resumed = true
	if err := resume(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitUntil("the console live again, the warning gone", 30*time.Second, func(s string) bool {
		return strings.Contains(strings.SplitN(s, "\n", 2)[0], "● live") && !strings.Contains(s, "⚠") &&
			strings.Contains(s, "demo-")
	})
	c.quit()
}
