package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// workflowDeadStore returns a SQLite file holding W-1, a 5-step workflow
// job that died at step 4.
func workflowDeadStore(t *testing.T) string {
	t.Helper()
	path := sqlitetest.Path(t)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{
		Queues:       map[string]engine.QueueConfig{"wf": {Concurrency: 1}},
		PollInterval: 10 * time.Millisecond, NoMaintenance: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "flow", MaxAttempts: 1, Handler: func(ctx context.Context, j *engine.Job) error {
		for n := 1; n <= 5; n++ {
			if _, err := engine.Step(ctx, fmt.Sprintf("step%d", n), func(context.Context) (int, error) {
				if n == 4 {
					return 0, errors.New("step 4 broke")
				}
				return n, nil
			}); err != nil {
				return err
			}
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Enqueue(context.Background(), engine.EnqueueParams{ID: "W-1", Queue: "wf", Kind: "flow"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: "W-1"})
		if err != nil {
			t.Fatal(err)
		}
		if j.State == engine.StateArchived {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("W-1 is %s, not archived", j.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestJobsReplayCommand(t *testing.T) {
	store := "sqlite://" + workflowDeadStore(t)
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", store)
	t.Setenv("SLUICE_ACTOR", "maya")

	code, out, stderr := runCLI(t, "", "jobs", "replay", "W-1", "--step", "3", "--dry-run")
	want := "keep   1 step1 (completed)\nkeep   2 step2 (completed)\nrerun  3 step3 (was completed)\nrerun  4 step4 (was failed)\n"
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("replay --dry-run: exit %d\n%s\nwant prefix\n%s%s", code, out, want, stderr)
	}
	if code, out, stderr = runCLI(t, "", "jobs", "replay", "W-1", "--step", "3", "--id", "W-1b"); code != 0 || !strings.Contains(out, "replaying W-1 from step 3 as W-1b: now available") {
		t.Fatalf("replay: exit %d %s %s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", "jobs", "replay", "W-1", "--step", "9"); code != 1 || !strings.Contains(stderr, "replay from step 1 to 5") {
		t.Fatalf("replay from a step past the end: exit %d %s %s", code, out, stderr)
	}
	s, err := sqlite.Open(context.Background(), strings.TrimPrefix(store, "sqlite://"), sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: "W-1b"})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := engine.ParseCheckpoint(j.Checkpoint)
	if err != nil || cp.ForkedFrom == nil || cp.ForkedFrom.JobID != "W-1" || len(cp.Steps) != 2 {
		t.Fatalf("W-1b checkpoint %+v (%v)", cp, err)
	}
}
