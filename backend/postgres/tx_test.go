package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestEnqueueTx: a job enqueued in the caller's transaction exists if and
// only if that transaction commits, with the counters and the caller's
// own write alike.
func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	e, err := engine.New(s, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	orders := pgx.Identifier{s.Schema(), "orders"}.Sanitize()
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	place := func(id string, commit bool) {
		t.Helper()
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO `+orders+` (id) VALUES ($1)`, id); err != nil {
			t.Fatal(err)
		}
		res, err := postgres.EnqueueTx(ctx, e, tx, sluicetype.EnqueueParams{ID: "job-" + id, Queue: "mail", Kind: "receipt", Args: map[string]string{"order": id}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		// Inside the transaction the job is there; outside, not yet.
		var inside int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{s.Schema(), "jobs"}.Sanitize()+` WHERE id = $1`, "job-"+id).Scan(&inside); err != nil || inside != 1 {
			t.Fatalf("inside the transaction: %d %v", inside, err)
		}
		if _, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "job-" + id}); !errors.Is(err, sluicetype.ErrNotFound) {
			t.Fatalf("before commit, outside: %v", err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	place("rolled-back", false)
	place("committed", true)

	if _, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "job-rolled-back"}); !errors.Is(err, sluicetype.ErrNotFound) {
		t.Fatalf("rolled back: %v", err)
	}
	j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "job-committed"})
	if err != nil || j.State != sluicetype.StateAvailable || j.Queue != "mail" {
		t.Fatalf("committed: %+v %v", j, err)
	}
	n, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{})
	if err != nil || n != 1 {
		t.Fatalf("jobs: %d %v", n, err)
	}
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil || len(counts) != 1 || counts["mail"][sluicetype.StateAvailable] != 1 {
		t.Fatalf("counters: %v %v", counts, err)
	}
	if want := pgtest.NewTruth(t, s).JobCounts(t); want["mail"][sluicetype.StateAvailable] != 1 || len(want) != 1 {
		t.Fatalf("truth: %v", want)
	}
}
