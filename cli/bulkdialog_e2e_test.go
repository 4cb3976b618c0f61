package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// serveStore runs the real `sluice serve` over storeURL on a free
// loopback port and returns its HTTP base URL and its process.
func serveStore(t *testing.T, bin, storeURL string) (string, *os.Process) {
	t.Helper()
	dir := t.TempDir()
	serve := exec.Command(bin, "serve", "--store", storeURL, "--listen", "127.0.0.1:0", "--log-file", filepath.Join(dir, "serve.log"))
	serve.Env = append(os.Environ(), "SLUICE_TOKENS=", "XDG_CONFIG_HOME="+dir)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGCONT)
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
	})
	sc := bufio.NewScanner(stdout)
	base := ""
	for base == "" && sc.Scan() {
		if m := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)/api/v1`).FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatal("serve printed no address")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return base, serve.Process
}

// deadGroup kills n partner.sync jobs with one error on storeURL and
// returns the store's clock a whole second after the last death: a
// finalized< cutoff that takes them all.
func deadGroup(t *testing.T, storeURL string, n int) time.Time {
	t.Helper()
	ctx := context.Background()
	s, err := storeurl.OpenMigrating(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{Queues: map[string]engine.QueueConfig{"partner": {Concurrency: 8}},
		PollInterval: 10 * time.Millisecond, NoMaintenance: true, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "partner.sync", Handler: func(context.Context, *engine.Job) error {
		return errors.New("partner api: 503 Service Unavailable")
	}}); err != nil {
		t.Fatal(err)
	}
	var ps []engine.EnqueueParams
	for i := range n {
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("P-%05d", i), Queue: "partner", Kind: "partner.sync"})
	}
	if _, err := e.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop(context.Background()) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := e.Counts(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if c.Total[engine.StateArchived] == int64(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs died", c.Total[engine.StateArchived], n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return now.Truncate(time.Second).Add(time.Second)
}

// TestConsolePostgresGroupRunShownThroughout: the night's run, scaled
// down: PostgreSQL behind `sluice serve`, the console attached over
// HTTP, a bulk retry of an error group started from the error groups
// screen under a finalized< filter, at 200 jobs/s. The run's own changes
// keep the console's live refreshes of the groups and counts going while
// it runs. From y to the end the screen is read every 100 ms: every
// frame shows the dialog (the preview saying starting…, then the
// progress), the progress is seen moving before the run ends, and keys
// pressed meanwhile do not reach the list behind it. This does not
// force the report's frozen console (no mechanism was found for it: the
// model test TestBulkDialogDrawnWheneverItTakesKeys plays every order of
// the dialog's messages); it holds the real binary to the same rule on
// the night's path.
func TestConsolePostgresGroupRunShownThroughout(t *testing.T) {
	bin := e2eBinary(t)
	storeURL, _ := pgcluster.SharedStoreURL(t)
	storeURL = pgcluster.Migrating(storeURL)
	const n = 2000
	cutoff := deadGroup(t, storeURL, n)
	base, _ := serveStore(t, bin, storeURL)
	dir := t.TempDir()
	c := startConsole(t, "pg-group-run", "", fmt.Sprintf("env TZ=UTC %s tui --api %s --log-file %s --query 'finalized<%s'",
		bin, base, filepath.Join(dir, "tui.log"), cutoff.UTC().Format(time.RFC3339)))
	c.waitFor(`● live`, 30*time.Second)
	c.command("errors")
	c.waitFor(`(?m)^› partner\s+partner\.sync\s+(?:open\s+)?2,000 `, 30*time.Second)
	c.send("b")
	c.waitFor(`retry 2,000 jobs`, 15*time.Second)
	c.typeText("200")
	c.waitFor(`200▏\] jobs/s`, 5*time.Second)
	c.send("y")
	progress := regexp.MustCompile(`Bulk retry — (pending|running)`)
	processed := regexp.MustCompile(`([\d,]+) / 2,000 processed`)
	moving, frames, keys := 0, 0, 0
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		s := c.screen()
		frames++
		if strings.Contains(s, "Bulk retry — completed") {
			break
		}
		if !strings.Contains(s, "starting…") && !progress.MatchString(s) {
			t.Fatalf("frame %d after y shows no bulk dialog:\n%s", frames, s)
		}
		if m := processed.FindStringSubmatch(s); m != nil && m[1] != "0" && m[1] != "2,000" && m[1] != last {
			moving++
			last = m[1]
		}
		if frames%10 == 0 {
			// A key the dialog swallows: the list behind must not move.
			c.send("j")
			keys++
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not complete:\n%s", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if moving < 2 {
		t.Fatalf("the progress was seen at %d values before the end, want it seen moving", moving)
	}
	t.Logf("%d frames read during the run, the progress seen at %d values, %d keys pressed", frames, moving, keys)
	c.waitFor(`2,000 / 2,000 processed · 2,000 ok · 0 failed`, 5*time.Second)
	c.send("Escape")
	c.waitFor(`bulk retry completed: 2,000 matched, 2,000 retried, 0 failed`, 15*time.Second)
	c.quit()
}

// TestConsoleFailedStartWaitsForTheInputLine: forced with the real
// binary, attached over HTTP. The server is stopped (SIGSTOP) before y,
// so the start's answer never comes; esc hides the dialog while it
// starts and / opens the input line; the start then fails at the
// console's call timeout, which makes the dialog visible again. It was
// drawn over the input line that had the keys; now it waits for the
// input line to close, and is on screen once it has.
func TestConsoleFailedStartWaitsForTheInputLine(t *testing.T) {
	bin := e2eBinary(t)
	db := deadStore(t, 3, 0)
	base, serve := serveStore(t, bin, "sqlite://"+db)
	c := startConsole(t, "failed-start", db, fmt.Sprintf("%s tui --api %s", bin, base))
	c.waitFor(`● live`, 30*time.Second)
	c.waitFor(`(?m)^› B-0`, 30*time.Second)
	c.send("b")
	c.waitFor(`retry 3 jobs`, 15*time.Second)
	if err := serve.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c.send("y")
	c.waitFor(`starting…`, 5*time.Second)
	c.send("Escape")
	c.waitFor(`bulk retry starting…`, 5*time.Second)
	c.send("/")
	c.waitFor(`(?m)^/`, 5*time.Second)
	// The console gives the start up at its call timeout (15 s).
	s := c.waitUntil("the start given up", 60*time.Second, func(s string) bool {
		return !strings.Contains(s, "bulk retry starting…")
	})
	if strings.Contains(s, "Bulk retry — failed") {
		t.Fatalf("the failed start is drawn over the input line that has the keys:\n%s", s)
	}
	if !regexp.MustCompile(`(?m)^/`).MatchString(s) {
		t.Fatalf("the input line is gone:\n%s", s)
	}
	if err := serve.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.send("Escape")
	c.waitFor(`Bulk retry — failed`, 5*time.Second)
	c.escape(`Bulk retry — failed`)
	c.quit()
}
