package backendtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// testCStoreCountersExact drives every kind of write and compares the
// maintained counters with the jobs themselves (Truth) after each.
func testCStoreCountersExact(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	tr := h.truth(t, s)
	ctx := context.Background()
	check := func(step string) { t.Helper(); checkCounts(t, s, tr, step) }

	later := djob("later", "a", "k")
	later.Delay = time.Hour
	soon := djob("soon", "a", "k")
	soon.Delay = time.Millisecond
	past := storeNow(t, s).Add(-time.Minute)
	expired := djob("expired", "b", "k")
	expired.Deadline = &past
	insertRes(t, s, djob("a1", "a", "k"), djob("a2", "a", "k"), djob("a3", "a", "k"), later, soon, expired,
		djob("b1", "b", "k"), djob("b2", "b", "k"))
	insertRes(t, s, djob("a1", "a", "k")) // the same job again: no change
	check("insert")

	res := claimRaw(t, s, backend.JobClaimParams{Queue: "b", Limit: 1})
	if len(deadAtClaim(res)) != 1 || len(res.Jobs) != 1 {
		t.Fatalf("claim b: %v %v", ids(deadAtClaim(res)), ids(res.Jobs))
	}
	check("claim with a deadline archive")
	out, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(res.Jobs[0])}}, EndProbation: true})
	if err != nil || out[0] != nil {
		t.Fatal(err, out)
	}
	check("complete")

	res = claimRaw(t, s, backend.JobClaimParams{Queue: "a", Limit: 3})
	r := res.Jobs
	if _, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{
		{JobRef: refOf(r[0]), Delete: true}, {JobRef: refOf(r[0]), Delete: true}}, EndProbation: true}); err != nil {
		t.Fatal(err)
	}
	check("complete with delete (twice)")
	finish(t, s, Outcome{JobRef: refOf(r[1]), To: engine.StateRetryable, Charge: backend.ChargeAttempt,
		Error: &engine.AttemptError{Message: "e"}})
	check("finish retryable")
	finish(t, s, Outcome{JobRef: refOf(r[2]), To: engine.StateDeleted})
	check("finish deleted")
	time.Sleep(5 * time.Millisecond)
	if _, err := s.JobScheduleDue(ctx, &backend.JobScheduleDueParams{From: []engine.State{engine.StateRetryable, engine.StateScheduled}, To: engine.StateAvailable, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	check("schedule due")

	// Quarantine with holds, then release.
	poison := func(id, queue string) *backend.JobInsertParams {
		j := djob(id, queue, "k")
		j.Fingerprint = "poison"
		return j
	}
	pl := poison("p-later", "c")
	pl.Delay = time.Hour
	insertRes(t, s, poison("p1", "c"), poison("p2", "d"), pl)
	res = claimRaw(t, s, backend.JobClaimParams{Queue: "c", Limit: 1})
	quarantineJob(t, s, res.Jobs[0], "boom")
	check("quarantine with holds")
	if _, err := releaseJob(t, s, actionParams{ID: "p2", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	check("release one job")
	if _, err := s.FingerprintRelease(ctx, releasePlan(t, "poison", "")); err != nil {
		t.Fatal(err)
	}
	check("release fingerprint")

	// Operator actions.
	if _, err := retryJob(t, s, retryParams{ID: "expired", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	check("retry")
	if _, err := cancelJob(t, s, actionParams{ID: "later", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	check("cancel")
	if err := deleteJob(t, s, actionParams{ID: "later", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	check("delete")
	insertRes(t, s, djob("e1", "e", "k"), djob("e2", "e", "k"), djob("e3", "e", "k"))
	kill(t, s, "e", 3, engine.StateArchived, func(int) string { return "x" })
	if _, err := retryWithInput(t, s, withInputParams{ID: "e1", NewID: "e1-fixed",
		Payload: json.RawMessage(`{}`), Fingerprint: "fp-e1-fixed"}); err != nil {
		t.Fatal(err)
	}
	check("retry with input")

	insertRes(t, s, djob("k1", "keep", "k"), djob("k2", "keep", "k"))
	claimRaw(t, s, backend.JobClaimParams{Queue: "keep", Limit: 1})
	check("a job kept running")

	// Operations: cancel everything waiting, then delete every cancelled job.
	for _, action := range []engine.Action{engine.ActionCancel, engine.ActionDelete} {
		time.Sleep(time.Millisecond)
		op, err := cs.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op-" + string(action), Action: action,
			Selector: engine.Filter{States: []engine.State{engine.StateAvailable, engine.StateScheduled, engine.StateCancelled}}})
		if err != nil {
			t.Fatal(err)
		}
		runOperation(t, s, op.ID, 2)
		check("operation " + string(action))
	}

	// Retention.
	n, err := s.JobDeleteExpired(ctx, &backend.JobDeleteExpiredParams{Retention: map[engine.State]time.Duration{
		engine.StateCompleted: 0, engine.StateArchived: 0}, Limit: 100})
	if err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	check("retention")

	before, _ := cs.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err := cs.JobCountReconcile(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := cs.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if !countsEqual(before, after) {
		t.Fatalf("reconcile changed exact counters: %v → %v", before, after)
	}
	if len(after) == 0 {
		t.Fatal("no jobs left to count")
	}
	for q := range after {
		one, err := cs.JobCountByQueue(ctx, &backend.JobCountByQueueParams{Queue: q})
		if err != nil || len(one) != 1 || !maps.Equal(one[q], after[q]) {
			t.Fatalf("counts of queue %s: %v %v", q, one, err)
		}
	}
}

// testCStoreReconcileRepairsDrift: counters drifted by hand are put back
// to the truth, and a queue with no jobs left loses its row.
func testCStoreReconcileRepairsDrift(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	tr := h.truth(t, s)
	ctx := context.Background()
	jobs := make([]*backend.JobInsertParams, 0, 30)
	for i := range 30 {
		q := []string{"billing", "email", "reports"}[i%3]
		jobs = append(jobs, &backend.JobInsertParams{ID: fmt.Sprintf("job-%02d", i), Queue: q, Kind: "k",
			SchemaVersion: 1, MaxAttempts: 3, Payload: json.RawMessage(`{}`)})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs, RefuseQuarantined: true}); err != nil {
		t.Fatal(err)
	}
	want, err := cs.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	if jc := tr.JobCounts(t); !countsEqual(want, jc) {
		t.Fatalf("counters before the drift %v, jobs %v", want, jc)
	}
	tr.CounterAdd(t, "email", engine.StateAvailable, 7)
	tr.CounterAdd(t, "ghost", engine.StateArchived, 5)
	drifted, _ := cs.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if countsEqual(drifted, want) {
		t.Fatal("the hand edit did not change the counters")
	}
	if err := cs.JobCountReconcile(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := cs.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	if !countsEqual(got, want) {
		t.Fatalf("after reconcile: %v, want %v", got, want)
	}
}
