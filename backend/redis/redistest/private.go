package redistest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Private starts a redis-server of its own on a free loopback port in a
// temp dir, with args added to its command line (--appendonly yes, say),
// and returns its redis:// URL; the server is killed when tb ends. For
// tests that need a configuration the shared server must keep as it is.
// Without redis-server the test fails when CI is set and is skipped
// (saying so) otherwise.
func Private(tb testing.TB, args ...string) string {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("redistest: redis-server not found (CI is set, so this fails)")
		}
		tb.Skip("SKIP: redis-server not found")
	}
	dir := tb.TempDir()
	port := freePort(tb)
	base := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log")}
	cmd := exec.Command("redis-server", append(base, args...)...)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("redistest: start redis-server: %v", err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	waitPing(tb, addr)
	return "redis://" + addr + "/0"
}
