package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/testlog"
)

func TestWorkerCommand(t *testing.T) {
	t.Parallel()
	db := sqlitetest.Path(t)
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 20 {
		j, err := e.Enqueue(context.Background(), engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindInvoiceGenerate,
			Args: demo.Invoice{Invoice: fmt.Sprintf("INV-W-%d", i), Customer: 7, AmountCents: 100, Currency: "EUR", WorkMS: i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logFile := filepath.Join(t.TempDir(), "worker.log")
	exit := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		exit <- run(ctx, []string{"worker", "--demo", "--store", "sqlite://" + db, "--queues", "billing", "--worker-id", "test-worker",
			"--poll", "20ms", "--maintenance-interval", "50ms", "--log-file", logFile}, &out, &out)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for done := 0; done < len(ids); {
		done = 0
		for _, id := range ids {
			j, err := store.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: id})
			if err != nil {
				t.Fatal(err)
			}
			if j.State == engine.StateCompleted {
				done++
				if !strings.HasPrefix(j.AttemptedBy, "test-worker/") {
					t.Errorf("job %s attempted by %q", id, j.AttemptedBy)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed after 60s", done, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("worker exit %d: %s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
	log, _ := os.ReadFile(logFile)
	if !strings.Contains(string(log), "worker stopped") {
		t.Errorf("log file lacks the stop line:\n%s", log)
	}
}

// Without kinds, sluice worker refuses to start, and says where workers
// run; it opens no store.
func TestWorkerWithoutKinds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "never.db")
	for _, args := range [][]string{{"worker"}, {"worker", "--store", "sqlite://" + db, "--queues", "billing"}} {
		var out bytes.Buffer
		if code := run(context.Background(), args, &out, &out); code == 0 {
			t.Errorf("%v: exit 0, want non-zero", args)
		}
		for _, want := range []string{"no job kinds", "inside your own program", "examples/embedded", "--demo"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out.String())
			}
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the store was created: %v", err)
	}
}

// syncBuffer is a buffer safe for one writer and one reader.
type syncBuffer = testlog.Buffer

func TestDemoCommand(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "demo.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"demo", "--db", db, "--refresh", "50ms", "--trickle", "20ms"}, &out, &out)
	}()
	completed := regexp.MustCompile(`completed [1-9]`)
	deadline := time.Now().Add(60 * time.Second)
	for !completed.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no job completed after 60s:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("demo exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop")
	}
	s := out.String()
	if !strings.Contains(s, "stopped. enqueued ") {
		t.Errorf("no final summary:\n%s", s)
	}
	if strings.Contains(s, "level=") {
		t.Errorf("logs reached the screen:\n%s", s)
	}

	// A second run finds the seed and does not add it again.
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if ok, err := demo.Seeded(context.Background(), store); err != nil || !ok {
		t.Errorf("Seeded after the demo = %v, %v", ok, err)
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 100, "plain"},
		{"a\nb\tc", 100, `a\nb\tc`},
		{"\x1b[31mred\x1b[0m", 100, `\x1b[31mred\x1b[0m`},
		{"bidi\u202eevil", 100, `bidi\u202eevil`},
		{"c1\u009bx", 100, `c1\x9bx`},
		{strings.Repeat("x", 12), 10, "xxxxxxxxxx…"},
	}
	for _, c := range cases {
		if got := sanitize(c.in, c.max); got != c.want {
			t.Errorf("sanitize(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// sluice bench burns down N no-op jobs on the store named and prints the
// rate with the machine it ran on; the store keeps none of them.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"bench", "--store", "sqlite://" + db, "--jobs", "200", "--concurrency", "8"}, &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{"200 jobs on sqlite://" + db, "jobs/s", runtime.Version(), "cores"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 0 {
		t.Errorf("the store keeps %d jobs of the run", len(page.Jobs))
	}
}

// TestConsoleCommandNamesTUI: on the walk, `sluice console --url …` (the
// name the console goes by everywhere in the README) answered only
// `unknown command "console"`; the operator had to read the help to find
// `tui`. The error now names the command to run.
func TestConsoleCommandNamesTUI(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"console", "ui"} {
		var out bytes.Buffer
		if code := run(context.Background(), []string{name}, &out, &out); code == 0 {
			t.Fatalf("%s: exit 0, want non-zero", name)
		}
		if !regexp.MustCompile(`(?m)^Did you mean this\?\n\s+tui$`).MatchString(out.String()) {
			t.Fatalf("%s: the error does not point at tui:\n%s", name, out.String())
		}
	}
}

// TestGroupsRefuseUnknownCommands: `sluice jobs shw` printed the group's
// help and exited 0, so a typo in a script passed for success. Every
// command group refuses a word it does not know, says what it is close
// to, and still shows its help when given nothing.
func TestGroupsRefuseUnknownCommands(t *testing.T) {
	t.Parallel()
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(append([]string(nil), path...), sub.Name())
			if sub.HasSubCommands() {
				groups = append(groups, p)
			}
			walk(sub, p)
		}
	}
	walk(newRoot(), nil)
	if len(groups) < 5 {
		t.Fatalf("found %d command groups (%v), want the jobs, bulk, operations, quarantine, queues, errors, config … groups", len(groups), groups)
	}
	for _, g := range groups {
		var out bytes.Buffer
		if code := run(context.Background(), append(append([]string(nil), g...), "zzqx"), &out, &out); code == 0 {
			t.Errorf("sluice %s zzqx: exit 0, want an error:\n%s", strings.Join(g, " "), out.String())
		} else if !strings.Contains(out.String(), `unknown command "zzqx"`) {
			t.Errorf("sluice %s zzqx: the error does not name the word:\n%s", strings.Join(g, " "), out.String())
		}
		out.Reset()
		if code := run(context.Background(), g, &out, &out); code != 0 || !strings.Contains(out.String(), "Available Commands:") {
			t.Errorf("sluice %s: exit %d, want its help:\n%s", strings.Join(g, " "), code, out.String())
		}
	}
	var out bytes.Buffer
	run(context.Background(), []string{"jobs", "shw"}, &out, &out)
	if !regexp.MustCompile(`(?m)^Did you mean this\?\n\s+show$`).MatchString(out.String()) {
		t.Errorf("sluice jobs shw does not suggest show:\n%s", out.String())
	}
}
