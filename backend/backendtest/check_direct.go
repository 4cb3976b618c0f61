package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// directChecks drive the Store methods one call at a time and compare
// what each returns with what it stored, field by field: insert results
// and conflicts, the claim's order, filters and lease, deadlines at claim,
// fencing of completions and finishes, quarantine holds, leases, schedule
// and retention.
func directChecks() []check {
	return []check{
		{name: "InsertResultIsTheStoredRow", fn: testDirectInsert},
		{name: "ClaimOrderKindsAndLease", fn: testDirectClaimOrderAndFilters},
		{name: "ClaimArchivesPastDeadline", fn: testDirectClaimArchivesPastDeadline},
		{name: "CompleteFencedAfterReclaimAndDuplicates", fn: testDirectCompleteFencing},
		{name: "FinishRetryReturnsTheRow", fn: testDirectFinishRetry},
		{name: "QuarantineHoldBumpAndRelease", fn: testDirectQuarantineHoldAndRelease},
		{name: "LeaseRenewAndExpiryListing", fn: testDirectLeaseRenewAndExpiry},
		{name: "ScheduleDueQueuesOnce", fn: testDirectScheduleDue},
		{name: "DeleteExpiredLimitAndPerQueue", fn: testDirectDeleteExpired},
		{name: "TwoStoresClaimEachJobOnce", fn: testDirectTwoStores},
	}
}

// djob is a new job of kind: three attempts, a payload naming the id, a
// fingerprint of its own.
func djob(id, queue, kind string) *backend.JobInsertParams {
	return &backend.JobInsertParams{
		ID:            id,
		Queue:         queue,
		Kind:          kind,
		Payload:       json.RawMessage(`{"n":"` + id + `"}`),
		SchemaVersion: 1,
		MaxAttempts:   3,
		Fingerprint:   "fp-" + id,
	}
}

// insertRes writes jobs, failing on any refusal, and returns the results.
func insertRes(t testing.TB, s backend.Store, jobs ...*backend.JobInsertParams) []backend.JobInsertResult {
	t.Helper()
	res, err := s.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: jobs, RefuseQuarantined: true})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("insert %s: %v", jobs[i].ID, r.Err)
		}
	}
	return res
}

// kill claims n jobs of queue (all of its available jobs must be these)
// and finishes each in state to with an error message of msg(i).
func kill(t testing.TB, s backend.Store, queue string, n int, to engine.State, msg func(i int) string) []*engine.Job {
	t.Helper()
	res := claimRaw(t, s, backend.JobClaimParams{Queue: queue, Limit: n})
	if len(res.Jobs) != n {
		t.Fatalf("kill: claimed %d jobs of %s, want %d", len(res.Jobs), queue, n)
	}
	out := make([]*engine.Job, n)
	for i, j := range res.Jobs {
		m := msg(i)
		reason := engine.ReasonAttemptsExhausted
		if to == engine.StateUndecodable {
			reason = engine.ReasonUndecodable
		}
		out[i] = finish(t, s, Outcome{JobRef: refOf(j), To: to, Reason: reason,
			Charge: backend.ChargeAttempt, Error: &engine.AttemptError{Message: m},
			ErrorPattern: engine.NormalizeError(m), Event: engine.EventArchived, Actor: "w1"})
	}
	return out
}

func testDirectInsert(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	a := djob("a", "q", "k")
	a.Tags = []string{"x", `y"z`}
	a.Metadata = json.RawMessage(`{"m":1}`)
	dl := time.Now().Add(time.Hour).Truncate(time.Microsecond) // stores keep microseconds (PostgreSQL)
	a.Deadline = &dl
	a.Timeout = 5 * time.Second
	b := djob("b", "q", "k")
	b.Delay = time.Hour
	res := insertRes(t, s, a, b)
	if res[0].Existing || res[0].Job.State != engine.StateAvailable || res[0].Job.Payload != nil {
		t.Fatalf("a: %+v", res[0])
	}
	if res[1].Job.State != engine.StateScheduled {
		t.Fatalf("b: state %s", res[1].Job.State)
	}
	got := getJob(t, s, "a")
	want := *res[0].Job
	want.Payload = a.Payload
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("stored job differs from the returned one:\n got %+v\nwant %+v", got, &want)
	}
	if got.Version != 1 || got.Fence != 0 || got.Attempt != 0 || got.Errors != nil || got.Lease != nil {
		t.Fatalf("new job: %+v", got)
	}
	if !got.Deadline.Equal(dl) || got.Deadline.Location() != time.UTC {
		t.Fatalf("deadline %v, want %v UTC", got.Deadline, dl)
	}

	// Same id and content: the existing job.
	again := djob("a", "q", "k")
	res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{again, djob("c", "q", "k")}, RefuseQuarantined: true})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !res[0].Existing || res[0].Job.ID != "a" || res[0].Job.Payload != nil {
		t.Fatalf("re-insert: %+v", res[0])
	}
	if res[1].Err != nil || res[1].Existing {
		t.Fatalf("c: %+v", res[1])
	}

	// Same id, other content: conflict, and the others of the batch go in.
	other := djob("a", "q", "k")
	other.Fingerprint = "other"
	otherQueue := djob("b", "q2", "k")
	res, err = s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{other, otherQueue, djob("d", "q", "k")}, RefuseQuarantined: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !errors.Is(res[i].Err, engine.ErrConflict) {
			t.Fatalf("conflict %d: %+v", i, res[i])
		}
	}
	if res[2].Err != nil {
		t.Fatal(res[2].Err)
	}
	if _, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
}

