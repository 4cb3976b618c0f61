package backendtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Bulk operations over selectors that test plain columns only (states,
// queues, an error pattern), sparse and dense in id order, with every
// action, and counts that leave superseded jobs out. (On SQLite these are
// the batches taken by id range.)

func startOperation(t *testing.T, s backend.Store, id string, a engine.Action, sel engine.Filter) *engine.Operation {
	t.Helper()
	ctx := context.Background()
	time.Sleep(time.Millisecond) // the jobs entered their state before the operation
	op, err := s.OperationInsert(ctx, &backend.OperationInsertParams{ID: id, Action: a, Selector: sel, CreatedBy: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// eventsOf returns the kinds and from-states of a job's stored events of
// kind k.
func eventsOf(t *testing.T, s backend.Store, id string, k engine.EventKind) []engine.Event {
	t.Helper()
	evs := events(t, s, id)
	var out []engine.Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func testCStoreBulkSparseEveryAction(t *testing.T, h Harness) {
	s := h.NewStore(t)
	db := h.truth(t, s)
	// 60 jobs; every fifth is in queue rare, the rest in common, so a
	// rare selector is sparse in id order.
	var js []*backend.JobInsertParams
	var rare, common []string
	for i := range 60 {
		q := "common"
		if i%5 == 0 {
			q = "rare"
		}
		id := fmt.Sprintf("j%03d", i)
		js = append(js, djob(id, q, "k"))
		if q == "rare" {
			rare = append(rare, id)
		} else {
			common = append(common, id)
		}
	}
	insertRes(t, s, js...)
	kill(t, s, "rare", len(rare), engine.StateArchived, func(i int) string { return fmt.Sprintf("timeout after %ds", i) })
	// common: 36 archived, the other 12 cancelled while available.
	dead := kill(t, s, "common", 36, engine.StateArchived, func(int) string { return "boom" })
	wasArchived := map[string]bool{}
	for _, j := range dead {
		wasArchived[j.ID] = true
	}
	for _, id := range common {
		if !wasArchived[id] {
			if _, err := cancelJob(t, s, actionParams{ID: id, Actor: "ops"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkCounts(t, s, db, "setup")

	// Two states at once, batches of 5 (windows of 50 ids).
	op := startOperation(t, s, "op-common", engine.ActionRetry, engine.Filter{
		States: []engine.State{engine.StateArchived, engine.StateCancelled}, Queues: []string{"common"}})
	done := runOperation(t, s, op.ID, 5)
	if done.Status != engine.OperationCompleted || done.Succeeded != 48 || done.Processed != 48 || done.Failed != 0 {
		t.Fatalf("retry common: %+v", done)
	}
	checkCounts(t, s, db, "retry common")
	for _, id := range common {
		if j := getJob(t, s, id); j.State != engine.StateAvailable {
			t.Fatalf("%s: %s", id, j.State)
		}
		evs := eventsOf(t, s, id, engine.EventRetried)
		want := engine.StateCancelled
		if wasArchived[id] {
			want = engine.StateArchived
		}
		if len(evs) != 1 || evs[0].From != want || evs[0].To != engine.StateAvailable || evs[0].Actor != "ops" ||
			!strings.Contains(evs[0].Message, "op-common") {
			t.Fatalf("%s events: %+v", id, evs)
		}
	}
	for _, id := range rare {
		if j := getJob(t, s, id); j.State != engine.StateArchived {
			t.Fatalf("rare %s touched: %s", id, j.State)
		}
	}

	// Sparse: batches of 2 look at 20 ids each.
	op = startOperation(t, s, "op-rare", engine.ActionRetry, engine.Filter{
		States: []engine.State{engine.StateArchived}, Queues: []string{"rare"}, ErrorPattern: "timeout after <n>"})
	if done := runOperation(t, s, op.ID, 2); done.Status != engine.OperationCompleted || done.Succeeded != 12 {
		t.Fatalf("retry rare: %+v", done)
	}
	checkCounts(t, s, db, "retry rare")
	for _, id := range rare {
		if j := getJob(t, s, id); j.State != engine.StateAvailable || j.MaxAttempts != 3 || j.Attempt != 1 {
			t.Fatalf("rare %s: %s, max attempts %d", id, j.State, j.MaxAttempts)
		}
	}

	// Cancel, then delete, by range.
	op = startOperation(t, s, "op-cancel", engine.ActionCancel, engine.Filter{Queues: []string{"rare"}})
	if done := runOperation(t, s, op.ID, 3); done.Succeeded != 12 {
		t.Fatalf("cancel: %+v", done)
	}
	checkCounts(t, s, db, "cancel")
	if evs := eventsOf(t, s, rare[3], engine.EventCancelled); len(evs) != 1 || evs[0].From != engine.StateAvailable {
		t.Fatalf("cancel events: %+v", evs)
	}
	op = startOperation(t, s, "op-delete", engine.ActionDelete, engine.Filter{
		States: []engine.State{engine.StateCancelled}, Queues: []string{"rare"}})
	if done := runOperation(t, s, op.ID, 4); done.Succeeded != 12 {
		t.Fatalf("delete: %+v", done)
	}
	checkCounts(t, s, db, "delete")
	if n := len(listIDs(t, s, engine.Filter{Queues: []string{"rare"}})); n != 0 {
		t.Fatalf("%d rare jobs left", n)
	}
	if n := len(listIDs(t, s, engine.Filter{Queues: []string{"common"}})); n != 48 {
		t.Fatalf("%d common jobs left", n)
	}
}

// testCStoreBulkQuarantineAndSuperseded: with a quarantined fingerprint in
// the store a retry refuses its jobs one by one (the list path); superseded
// jobs are left out unless included, by range as by list.
func testCStoreBulkQuarantineAndSuperseded(t *testing.T, h Harness) {
	s := h.NewStore(t)
	db := h.truth(t, s)
	var js []*backend.JobInsertParams
	for i := range 6 {
		js = append(js, djob(fmt.Sprintf("q%d", i), "q", "k"))
	}
	insertRes(t, s, js...)
	dead := kill(t, s, "q", 6, engine.StateArchived, func(int) string { return "x" })
	if _, err := retryWithInput(t, s, withInputParams{ID: dead[1].ID, NewID: "fixed",
		Payload: json.RawMessage(`{"fixed":true}`), Fingerprint: "fp-fixed"}); err != nil {
		t.Fatal(err)
	}
	// Cancel the copy, so the queue's available jobs are the ones retried.
	if _, err := cancelJob(t, s, actionParams{ID: "fixed"}); err != nil {
		t.Fatal(err)
	}
	sel := engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"q"}}

	// No quarantine: by range; the superseded job is left out.
	op := startOperation(t, s, "op1", engine.ActionRetry, sel)
	if done := runOperation(t, s, op.ID, 1000); done.Succeeded != 5 || done.Failed != 0 {
		t.Fatalf("retry: %+v", done)
	}
	checkCounts(t, s, db, "retry")
	if j := getJob(t, s, dead[1].ID); j.State != engine.StateArchived {
		t.Fatalf("superseded job retried: %s", j.State)
	}
	sel.IncludeSuperseded = true
	op = startOperation(t, s, "op2", engine.ActionRetry, sel)
	if done := runOperation(t, s, op.ID, 1000); done.Succeeded != 1 {
		t.Fatalf("retry with superseded: %+v", done)
	}
	checkCounts(t, s, db, "retry with superseded")

	// Kill them again, then quarantine one fingerprint.
	dead = kill(t, s, "q", 6, engine.StateArchived, func(int) string { return "y" })
	insertRes(t, s, &backend.JobInsertParams{ID: "pill", Queue: "pills", Kind: "k", Payload: json.RawMessage(`{}`),
		Fingerprint: dead[2].Fingerprint, MaxAttempts: 1})
	res := claimRaw(t, s, backend.JobClaimParams{Queue: "pills", Limit: 1})
	quarantineJob(t, s, res.Jobs[0], "boom")
	op = startOperation(t, s, "op3", engine.ActionRetry, sel)
	done := runOperation(t, s, op.ID, 2)
	if done.Status != engine.OperationCompleted || done.Succeeded != 5 || done.Failed != 1 || !strings.Contains(done.Error, dead[2].ID) {
		t.Fatalf("retry with a quarantined fingerprint: %+v", done)
	}
	if j := getJob(t, s, dead[2].ID); j.State != engine.StateArchived {
		t.Fatalf("quarantined job retried: %s", j.State)
	}
	checkCounts(t, s, db, "retry with a quarantined fingerprint")
}

// testCStoreCountWithoutSuperseded: a bulk selector's count takes the
// superseded jobs away from the filter's count, capped as asked.
func testCStoreCountWithoutSuperseded(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	var js []*backend.JobInsertParams
	for i := range 8 {
		js = append(js, djob(fmt.Sprintf("c%d", i), "q", "k"))
	}
	insertRes(t, s, js...)
	dead := kill(t, s, "q", 8, engine.StateArchived, func(int) string { return "x" })
	for _, j := range dead[:3] {
		if _, err := retryWithInput(t, s, withInputParams{ID: j.ID, NewID: j.ID + "-fixed",
			Payload: json.RawMessage(`{"fixed":true}`), Fingerprint: "fp-" + j.ID + "-fixed"}); err != nil {
			t.Fatal(err)
		}
	}
	arch := engine.Filter{States: []engine.State{engine.StateArchived}}
	for _, tc := range []struct {
		f            engine.Filter
		exclude      bool
		max, want    int64
		wantEstimate bool
	}{
		{arch, false, 0, 8, false},
		{arch, true, 0, 5, false},
		{arch, true, 5, 5, false},
		{arch, true, 4, 4, true},
		{arch, true, 1, 1, true},
		{engine.Filter{States: arch.States, Queues: []string{"q"}}, true, 100, 5, false},
		{engine.Filter{States: arch.States, Queues: []string{"other"}}, true, 100, 0, false},
		{engine.Filter{Queues: []string{"q"}}, true, 0, 8, false}, // 5 archived and 3 available copies
		{engine.Filter{IDs: []string{dead[0].ID, dead[5].ID}}, true, 0, 1, false},
	} {
		n, est, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: tc.f, ExcludeSuperseded: tc.exclude, Max: tc.max})
		if err != nil || n != tc.want || est != tc.wantEstimate {
			t.Errorf("count %s (exclude superseded %v, max %d): %d %v %v, want %d %v", tc.f, tc.exclude, tc.max, n, est, err,
				tc.want, tc.wantEstimate)
		}
	}
}

// testCStoreCountStatesAndQueuesAsOf: a count of states and queues (what a
// dry run of "the dead jobs of a queue" asks, which a store may answer
// from its maintained counters) equals the jobs themselves counted in Go:
// as of times before, between and after the deaths, with and without the
// superseded jobs, over several states and queues, with running jobs and
// jobs of other queues beside them.
func testCStoreCountStatesAndQueuesAsOf(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	ctx := context.Background()
	for _, q := range []string{"q1", "q2", "q3"} {
		var js []*backend.JobInsertParams
		for i := range 6 {
			js = append(js, djob(fmt.Sprintf("%s-%d", q, i), q, "k"))
		}
		insertRes(t, s, js...)
	}
	asOfs := []time.Time{storeNow(t, s)}
	time.Sleep(2 * time.Millisecond)
	dead1 := kill(t, s, "q1", 3, engine.StateArchived, func(int) string { return "x" })
	kill(t, s, "q2", 2, engine.StateQuarantined, func(int) string { return "y" })
	asOfs = append(asOfs, storeNow(t, s))
	time.Sleep(2 * time.Millisecond)
	kill(t, s, "q2", 2, engine.StateArchived, func(int) string { return "z" })
	if _, err := retryWithInput(t, s, withInputParams{ID: dead1[0].ID, NewID: dead1[0].ID + "-fixed",
		Payload: json.RawMessage(`{"fixed":true}`), Fingerprint: "fp-fixed"}); err != nil {
		t.Fatal(err)
	}
	claimRaw(t, s, backend.JobClaimParams{Queue: "q3", Limit: 2}) // two running
	asOfs = append(asOfs, storeNow(t, s))

	all, err := cs.JobListPage(ctx, &backend.JobListPageParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := func(f engine.Filter, asOf *time.Time, exclude bool) int64 {
		var n int64
		for _, j := range all {
			if !slices.Contains(f.States, j.State) || (len(f.Queues) > 0 && !slices.Contains(f.Queues, j.Queue)) ||
				(asOf != nil && j.StateChangedAt.After(*asOf)) || (exclude && j.SupersededBy != "") {
				continue
			}
			n++
		}
		return n
	}
	st := func(ss ...engine.State) []engine.State { return ss }
	filters := []engine.Filter{
		{States: st(engine.StateArchived)},
		{States: st(engine.StateArchived), Queues: []string{"q1"}},
		{States: st(engine.StateArchived), Queues: []string{"q2", "q1"}},
		{States: st(engine.StateArchived, engine.StateQuarantined), Queues: []string{"q2"}},
		{States: st(engine.StateQuarantined, engine.StateArchived, engine.StateArchived)},
		{States: st(engine.StateRunning), Queues: []string{"q3"}},
		{States: st(engine.StateRunning, engine.StateArchived)},
		{States: st(engine.StateAvailable), Queues: []string{"q1", "q3"}},
		{States: st(engine.StateArchived), Queues: []string{"none"}},
		{States: st(engine.StateArchived, engine.StateQuarantined), Queues: []string{"q2", "q2", "q1"}},
	}
	for _, f := range filters {
		for i := range len(asOfs) + 1 {
			var asOf *time.Time
			if i < len(asOfs) {
				asOf = &asOfs[i]
			}
			for _, exclude := range []bool{false, true} {
				w := want(f, asOf, exclude)
				n, capped, err := cs.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: f, AsOf: asOf, ExcludeSuperseded: exclude})
				if err != nil || n != w || capped {
					t.Errorf("count %s as of #%d (exclude superseded %v): %d capped %v %v, want %d", f, i, exclude, n, capped, err, w)
				}
				if w > 1 {
					n, capped, err = cs.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: f, AsOf: asOf, ExcludeSuperseded: exclude, Max: w - 1})
					if err != nil || n != w-1 || !capped {
						t.Errorf("count %s as of #%d (exclude %v) capped at %d: %d capped %v %v", f, i, exclude, w-1, n, capped, err)
					}
				}
			}
		}
	}
}
