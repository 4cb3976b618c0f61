package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
)

// killBilling opens the SQLite file beside whatever else has it open and
// makes the named new billing jobs die (one failed attempt each).
func killBilling(t *testing.T, path string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{Queues: map[string]engine.QueueConfig{"billing": {Concurrency: 2}},
		PollInterval: 10 * time.Millisecond, NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "charge", MaxAttempts: 1,
		Handler: func(context.Context, *engine.Job) error { return errors.New("card declined") }}); err != nil {
		t.Fatal(err)
	}
	died := make(chan string, len(ids))
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) { died <- ev.Job.ID })
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "billing", Kind: "charge"}); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(30 * time.Second)
	for range ids {
		select {
		case id := <-died:
			if !slices.Contains(ids, id) {
				t.Fatalf("%s died, not one of %v", id, ids)
			}
		case <-timeout:
			t.Fatal("the late jobs did not die")
		}
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// stillArchived lists the archived billing jobs' ids, as jobs list prints them.
func stillArchived(t *testing.T, store string) string {
	t.Helper()
	code, out, stderr := runCLI(t, "", "jobs", "list", "--store", store, "-q", "state:archived queue:billing")
	if code != 0 {
		t.Fatalf("jobs list: exit %d %s", code, stderr)
	}
	return out
}

// afterRead is a terminal whose operator answers only once something has
// happened between the preview and the answer.
type afterRead struct {
	before func()
	r      io.Reader
}

func (a *afterRead) Read(p []byte) (int, error) {
	if a.before != nil {
		a.before()
		a.before = nil
	}
	return a.r.Read(p)
}

// TestBulkRunIsItsPreview: sluice bulk's dry run prints the plan and the
// command that runs it (--cutoff); an interactive preview then run uses
// the preview's plan, and its question says so: jobs that die while the
// operator reads it are left alone.
func TestBulkRunIsItsPreview(t *testing.T) {
	path := deadStore(t, 4, 0)
	store := "sqlite://" + path
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "")

	code, out, stderr := runCLI(t, "", "bulk", "retry", "--store", store, "--state", "archived", "--queue", "billing", "--dry-run")
	m := regexp.MustCompile(`run exactly this: sluice bulk retry -q 'state:archived queue:billing' --cutoff (\S+)`).FindStringSubmatch(out)
	if code != 0 || !strings.Contains(out, "would retry 4 job(s)") || !strings.Contains(out, "plan: retry state:archived queue:billing, jobs in that state by ") || m == nil {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, stderr)
	}
	killBilling(t, path, "LATE-1")
	code, out, stderr = runCLI(t, "", "bulk", "retry", "--store", store, "-q", "state:archived queue:billing", "--cutoff", m[1], "--yes")
	if code != 0 || !strings.Contains(out, "4 of 4 processed, 4 succeeded") || !strings.Contains(out, "cutoff") {
		t.Fatalf("run of the plan: exit %d\n%s%s", code, out, stderr)
	}
	if left := stillArchived(t, store); !strings.Contains(left, "LATE-1") || strings.Contains(left, "B-0") {
		t.Fatalf("after the plan's run, archived:\n%s", left)
	}

	// The retried jobs would die again under the next workers: cancel
	// them. Then, interactively, LATE-2 dies while the question is on
	// the screen.
	if code, out, stderr = runCLI(t, "", "jobs", "cancel", "--store", store, "B-00", "B-01", "B-02", "B-03"); code != 0 {
		t.Fatalf("jobs cancel: exit %d\n%s%s", code, out, stderr)
	}
	var outb, errb bytes.Buffer
	root := newRoot()
	root.SetIn(&afterRead{before: func() { killBilling(t, path, "LATE-2") }, r: strings.NewReader("y\n")})
	code = cmdline.Run(context.Background(), root, "sluice", []string{"bulk", "retry", "--store", store, "--state", "archived", "--queue", "billing"}, &outb, &errb)
	question := "retry 1 job(s) matching state:archived queue:billing (only those in that state by the preview, "
	if code != 0 || !strings.Contains(errb.String(), question) || !strings.Contains(errb.String(), "none that enter it later)? [y/N]") ||
		!strings.Contains(outb.String(), "1 of 1 processed, 1 succeeded") {
		t.Fatalf("interactive run: exit %d\n%s%s", code, outb.String(), errb.String())
	}
	if left := stillArchived(t, store); !strings.Contains(left, "LATE-2") || strings.Contains(left, "LATE-1") {
		t.Fatalf("after the interactive run, archived:\n%s", left)
	}
}

