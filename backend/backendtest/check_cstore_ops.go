package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

func testCStoreOperationFencing(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	tr := h.truth(t, s)
	ctx := context.Background()
	for i := range 6 {
		insertRes(t, s, djob(fmt.Sprintf("j%d", i), "q", "k"))
	}
	kill(t, s, "q", 6, engine.StateArchived, func(int) string { return "x" })
	op, err := cs.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op1", Action: engine.ActionRetry,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}}, CreatedBy: "maya", Matched: 6})
	if err != nil || op.Status != engine.OperationPending || op.CreatedBy != "maya" || op.Matched != 6 {
		t.Fatalf("insert: %+v %v", op, err)
	}
	if _, err := cs.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op1", Action: engine.ActionRetry}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("same id again: %v", err)
	}
	a, err := cs.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "A", TTL: time.Millisecond})
	if err != nil || a == nil || a.Fence != 1 || a.Operation.Status != engine.OperationRunning || a.Operation.StartedAt == nil {
		t.Fatalf("claim A: %+v %v", a, err)
	}
	time.Sleep(5 * time.Millisecond)
	b, err := cs.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "B", TTL: time.Minute})
	if err != nil || b == nil || b.Fence <= a.Fence || b.Holder != "B" {
		t.Fatalf("claim B after A's lease ran out: %+v %v", b, err)
	}
	if again, err := cs.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "C", TTL: time.Minute}); err != nil || again != nil {
		t.Fatalf("claim of a leased operation: %+v %v", again, err)
	}
	snapshot := tr.JobCounts(t)
	// A's stale fence changes nothing.
	if _, err := runBatch(t, s, batchParams{ID: "op1", Holder: "A", Fence: a.Fence, Limit: 10}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("stale fence: %v", err)
	}
	if _, err := runBatch(t, s, batchParams{ID: "op1", Holder: "A", Fence: b.Fence, Limit: 10}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("wrong holder: %v", err)
	}
	if got := tr.JobCounts(t); !countsEqual(got, snapshot) {
		t.Fatalf("a refused batch changed jobs: %v → %v", snapshot, got)
	}
	if cur, _ := cs.OperationGet(ctx, &backend.OperationGetParams{ID: "op1"}); cur.Processed != 0 {
		t.Fatalf("a refused batch recorded progress: %+v", cur)
	}
	// B's batches run; one batch of 4, then cancelled.
	res, err := runBatch(t, s, batchParams{ID: "op1", Holder: "B", Fence: b.Fence, Limit: 4})
	if err != nil || res.Operation.Status != engine.OperationRunning || res.Operation.Processed != 4 || res.Operation.Succeeded != 4 {
		t.Fatalf("batch: %+v %v", res, err)
	}
	// A batch must follow the operation's cursor: a stale one is refused.
	if _, err := runBatch(t, s, batchParams{ID: "op1", Holder: "B", Fence: b.Fence, Limit: 4}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("batch from a stale cursor: %v", err)
	}
	ev := events(t, s, "j0")
	if last := ev[len(ev)-1]; last.Kind != engine.EventRetried || last.Actor != "maya" || !strings.Contains(last.Message, "op1") {
		t.Fatalf("event of a bulk retry: %+v", last)
	}
	if op, err := cs.OperationCancel(ctx, &backend.OperationCancelParams{ID: "op1", Message: "cancelled by " + "maya"}); err != nil || op.Status != engine.OperationCancelled || op.FinishedAt == nil {
		t.Fatalf("cancel: %+v %v", op, err)
	}
	if _, err := cs.OperationCancel(ctx, &backend.OperationCancelParams{ID: "op1"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := cs.OperationCancel(ctx, &backend.OperationCancelParams{ID: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	snapshot = tr.JobCounts(t)
	res, err = runBatch(t, s, batchParams{ID: "op1", Holder: "B", Fence: b.Fence, After: res.Cursor, Limit: 4})
	if err != nil || res.Operation.Status != engine.OperationCancelled || res.Operation.Processed != 4 {
		t.Fatalf("batch after cancel: %+v %v", res, err)
	}
	if got := tr.JobCounts(t); !countsEqual(got, snapshot) {
		t.Fatalf("a batch of a cancelled operation changed jobs: %v → %v", snapshot, got)
	}
	if next, err := cs.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "C", TTL: time.Minute}); err != nil || next != nil {
		t.Fatalf("claim of a cancelled operation: %+v %v", next, err)
	}
	// Listing: newest first, keyset.
	for i := range 3 {
		if _, err := cs.OperationInsert(ctx, &backend.OperationInsertParams{ID: fmt.Sprintf("op-x%d", i), Action: engine.ActionDelete,
			Selector: engine.Filter{Queues: []string{"none"}}}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := cs.OperationList(ctx, &backend.OperationListParams{Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != "op-x2" || page[1].ID != "op-x1" {
		t.Fatalf("first page: %v", page)
	}
	page, err = cs.OperationList(ctx, &backend.OperationListParams{Limit: 5, After: &engine.Cursor{At: page[1].CreatedAt, ID: page[1].ID}})
	if err != nil || len(page) != 2 || page[0].ID != "op-x0" || page[1].ID != "op1" {
		t.Fatalf("second page: %v", page)
	}
	if _, err := cs.OperationGet(ctx, &backend.OperationGetParams{ID: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

// testCStoreBulkTakesOnlyEarlierDeaths: an operation takes the jobs that
// entered their state at or before its creation, whatever their ids.
func testCStoreBulkTakesOnlyEarlierDeaths(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	// "m" jobs die before the operation, "a" and "z" jobs (ids on both
	// sides) after it.
	for _, id := range []string{"m1", "m2", "m3"} {
		insertRes(t, s, djob(id, "early", "k"))
	}
	for _, id := range []string{"a1", "z1"} {
		insertRes(t, s, djob(id, "late", "k"))
	}
	kill(t, s, "early", 3, engine.StateArchived, func(int) string { return "x" })
	time.Sleep(time.Millisecond)
	op, err := cs.OperationInsert(context.Background(), &backend.OperationInsertParams{ID: "op", Action: engine.ActionRetry,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil {
		t.Fatal(err)
	}
	kill(t, s, "late", 2, engine.StateArchived, func(int) string { return "x" })
	done := runOperation(t, s, op.ID, 1)
	if done.Status != engine.OperationCompleted || done.Succeeded != 3 || done.Failed != 0 || done.FinishedAt == nil {
		t.Fatalf("operation: %+v", done)
	}
	for id, want := range map[string]engine.State{"m1": engine.StateAvailable, "m2": engine.StateAvailable,
		"m3": engine.StateAvailable, "a1": engine.StateArchived, "z1": engine.StateArchived} {
		if j := getJob(t, s, id); j.State != want {
			t.Errorf("%s: %s, want %s", id, j.State, want)
		}
	}
}

// testCStoreBulkWindowsAndRefusals: a selector matching a few jobs among
// many is walked to the end over several batches; a quarantined
// fingerprint's job is refused (counted failed); a superseded job is left
// out unless included.
func testCStoreBulkWindowsAndRefusals(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	tr := h.truth(t, s)
	ctx := context.Background()
	var js []*backend.JobInsertParams
	for i := range 60 {
		js = append(js, djob(fmt.Sprintf("j%02d", i), "q", "k"))
	}
	insertRes(t, s, js...)
	dead := kill(t, s, "q", 60, engine.StateArchived, func(i int) string {
		if i%20 == 7 {
			return "rare"
		}
		return "common"
	})
	rare := []string{}
	for _, j := range dead {
		if j.Errors[0].Message == "rare" {
			rare = append(rare, j.ID)
		}
	}
	if len(rare) != 3 {
		t.Fatalf("rare %v", rare)
	}
	// Quarantine the first rare job's fingerprint, supersede the second.
	insertRes(t, s, &backend.JobInsertParams{ID: "pill", Queue: "pills", Kind: "k", Payload: json.RawMessage(`{}`),
		Fingerprint: getJob(t, s, rare[0]).Fingerprint, MaxAttempts: 1})
	res := claimRaw(t, s, backend.JobClaimParams{Queue: "pills", Limit: 1})
	quarantineJob(t, s, res.Jobs[0], "boom")
	if _, err := retryWithInput(t, s, withInputParams{ID: rare[1], NewID: rare[1] + "-fixed",
		Payload: json.RawMessage(`{"fixed":true}`), Fingerprint: "fp-fixed"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	sel := engine.Filter{States: []engine.State{engine.StateArchived}, Error: "rare"}
	op, err := cs.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op", Action: engine.ActionRetry, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	// Batches of 2 over 61 jobs of which 3 match: several batches.
	done := runOperation(t, s, op.ID, 2)
	if done.Status != engine.OperationCompleted || done.Processed != 2 || done.Succeeded != 1 || done.Failed != 1 ||
		!strings.Contains(done.Error, rare[0]) {
		t.Fatalf("operation: %+v", done)
	}
	if j := getJob(t, s, rare[2]); j.State != engine.StateAvailable || j.MaxAttempts != 3 || j.Attempt != 1 {
		t.Fatalf("retried: %+v", j)
	}
	for _, id := range rare[:2] {
		if j := getJob(t, s, id); j.State != engine.StateArchived {
			t.Fatalf("%s: %s", id, j.State)
		}
	}
	checkCounts(t, s, tr, "bulk retry")
	// Included superseded jobs are retried (forced).
	time.Sleep(time.Millisecond)
	sel.IncludeSuperseded = true
	op, err = cs.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op2", Action: engine.ActionRetry, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	done = runOperation(t, s, op.ID, 1000)
	if done.Succeeded != 1 || done.Failed != 1 {
		t.Fatalf("operation with superseded jobs: %+v", done)
	}
	if j := getJob(t, s, rare[1]); j.State != engine.StateAvailable {
		t.Fatalf("superseded job not retried: %s", j.State)
	}
	// A selector with no state the action changes completes at once.
	op, err = cs.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op3", Action: engine.ActionRelease,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil {
		t.Fatal(err)
	}
	if done := runOperation(t, s, op.ID, 10); done.Status != engine.OperationCompleted || done.Processed != 0 {
		t.Fatalf("empty operation: %+v", done)
	}
}

// testCStoreOperationUnrunnableFails: an operation no batch can run fails
// with the reason instead of being retried forever.
func testCStoreOperationUnrunnableFails(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	insertRes(t, s, djob("a", "q", "k"))
	for _, p := range []*backend.OperationInsertParams{
		{ID: "op-action", Action: "explode", Selector: engine.Filter{Queues: []string{"q"}}},
		{ID: "op-path", Action: engine.ActionCancel, Selector: engine.Filter{Payload: []engine.PathMatch{{Path: `x"y`, Value: "1"}}}},
	} {
		if _, err := cs.OperationInsert(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		op := runOperation(t, s, p.ID, 10)
		if op.Status != engine.OperationFailed || op.FinishedAt == nil || op.Error == "" || op.Processed != 0 {
			t.Fatalf("%s: %+v", p.ID, op)
		}
	}
	if j := getJob(t, s, "a"); j.State != engine.StateAvailable {
		t.Fatalf("a failed operation changed a job: %s", j.State)
	}
}