func testDirectClaimOrderAndFilters(t *testing.T, h Harness) {
	s := h.NewStore(t)
	past := storeNow(t, s).Add(-time.Minute)
	mk := func(id string, prio int, kind string, ver int) *backend.JobInsertParams {
		j := djob(id, "q", kind)
		j.Priority = prio
		j.SchemaVersion = ver
		return j
	}
	early := mk("e", 5, "k", 1)
	early.ScheduledAt = &past
	insertRes(t, s,
		mk("a", 5, "k", 1), mk("b", 1, "k", 1), early, mk("c", 5, "k", 2),
		mk("d", 0, "other", 1), djob("x", "q2", "k"),
	)
	// Kind and version filter: k up to version 1.
	res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 10, Kinds: map[string]int{"k": 1}, LeaseID: "L1"})
	if got, want := ids(res.Jobs), []string{"b", "e", "a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	for _, j := range res.Jobs {
		if j.State != engine.StateRunning || j.Fence != 1 || j.Lease == nil || j.Lease.ID != "L1" ||
			j.Lease.WorkerID != "w1" || j.Lease.Fence != 1 || j.AttemptedBy != "w1" || j.Payload == nil ||
			!j.Lease.ExpiresAt.Equal(res.Now.Add(time.Minute)) || !j.AttemptedAt.Equal(res.Now) || j.Version != 2 {
			t.Fatalf("claimed job: %+v lease %+v", j, j.Lease)
		}
		if !reflect.DeepEqual(getJob(t, s, j.ID), j) {
			t.Fatalf("claim returned %+v, stored %+v", j, getJob(t, s, j.ID))
		}
	}
	// A newer worker takes version 2; any kind with nil Kinds.
	res = claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 10, Kinds: map[string]int{"k": 2, "nothing": 1}})
	if got := ids(res.Jobs); !reflect.DeepEqual(got, []string{"c"}) {
		t.Fatalf("claimed %v", got)
	}
	res = claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 10})
	if got := ids(res.Jobs); !reflect.DeepEqual(got, []string{"d"}) {
		t.Fatalf("claimed %v", got)
	}
	if res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 10}); len(res.Jobs) != 0 {
		t.Fatalf("claimed %v from an empty queue", ids(res.Jobs))
	}
}

func testDirectClaimArchivesPastDeadline(t *testing.T, h Harness) {
	s := h.NewStore(t)
	now := storeNow(t, s)
	past := now.Add(-time.Second)
	late := djob("late", "q", "k")
	late.Deadline = &past
	lateOther := djob("late-other", "q", "other")
	lateOther.Deadline = &past
	future := now.Add(time.Hour)
	ok := djob("ok", "q", "k")
	ok.Deadline = &future
	insertRes(t, s, late, lateOther, ok)

	res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 10, Kinds: map[string]int{"k": 1}})
	if got := ids(res.Jobs); !reflect.DeepEqual(got, []string{"ok"}) {
		t.Fatalf("claimed %v", got)
	}
	if got := ids(deadAtClaim(res)); !reflect.DeepEqual(got, []string{"late"}) {
		t.Fatalf("dead %v", got)
	}
	d := getJob(t, s, "late")
	if d.State != engine.StateArchived || d.TerminalReason != engine.ReasonDeadlineExceeded ||
		d.FinalizedAt == nil || !d.FinalizedAt.Equal(res.Now) || d.Fence != 0 || d.AttemptedAt != nil {
		t.Fatalf("archived job: %+v", d)
	}
	ev := events(t, s, "late")
	if len(ev) != 1 || ev[0].Kind != engine.EventArchived || ev[0].Message != "deadline passed before the job ran" ||
		ev[0].From != engine.StateAvailable || ev[0].To != engine.StateArchived {
		t.Fatalf("events %+v", ev)
	}
	// The other kind is left for its own worker.
	if j := getJob(t, s, "late-other"); j.State != engine.StateAvailable {
		t.Fatalf("late-other: %s", j.State)
	}
}

