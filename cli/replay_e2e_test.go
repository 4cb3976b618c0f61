package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// TestConsoleReplayFromStep: the real binary's console on a store holding
// a 5-step workflow dead at step 4: :replay 3 previews the steps kept and
// run again, y creates the replay, and the store holds it, linked back.
func TestConsoleReplayFromStep(t *testing.T) {
	bin := e2eBinary(t)
	db := strings.TrimPrefix(workflowDeadStore(t), "sqlite://")
	c := startConsole(t, "replay", db, fmt.Sprintf("%s tui --store sqlite://%s", bin, db))
	c.waitFor(`(?m)^› W-1`, 30*time.Second)
	c.send("Enter")
	c.waitFor(`steps \(4\)`, 15*time.Second)
	c.send(":")
	c.typeText("replay 3")
	c.send("Enter")
	c.waitFor(`Replay W-1 from step 3 as a new job\?`, 15*time.Second)
	screen := c.screen()
	for _, want := range []string{"keep   1 step1", "keep   2 step2", "run    3 step3 · was completed", "run    4 step4 · was failed"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("the preview does not show %q:\n%s", want, screen)
		}
	}
	c.send("y")
	m := c.waitFor(`replaying W-1 from step 3 as (W-1~replay~[0-9a-f]{8})`, 15*time.Second)
	c.quit()

	store, err := sqlite.Open(context.Background(), db, sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	j, err := store.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: m[1]})
	if err != nil {
		t.Fatalf("the replay %s: %v", m[1], err)
	}
	cp, err := engine.ParseCheckpoint(j.Checkpoint)
	if err != nil || cp.ForkedFrom == nil || cp.ForkedFrom.JobID != "W-1" || cp.ForkedFrom.Step != 3 || len(cp.Steps) != 2 {
		t.Fatalf("the replay's checkpoint %+v (%v)", cp, err)
	}
	orig, err := store.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: "W-1"})
	if err != nil {
		t.Fatal(err)
	}
	ocp, err := engine.ParseCheckpoint(orig.Checkpoint)
	if err != nil || orig.State != engine.StateArchived || len(ocp.Forks) != 1 || ocp.Forks[0].JobID != m[1] {
		t.Fatalf("the original after the replay: %s, %+v (%v)", orig.State, ocp, err)
	}
}

// TestConsoleReplayFromStepWithResult: in the replay preview e opens step
// N−1's result in $EDITOR (a script here that writes the replacement);
// the preview shows it before y, and the new job's step N−1 checkpoint
// holds it, as the store has it.
func TestConsoleReplayFromStepWithResult(t *testing.T) {
	bin := e2eBinary(t)
	db := strings.TrimPrefix(workflowDeadStore(t), "sqlite://")
	editor := filepath.Join(t.TempDir(), "edit-result")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nprintf '%s\\n' '{\"fixed\": 1, \"note\": \"by hand\"}' > \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startConsole(t, "replay-result", db, fmt.Sprintf("VISUAL= EDITOR=%s %s tui --store sqlite://%s", editor, bin, db))
	c.waitFor(`(?m)^› W-1`, 30*time.Second)
	c.send("Enter")
	c.waitFor(`steps \(4\)`, 15*time.Second)
	c.send(":")
	c.typeText("replay 3")
	c.send("Enter")
	c.waitFor(`e replace step 2's result`, 15*time.Second)
	c.send("e")
	c.waitFor(`2 step2 · result replaced:`, 15*time.Second)
	screen := c.screen()
	for _, want := range []string{`"fixed": 1`, `"note": "by hand"`, "run    3 step3 · was completed"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("the preview does not show %q:\n%s", want, screen)
		}
	}
	c.send("y")
	m := c.waitFor(`replaying W-1 from step 3 as (W-1~replay~[0-9a-f]{8})`, 15*time.Second)
	c.quit()

	store, err := sqlite.Open(context.Background(), db, sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	j, err := store.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: m[1]})
	if err != nil {
		t.Fatalf("the replay %s: %v", m[1], err)
	}
	cp, err := engine.ParseCheckpoint(j.Checkpoint)
	if err != nil || len(cp.Steps) != 2 {
		t.Fatalf("the replay's checkpoint %+v (%v)", cp, err)
	}
	var got struct {
		Fixed int    `json:"fixed"`
		Note  string `json:"note"`
	}
	if err := json.Unmarshal(cp.Steps[1].Result, &got); err != nil || got.Fixed != 1 || got.Note != "by hand" {
		t.Fatalf("step 2's result in the replay: %s (%v), want the replacement", cp.Steps[1].Result, err)
	}
	orig, err := store.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: "W-1"})
	if err != nil {
		t.Fatal(err)
	}
	ocp, err := engine.ParseCheckpoint(orig.Checkpoint)
	if err != nil || string(ocp.Steps[1].Result) == string(cp.Steps[1].Result) {
		t.Fatalf("the original's step 2 changed: %s (%v)", ocp.Steps[1].Result, err)
	}
}
