package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestLeaseLostLoggedOnlyWhenTrue: a renewal that finds a held job's lease
// gone says "lease lost; cancelling the handler" at WARN, and cancels the
// handler, only when the handler still runs; for a job whose handler had
// returned and whose outcome was written it cancels nothing and says so
// only at DEBUG.
func TestLeaseLostLoggedOnlyWhenTrue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqlitetest.New(t)
	var logs syncBuffer
	e, err := engine.New(s, engine.Config{
		Queues: map[string]engine.QueueConfig{"q": {Concurrency: 2}},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ins []*backend.JobInsertParams
	for _, id := range []string{"finished", "running"} {
		ins = append(ins, &backend.JobInsertParams{ID: id, Queue: "q", Kind: "k", SchemaVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
		t.Fatal(err)
	}
	res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "L1", Limit: 2,
		Kinds: map[string]int{"k": 1}, LeaseDuration: time.Minute})
	if err != nil || len(res.Jobs) != 2 {
		t.Fatalf("claim: %v %+v", err, res)
	}
	// Both leases go: each job completes (one by this worker's own
	// outcome, the other as another worker that took it over would).
	items := make([]backend.JobCompleteItem, len(res.Jobs))
	held := map[string]context.Context{}
	for i, j := range res.Jobs {
		items[i] = backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Lease.Fence}}
		held[j.ID] = e.HoldForTest(j, j.ID == "finished")
	}
	if errs, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("complete: %v %v", err, errs)
	}

	e.RenewLeasesForTest(ctx)

	var lost []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "lease lost; cancelling the handler") {
			lost = append(lost, line)
		}
	}
	if len(lost) != 1 || !strings.Contains(lost[0], "job=running") || !strings.Contains(lost[0], "level=WARN") {
		t.Fatalf("lease-lost lines:\n%s\nall logs:\n%s", strings.Join(lost, "\n"), logs.String())
	}
	if held["running"].Err() == nil {
		t.Fatal("the running handler was not cancelled")
	}
	if held["finished"].Err() != nil {
		t.Fatal("the finished job's handler context was cancelled")
	}
	if !strings.Contains(logs.String(), `level=DEBUG msg="lease renewal found the job finished" job=finished`) {
		t.Fatalf("no debug line for the finished job:\n%s", logs.String())
	}
}
