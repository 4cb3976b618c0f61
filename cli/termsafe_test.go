package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// hostile is an error text that would clear the screen, write the
// clipboard (OSC 52), start a C1 control sequence, reverse the text that
// follows it, overwrite its line's start (CR) and hide a character
// (zero-width space), if it reached the terminal as it is.
const hostile = "INV\x1b[2J\x1b]52;c;aGk=\x07\u009b31m\x7f\u202eZ\rok\u200b"

// TestCommandsShowJobTextEscaped: the commands that print job data (a
// job's error in lists, the sheet, a bulk preview's sample, a selector)
// write no raw control character, in table and in JSON output, and the
// error naming an id that holds one shows it escaped. Found by an audit:
// only the archive commands escaped.
func TestCommandsShowJobTextEscaped(t *testing.T) {
	path := sqlitetest.Path(t)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(s, engine.Config{
		Queues:       map[string]engine.QueueConfig{"billing": {Concurrency: 1}},
		PollInterval: 10 * time.Millisecond, NoMaintenance: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "charge", Handler: func(context.Context, *engine.Job) error {
		return errors.New("invoice " + hostile)
	}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "H-1", Queue: "billing", Kind: "charge", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "H-1"})
		if err == nil && j.State == engine.StateArchived {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("H-1 never died: %v %v", j, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "sqlite://"+path)
	t.Setenv("SLUICE_ACTOR", "maya")

	raw := func(out string) bool { return strings.ContainsAny(out, "\x1b\x07\x7f\u009b\u202e\r\u200b") }
	for _, args := range [][]string{
		{"jobs", "list", "--state", "archived"},
		{"jobs", "list", "--state", "archived", "-o", "json"},
		{"jobs", "show", "H-1"},
		{"jobs", "show", "H-1", "-o", "json"},
		{"bulk", "retry", "-q", `state:archived error:"` + hostile + `"`, "--dry-run"},
		{"bulk", "retry", "-q", "state:archived", "--dry-run"},
	} {
		code, out, stderr := runCLI(t, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s %s", args, code, out, stderr)
		}
		if raw(out) || raw(stderr) {
			t.Fatalf("%v: raw control characters in the output:\n%q\n%q", args, out, stderr)
		}
		if !strings.Contains(out, `\u001b[2J`) && !strings.Contains(out, `\u001b`) {
			t.Fatalf("%v: the error is not shown escaped:\n%s", args, out)
		}
	}
	// The line to paste names the store it previewed, not the environment's.
	code, out, stderr := runCLI(t, "", "bulk", "retry", "-q", "state:archived", "--dry-run", "--store", "sqlite://"+path)
	if code != 0 || !strings.Contains(out, "--cutoff ") || !strings.Contains(out, " --store 'sqlite://"+path+"'\n") {
		t.Fatalf("dry run's command line: exit %d %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "jobs", "show", "H-\x1b[2J\r\nsluice: fake\u200b")
	if code != 1 || raw(stderr) || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, `\x1b[2J`) || !strings.Contains(stderr, "not found") {
		t.Fatalf("show of an id with an escape: exit %d %q %q", code, out, stderr)
	}
}