// shellWords splits a printed command line into its words: single quotes
// group, as shellQuote writes them.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, started := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			in, started = !in, true
		case c == ' ' && !in:
			if started {
				words = append(words, w.String())
				w.Reset()
				started = false
			}
		default:
			w.WriteByte(c)
			started = true
		}
	}
	if in {
		t.Fatalf("unterminated quote in %q", line)
	}
	if started {
		words = append(words, w.String())
	}
	return words
}

// TestBulkRunCommandKeepsItsShape pastes the command a dry run printed and
// checks that the operation it starts runs at the rate the dry run was
// given.
func TestBulkRunCommandKeepsItsShape(t *testing.T) {
	path := deadStore(t, 3, 0)
	store := "sqlite://" + path
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "")

	code, out, stderr := runCLI(t, "", "bulk", "retry", "--store", store, "--state", "archived", "--queue", "billing", "--rate", "7", "--dry-run")
	m := regexp.MustCompile(`(?m)^run exactly this: (.*)$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(m[1], " --rate 7") {
		t.Fatalf("the printed command drops --rate: %s", m[1])
	}
	words := shellWords(t, m[1])
	if words[0] != "sluice" {
		t.Fatalf("printed command %q", m[1])
	}
	code, out, stderr = runCLI(t, "", append(words[1:], "--yes", "-o", "json")...)
	var op engine.Operation
	if code != 0 || json.Unmarshal([]byte(out), &op) != nil {
		t.Fatalf("pasted command: exit %d\n%s%s", code, out, stderr)
	}
	if op.Rate != 7 || op.Matched != 3 || op.Cutoff == nil {
		t.Fatalf("pasted command ran at %d/s over %d jobs (cutoff %v), want 7/s over 3 with the plan's cutoff", op.Rate, op.Matched, op.Cutoff)
	}
}

var atSix = time.Date(2026, 12, 8, 6, 0, 0, 0, time.UTC)

func TestBulkRunShapeFlags(t *testing.T) {
	for _, tt := range []struct {
		shape bulkRunShape
		want  string
	}{
		{bulkRunShape{}, ""},
		{bulkRunShape{rate: 10}, " --rate 10"},
		{bulkRunShape{wait: true}, " --wait"},
		{bulkRunShape{rate: 3, wait: true}, " --rate 3 --wait"},
		{bulkRunShape{at: &atSix}, " --at 2026-12-08T06:00:00Z"},
		{bulkRunShape{canary: &engine.CanaryParams{Size: 50}}, " --canary 50"},
		{bulkRunShape{canary: &engine.CanaryParams{Size: 50, MinSuccess: 0.9, HaltFailureRate: 0.2, Window: 40, Timeout: 5 * time.Minute}},
			" --canary 50 --canary-min-success 0.9 --halt-failure-rate 0.2 --canary-window 40 --canary-timeout 5m0s"},
	} {
		if got := tt.shape.flags(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.shape, got, tt.want)
		}
	}
}

// TestBulkDeleteYesSaysTheCount: a bulk delete runs only from a dry run's
// plan; the command dry-runs itself, and with --yes prints the count it
// then deletes — a catch-all selector included.
func TestBulkDeleteYesSaysTheCount(t *testing.T) {
	path := deadStore(t, 3, 2)
	store := "sqlite://" + path
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "")
	code, out, stderr := runCLI(t, "", "bulk", "delete", "--store", store, "-q", "created>1970-01-01", "--yes")
	if code != 0 || !strings.Contains(stderr, "delete 5 job(s) matching created>1970-01-01") || !strings.Contains(out, "5 of 5 processed, 5 succeeded") {
		t.Fatalf("bulk delete --yes: exit %d\n%s\n%s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", "jobs", "list", "--store", store, "-o", "json"); code != 0 || strings.Contains(out, `"id"`) {
		t.Fatalf("jobs left after the delete: exit %d %s %s", code, out, stderr)
	}
}

// TestBulkAt: --at schedules the run. It waits, listed as scheduled with
// its start, takes no job meanwhile, and is cancelled by operations
// cancel; a start in the past or unreadable is refused before anything
// is stored.
func TestBulkAt(t *testing.T) {
	path := deadStore(t, 3, 0)
	store := "sqlite://" + path
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "")

	at := time.Now().Add(2 * time.Hour).Format("15:04")
	code, out, stderr := runCLI(t, "", "bulk", "retry", "--store", store, "-q", "state:archived queue:billing", "--at", at, "--dry-run")
	if code != 0 || !regexp.MustCompile(`run exactly this: .* --at \d{4}-\d\d-\d\dT\d\d:\d\d:00Z`).MatchString(out) {
		t.Fatalf("dry run with --at: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "bulk", "retry", "--store", store, "-q", "state:archived queue:billing", "--at", at, "--yes", "-o", "json")
	var op engine.Operation
	if code != 0 || json.Unmarshal([]byte(out), &op) != nil {
		t.Fatalf("bulk --at: exit %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(stderr, ", starting at "+at+" (in 1h5") && !strings.Contains(stderr, ", starting at "+at+" (in 2h") {
		t.Fatalf("the confirmation does not say when it starts:\n%s", stderr)
	}
	if op.Status != engine.OperationPending || op.StartAt == nil || op.StartAt.Local().Format("15:04") != at || op.Processed != 0 ||
		!strings.Contains(stderr, "is scheduled for "+at) || !strings.Contains(stderr, "sluice operations cancel "+op.ID) {
		t.Fatalf("scheduled operation %+v\n%s", op, stderr)
	}
	if left := stillArchived(t, store); !strings.Contains(left, "B-00") {
		t.Fatalf("a scheduled run took jobs before its time:\n%s", left)
	}
	code, out, stderr = runCLI(t, "", "operations", "list", "--store", store)
	if code != 0 || !regexp.MustCompile(op.ID+`\s+retry\s+scheduled\s+0/3 .* `+at+` \(in \dh\d\dm\)`).MatchString(out) {
		t.Fatalf("operations list: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "operations", "show", "--store", store, op.ID)
	if code != 0 || !strings.Contains(out, "start") || !strings.Contains(out, "scheduled for "+at) {
		t.Fatalf("operations show: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", "operations", "cancel", "--store", store, op.ID); code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("operations cancel: exit %d\n%s%s", code, out, stderr)
	}

	for _, tt := range []struct{ at, want string }{
		{"2020-01-01T00:00:00Z", "is in the past"},
		{time.Now().Add(8 * 24 * time.Hour).UTC().Format(time.RFC3339), "more than 7 days ahead"},
		{"6 am", "want HH:MM"},
	} {
		code, out, stderr := runCLI(t, "", "bulk", "retry", "--store", store, "-q", "state:archived queue:billing", "--at", tt.at, "--yes")
		if code == 0 || !strings.Contains(stderr, tt.want) {
			t.Errorf("--at %s: exit %d, want %q\n%s%s", tt.at, code, tt.want, out, stderr)
		}
	}
	if code, out, _ := runCLI(t, "", "operations", "list", "--store", store, "-o", "json"); code != 0 || strings.Count(out, `"id"`) != 1 {
		t.Fatalf("a refused --at stored an operation:\n%s", out)
	}
}
