package redis_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestBoundedScan: a namespace holds more jobs than the scan budget.
// A filter no index serves (a payload path) is listed page by page, each
// page saying it was bounded and how far it got, its cursor scanning on,
// until every match is found; the count says it is a lower bound; the
// answer crosses the API; and a bulk cancel by that filter walks the
// whole set in bounded batches.
func TestBoundedScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const budget, n = 100, 350
	s, err := redis.Open(ctx, redistest.URL(t), redis.Options{Migrate: true, ScanBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e, err := engine.New(s, engine.Config{MaintenanceInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var ps []sluicetype.EnqueueParams
	var want []string
	for i := range n {
		tag := "plain"
		if i%50 == 0 {
			tag = "x"
			want = append(want, fmt.Sprintf("j%03d", i))
		}
		ps = append(ps, sluicetype.EnqueueParams{ID: fmt.Sprintf("j%03d", i), Queue: "q", Kind: "k",
			Payload: []byte(`{"tag":"` + tag + `"}`), Delay: time.Hour})
	}
	if _, err := e.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	f := sluicetype.Filter{States: []sluicetype.State{sluicetype.StateScheduled}, Payload: []sluicetype.PathMatch{{Path: "tag", Value: "x"}}}

	srv := httptest.NewServer(api.NewServer(e, api.ServerOptions{Heartbeat: time.Second}))
	t.Cleanup(srv.Close)
	for name, ctl := range map[string]engine.Control{"engine": e, "api": api.NewClient(srv.URL, "", api.ClientOptions{})} {
		var got []string
		bounded, cursor := 0, ""
		for range 100 {
			page, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: f, Cursor: cursor, Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			if sc := page.Scan; sc != nil {
				bounded++
				if !sc.Bounded || sc.Scanned != budget || sc.Total != n {
					t.Fatalf("%s: scan %+v, want %d of %d", name, sc, budget, n)
				}
				if page.Next == "" {
					t.Fatalf("%s: a bounded page without a cursor to scan on", name)
				}
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || bounded < n/budget {
			t.Fatalf("%s: %d bounded pages found %v, want %v", name, bounded, got, want)
		}
	}

	c, err := e.CountJobs(ctx, engine.CountJobsParams{Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	sc := c.Scans[sluicetype.StateScheduled]
	if sc == nil || !sc.Bounded || sc.Scanned != budget || sc.Total != n || !c.IsCapped(sluicetype.StateScheduled) || c.States[sluicetype.StateScheduled] > int64(len(want)) {
		t.Fatalf("count %+v, scan %+v", c, sc)
	}
	// Counted whole (the console's idle recount), here and over the API,
	// the count reads past the budget to every match.
	for name, ctl := range map[string]engine.Control{"engine": e, "api": api.NewClient(srv.URL, "", api.ClientOptions{})} {
		w, err := ctl.CountJobs(ctx, engine.CountJobsParams{Filter: f, Max: sluicetype.MaxCountJobsMax, Whole: true})
		if err != nil {
			t.Fatal(err)
		}
		if w.States[sluicetype.StateScheduled] != int64(len(want)) || w.IsCapped(sluicetype.StateScheduled) || len(w.Scans) != 0 {
			t.Fatalf("%s: whole count %+v, want %d uncapped", name, w, len(want))
		}
	}

	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(ctx) })
	dry, err := e.Bulk(ctx, sluicetype.BulkParams{Action: sluicetype.ActionCancel, Selector: f, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Bulk(ctx, sluicetype.BulkParams{Action: sluicetype.ActionCancel, Plan: dry.Plan})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		op, err := e.Operation(ctx, res.Operation.ID)
		if err != nil {
			t.Fatal(err)
		}
		if op.Status == sluicetype.OperationCompleted {
			if op.Succeeded != int64(len(want)) {
				t.Fatalf("bulk cancel succeeded on %d, want %d", op.Succeeded, len(want))
			}
			break
		}
		if op.Status == sluicetype.OperationFailed || time.Now().After(deadline) {
			t.Fatalf("operation %+v", op)
		}
		time.Sleep(20 * time.Millisecond)
	}
	page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateCancelled}}, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var cancelled []string
	for _, j := range page.Jobs {
		cancelled = append(cancelled, j.ID)
	}
	slices.Sort(cancelled)
	if !slices.Equal(cancelled, want) {
		t.Fatalf("cancelled %v, want %v", cancelled, want)
	}
}

// TestUniqueFilterReadsItsKeySet: a unique: filter reads the key's set
// of jobs (ukj:KEY), not a state's index: past the scan budget of
// scheduled jobs it still lists and counts its jobs whole, with no
// bounded scan to report.
func TestUniqueFilterReadsItsKeySet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const budget, n = 100, 350
	s, err := redis.Open(ctx, redistest.URL(t), redis.Options{Migrate: true, ScanBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e, err := engine.New(s, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var ps []sluicetype.EnqueueParams
	for i := range n {
		p := sluicetype.EnqueueParams{ID: fmt.Sprintf("j%03d", i), Queue: "q", Kind: "k",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Delay: time.Hour}
		if i == 0 {
			// The oldest: a walk newest first reaches it last.
			p.Unique = &sluicetype.UniqueOpts{ByPayload: true}
		}
		ps = append(ps, p)
	}
	res, err := e.EnqueueMany(ctx, ps)
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	key := res[0].Job.UniqueKey
	// A cancelled job of the same key, which no longer holds it, is listed
	// too.
	if _, err := e.Cancel(ctx, "j000"); err != nil {
		t.Fatal(err)
	}
	again, err := e.Enqueue(ctx, sluicetype.EnqueueParams{ID: "again", Queue: "q", Kind: "k", Payload: []byte(`{"n":0}`),
		Unique: &sluicetype.UniqueOpts{ByPayload: true}, Delay: 2 * time.Hour})
	if err != nil || again.ID != "again" {
		t.Fatal(err, again)
	}
	f := sluicetype.Filter{UniqueKey: key}
	page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: f, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range page.Jobs {
		got = append(got, j.ID)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"again", "j000"}) || page.Scan != nil || page.Next != "" {
		t.Fatalf("unique:%s listed %v (scan %+v, next %q), want again and j000 whole", key, got, page.Scan, page.Next)
	}
	f.States = []sluicetype.State{sluicetype.StateScheduled}
	c, err := e.CountJobs(ctx, engine.CountJobsParams{Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	if c.States[sluicetype.StateScheduled] != 1 || len(c.Scans) != 0 || c.IsCapped(sluicetype.StateScheduled) {
		t.Fatalf("count of unique:%s state:scheduled %+v, scans %+v; want 1, whole", key, c, c.Scans)
	}
}
