package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// listCounting is a SQLite store that counts its reads of the limits.
type listCounting struct {
	*sqlite.Store
	lists atomic.Int64
}

func (s *listCounting) LimitList(ctx context.Context) ([]sluicetype.Limit, error) {
	s.lists.Add(1)
	return s.Store.LimitList(ctx)
}

// TestListJobsNamesHolds: a listed available job held back by a full
// limit of its kind or its queue names it with its usage, as its sheet
// does; a job under a limit with room, or with none, names nothing, nor
// does a running one. The limits are read once for a page, whatever its
// rows, and not at all for a page with no available row.
func TestListJobsNamesHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &listCounting{Store: sqlitetest.New(t)}
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	var ins []*backend.JobInsertParams
	for _, j := range []struct{ id, queue, kind string }{
		{"charge-1", "billing", "charge"}, {"charge-2", "billing", "charge"}, {"charge-3", "billing", "charge"},
		{"refund-1", "billing", "refund"}, {"send-1", "mail", "send"}, {"send-2", "mail", "send"}, {"free-1", "misc", "free"},
	} {
		ins = append(ins, &backend.JobInsertParams{ID: j.id, Queue: j.queue, Kind: j.kind, SchemaVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ queue, kind, lease string }{{"billing", "charge", "L1"}, {"mail", "send", "L2"}} {
		res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: c.queue, WorkerID: "w", LeaseID: c.lease, Limit: 1,
			Kinds: map[string]int{c.kind: 1}, LeaseDuration: time.Hour})
		if err != nil || len(res.Jobs) != 1 {
			t.Fatalf("claim %s: %v %+v", c.kind, err, res)
		}
	}
	for _, l := range []engine.Limit{
		{Scope: engine.LimitKind, Name: "charge", Concurrency: 1},
		{Scope: engine.LimitQueue, Name: "mail", Concurrency: 1},
		{Scope: engine.LimitKind, Name: "refund", Concurrency: 5},
	} {
		if err := e.SetLimit(ctx, l); err != nil {
			t.Fatal(err)
		}
	}

	before := s.lists.Load()
	page, err := e.ListJobs(ctx, engine.ListJobsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.lists.Load() - before; n != 1 {
		t.Errorf("a page of %d jobs read the limits %d times, want once", len(page.Jobs), n)
	}
	want := map[string]string{
		"charge-2": "limit kind charge 1/1", "charge-3": "limit kind charge 1/1",
		"send-2": "limit queue mail 1/1", "refund-1": "", "free-1": "",
		"charge-1": "", "send-1": "", // running: nothing holds them
	}
	if len(page.Jobs) != len(want) {
		t.Fatalf("listed %d jobs, want %d", len(page.Jobs), len(want))
	}
	for _, j := range page.Jobs {
		if j.HeldBy != want[j.ID] {
			t.Errorf("%s (%s) held by %q, want %q", j.ID, j.State, j.HeldBy, want[j.ID])
		}
	}
	// The sheet says the same.
	d, err := e.GetJob(ctx, "charge-2", false)
	if err != nil || d.HeldBy != want["charge-2"] {
		t.Errorf("charge-2's detail: held by %q (%v), want %q", d.HeldBy, err, want["charge-2"])
	}

	before = s.lists.Load()
	running, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateRunning}}})
	if err != nil || len(running.Jobs) != 2 {
		t.Fatalf("running: %v %v", running, err)
	}
	if n := s.lists.Load() - before; n != 0 {
		t.Errorf("a page of running jobs read the limits %d times, want none", n)
	}
}