func testDirectCompleteFencing(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insertRes(t, s, djob("a", "q", "k"), djob("b", "q", "k"), djob("c", "q", "k"))
	res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 3})
	a, b, c := res.Jobs[0], res.Jobs[1], res.Jobs[2]

	// a's lease is lost and a is claimed again: the first holder is stale.
	finish(t, s, Outcome{JobRef: refOf(a), To: engine.StateAvailable, Event: engine.EventLeaseLost})
	a2 := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 1, LeaseID: "second"}).Jobs[0]
	if a2.ID != "a" || a2.Fence != 2 {
		t.Fatalf("reclaim: %+v", a2)
	}
	before := getJob(t, s, "a")

	out, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{
		{JobRef: refOf(a)}, // stale fence and lease
		{JobRef: backend.JobRef{ID: "a", LeaseID: a2.Lease.ID, Fence: 1}}, // right lease, wrong fence
		{JobRef: refOf(b)},
		{JobRef: refOf(c), Delete: true},
		{JobRef: backend.JobRef{ID: "missing", LeaseID: "x", Fence: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 4} {
		if !errors.Is(out[i], engine.ErrLeaseLost) {
			t.Fatalf("item %d: %v", i, out[i])
		}
	}
	if out[2] != nil || out[3] != nil {
		t.Fatalf("results %v", out)
	}
	if after := getJob(t, s, "a"); !reflect.DeepEqual(before, after) {
		t.Fatalf("a stale ack changed the row:\nbefore %+v\n after %+v", before, after)
	}
	gb := getJob(t, s, "b")
	if gb.State != engine.StateCompleted || gb.Lease != nil || gb.FinalizedAt == nil || gb.AttemptedBy != "w1" ||
		gb.Version != b.Version+1 || !gb.StateChangedAt.Equal(*gb.FinalizedAt) {
		t.Fatalf("completed: %+v", gb)
	}
	if !gone(s, "c") {
		t.Fatal("deleted job still there")
	}

	// A second acknowledgement of b is refused; a duplicate in one batch
	// succeeds once.
	out, err = s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{
		{JobRef: refOf(b)}, {JobRef: refOf(a2)}, {JobRef: refOf(a2)},
	}, EndProbation: true})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(out[0], engine.ErrLeaseLost) || out[1] != nil || !errors.Is(out[2], engine.ErrLeaseLost) {
		t.Fatalf("results %v", out)
	}
}

func testDirectFinishRetry(t *testing.T, h Harness) {
	s := h.NewStore(t)
	insertRes(t, s, djob("a", "q", "k"))
	j := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 1}).Jobs[0]

	// Wrong fence: nothing changes.
	before := getJob(t, s, "a")
	stale := refOf(j)
	stale.Fence++
	if _, err := tryFinish(s, Outcome{JobRef: stale, To: engine.StateRetryable, Charge: backend.ChargeAttempt}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("stale finish: %v", err)
	}
	if after := getJob(t, s, "a"); !reflect.DeepEqual(before, after) {
		t.Fatal("stale finish changed the row")
	}

	got := finish(t, s, Outcome{JobRef: refOf(j), To: engine.StateRetryable,
		Charge: backend.ChargeAttempt, Delay: time.Hour, Error: &engine.AttemptError{Message: "nope", Trace: "t"},
		Event: engine.EventFailed, Actor: "w1", Message: "failed"})
	if got.State != engine.StateRetryable || got.Attempt != 1 || got.Lease != nil || got.Payload == nil ||
		len(got.Errors) != 1 || got.Errors[0].Attempt != 1 || got.Errors[0].Worker != "w1" ||
		!got.Errors[0].At.Equal(got.StateChangedAt) || !got.ScheduledAt.Equal(got.StateChangedAt.Add(time.Hour)) ||
		got.FinalizedAt != nil {
		t.Fatalf("retryable: %+v", got)
	}
	if !reflect.DeepEqual(got, getJob(t, s, "a")) {
		t.Fatal("finish returned something other than the row")
	}
	ev := events(t, s, "a")
	if len(ev) != 1 || ev[0].Kind != engine.EventFailed || ev[0].From != engine.StateRunning ||
		ev[0].To != engine.StateRetryable || ev[0].Attempt != 1 || ev[0].Actor != "w1" || ev[0].Message != "failed" {
		t.Fatalf("events %+v", ev)
	}
	// Finishing again is a lost lease.
	if _, err := tryFinish(s, Outcome{JobRef: refOf(j), To: engine.StateArchived}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("second finish: %v", err)
	}
	if _, err := tryFinish(s, Outcome{JobRef: refOf(j), To: engine.StateRunning}); err == nil {
		t.Fatal("finish to running accepted")
	}
}
