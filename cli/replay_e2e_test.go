package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
	j, err := store.JobGetByID(context.Background(), &engine.JobGetByIDParams{ID: m[1]})
	if err != nil {
		t.Fatalf("the replay %s: %v", m[1], err)
	}
	cp, err := engine.ParseCheckpoint(j.Checkpoint)
	if err != nil || cp.ForkedFrom == nil || cp.ForkedFrom.JobID != "W-1" || cp.ForkedFrom.Step != 3 || len(cp.Steps) != 2 {
		t.Fatalf("the replay's checkpoint %+v (%v)", cp, err)
	}
	orig, err := store.JobGetByID(context.Background(), &engine.JobGetByIDParams{ID: "W-1"})
	if err != nil {
		t.Fatal(err)
	}
	ocp, err := engine.ParseCheckpoint(orig.Checkpoint)
	if err != nil || orig.State != engine.StateArchived || len(ocp.Forks) != 1 || ocp.Forks[0].JobID != m[1] {
		t.Fatalf("the original after the replay: %s, %+v (%v)", orig.State, ocp, err)
	}
}
