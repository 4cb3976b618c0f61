package backendtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

func testDirectQuarantineHoldAndRelease(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	mk := func(id string) *backend.JobInsertParams {
		j := djob(id, "q", "k")
		j.Fingerprint = "poison"
		return j
	}
	later := mk("later")
	later.Delay = time.Hour
	done := mk("done")
	insertRes(t, s, done)
	// done completes before the quarantine: terminal jobs stay as they are.
	dj := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 1}).Jobs[0]
	if out, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(dj)}}, EndProbation: true}); err != nil || out[0] != nil {
		t.Fatal(err, out)
	}
	insertRes(t, s, mk("a"), mk("b"), later, mk("c"), djob("innocent", "q", "k"))
	res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 2})
	run1, run2 := res.Jobs[0], res.Jobs[1] // a and b

	q := finish(t, s, Outcome{JobRef: refOf(run1), To: engine.StateQuarantined,
		Reason: engine.ReasonQuarantined, Charge: backend.ChargeCrash, Quarantine: true,
		Error: &engine.AttemptError{Crash: true, Message: "segfault"}, Event: engine.EventQuarantined, Actor: "reaper"})
	if q.State != engine.StateQuarantined || q.CrashAttempt != 1 || q.Attempt != 0 || q.Errors[0].Attempt != 1 ||
		!q.Errors[0].Crash || q.FinalizedAt == nil || q.TerminalReason != engine.ReasonQuarantined {
		t.Fatalf("quarantined job: %+v", q)
	}
	for id, want := range map[string]engine.State{
		"later": engine.StateQuarantined, "c": engine.StateQuarantined, "b": engine.StateRunning,
		"done": engine.StateCompleted, "innocent": engine.StateAvailable,
	} {
		if j := getJob(t, s, id); j.State != want {
			t.Fatalf("%s: %s, want %s", id, j.State, want)
		}
	}
	ev := events(t, s, "later")
	if len(ev) != 1 || ev[0].Kind != engine.EventHeld || ev[0].From != engine.StateScheduled {
		t.Fatalf("held events: %+v", ev)
	}
	fp, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "poison"})
	if err != nil {
		t.Fatal(err)
	}
	if fp.Status != engine.FingerprintQuarantined || fp.Kind != "k" || fp.Crashes != 1 || fp.LastError != "segfault" ||
		fp.LastJobID != "a" || fp.Held != 3 || !fp.Since.Equal(*q.FinalizedAt) {
		t.Fatalf("fingerprint %+v", fp)
	}
	// The running sibling crashes too: the record is bumped, since kept.
	finish(t, s, Outcome{JobRef: refOf(run2), To: engine.StateQuarantined,
		Reason: engine.ReasonQuarantined, Charge: backend.ChargeCrash, Quarantine: true,
		Error: &engine.AttemptError{Crash: true, Message: "again"}})
	fp2, _ := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "poison"})
	if fp2.Crashes != 2 || !fp2.Since.Equal(fp.Since) || fp2.LastJobID != "b" || fp2.Held != 4 {
		t.Fatalf("fingerprint %+v", fp2)
	}
	list, err := s.FingerprintList(ctx, &backend.FingerprintListParams{})
	if err != nil || len(list) != 1 || list[0].Fingerprint != "poison" {
		t.Fatalf("list %v %v", list, err)
	}
	if _, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing fingerprint: %v", err)
	}
	if _, err := s.FingerprintRelease(ctx, releasePlan(t, "nope", "")); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("release missing fingerprint: %v", err)
	}

	n, err := s.FingerprintRelease(ctx, releasePlan(t, "poison", "alice"))
	if err != nil || n != 4 {
		t.Fatalf("release: %d %v", n, err)
	}
	for _, id := range []string{"a", "b", "c", "later"} {
		j := getJob(t, s, id)
		if j.State != engine.StateAvailable || j.CrashAttempt != 0 || j.FinalizedAt != nil || j.TerminalReason != "" {
			t.Fatalf("released %s: %+v", id, j)
		}
		ev := events(t, s, id)
		if last := ev[len(ev)-1]; last.Kind != engine.EventReleased || last.Actor != "alice" || last.To != engine.StateAvailable {
			t.Fatalf("%s events %+v", id, ev)
		}
	}
	fp3, _ := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "poison"})
	if fp3.Status != engine.FingerprintProbation || fp3.Held != 0 {
		t.Fatalf("after release %+v", fp3)
	}

	// On probation a crash quarantines again, with a new since.
	res = claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 10, Kinds: map[string]int{"k": 1}})
	if len(res.Jobs) != 5 {
		t.Fatalf("claimed %v", ids(res.Jobs))
	}
	byID := map[string]*engine.Job{}
	for _, j := range res.Jobs {
		byID[j.ID] = j
	}
	finish(t, s, Outcome{JobRef: refOf(byID["a"]), To: engine.StateQuarantined,
		Charge: backend.ChargeCrash, Quarantine: true, Error: &engine.AttemptError{Crash: true, Message: "x"}})
	fp4, _ := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "poison"})
	if fp4.Status != engine.FingerprintQuarantined || !fp4.Since.After(fp3.Since) || fp4.Crashes != 3 {
		t.Fatalf("requarantined %+v", fp4)
	}
	if _, err := s.FingerprintRelease(ctx, releasePlan(t, "poison", "")); err != nil {
		t.Fatal(err)
	}
	// A completion ends probation.
	out, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(byID["b"])}}, EndProbation: true})
	if err != nil || out[0] != nil {
		t.Fatal(err, out)
	}
	if _, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "poison"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("probation not ended: %v", err)
	}
}

func testDirectLeaseRenewAndExpiry(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insertRes(t, s, djob("a", "q", "k"), djob("b", "q", "k"), djob("c", "q", "k"))
	if err := s.WorkerHeartbeat(ctx, &backend.WorkerHeartbeatParams{ID: "alive", Host: "h", PID: 1, Queues: []string{"q"}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.WorkerHeartbeat(ctx, &backend.WorkerHeartbeatParams{ID: "gone", TTL: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	a := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 1, WorkerID: "alive", LeaseDuration: time.Millisecond}).Jobs[0]
	b := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 1, WorkerID: "gone", LeaseDuration: time.Millisecond}).Jobs[0]
	c := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 1, WorkerID: "alive", LeaseDuration: time.Millisecond}).Jobs[0]

	stale := refOf(c)
	stale.LeaseID = "other"
	out, err := s.JobLeaseRenew(ctx, &backend.JobLeaseRenewParams{Items: []backend.JobRef{refOf(c), stale}, LeaseDuration: time.Hour})
	if err != nil || out[0] != nil || !errors.Is(out[1], engine.ErrLeaseLost) {
		t.Fatalf("renew: %v %v", out, err)
	}
	if j := getJob(t, s, "c"); !j.Lease.ExpiresAt.After(storeNow(t, s).Add(50 * time.Minute)) {
		t.Fatalf("renewed lease %v", j.Lease.ExpiresAt)
	}
	time.Sleep(5 * time.Millisecond)
	exp, err := s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(exp) != 2 || exp[0].Job.ID != a.ID || !exp[0].WorkerAlive || exp[1].Job.ID != b.ID || exp[1].WorkerAlive ||
		exp[0].Job.Payload != nil || exp[0].Job.Lease == nil {
		t.Fatalf("expired: %+v", exp)
	}
	if exp, _ := s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 1}); len(exp) != 1 {
		t.Fatalf("limit: %d", len(exp))
	}
	if err := s.WorkerDelete(ctx, &backend.WorkerDeleteParams{ID: "alive"}); err != nil {
		t.Fatal(err)
	}
	exp, _ = s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 10})
	if exp[0].WorkerAlive {
		t.Fatal("deleted worker alive")
	}
}

func testDirectScheduleDue(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	soon := func(id, q string) *backend.JobInsertParams {
		j := djob(id, q, "k")
		j.Delay = 300 * time.Millisecond
		return j
	}
	never := djob("never", "q3", "k")
	never.Delay = time.Hour
	// Times are the store's: the check asks whether the jobs are due by
	// the store's clock, never by how long this process slept.
	storeNow := func() time.Time {
		t.Helper()
		now, err := s.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	before := storeNow()
	insertRes(t, s, soon("a", "q1"), soon("b", "q2"), soon("c", "q1"), never)
	qs, err := s.JobScheduleDue(ctx, &backend.JobScheduleDueParams{From: []engine.State{engine.StateRetryable, engine.StateScheduled}, To: engine.StateAvailable, Limit: 10})
	// Only a call that certainly ran before the jobs were due must find
	// none (on a loaded machine the insert alone may outlast the delay).
	if err != nil || (storeNow().Sub(before) < 300*time.Millisecond && len(qs) != 0) {
		t.Fatalf("early: %v %v", qs, err)
	}
	// Wait until the store's clock passes the jobs' own due times: the
	// insert may have run well after before on a loaded machine, and its
	// jobs come due 300 ms after it, not after before.
	var dueAt time.Time
	for _, id := range []string{"a", "b", "c"} {
		if at := getJob(t, s, id).ScheduledAt; at.After(dueAt) {
			dueAt = at
		}
	}
	for !storeNow().After(dueAt.Add(20 * time.Millisecond)) {
		time.Sleep(20 * time.Millisecond)
	}
	due, err := s.JobScheduleDue(ctx, &backend.JobScheduleDueParams{From: []engine.State{engine.StateRetryable, engine.StateScheduled}, To: engine.StateAvailable, Limit: 10})
	// Each call names a queue once, however many of its jobs came due.
	for _, got := range [][]string{qs, due} {
		if seen := slices.Compact(slices.Sorted(slices.Values(got))); len(seen) != len(got) {
			t.Fatalf("a queue named twice: %v", got)
		}
	}
	// An early call that already moved some returned their queues then.
	qs = slices.Compact(slices.Sorted(slices.Values(append(qs, due...))))
	if err != nil || !reflect.DeepEqual(qs, []string{"q1", "q2"}) {
		t.Fatalf("due: %v %v", qs, err)
	}
	if j := getJob(t, s, "a"); j.State != engine.StateAvailable || j.Version != 2 {
		t.Fatalf("a: %+v", j)
	}
	if j := getJob(t, s, "never"); j.State != engine.StateScheduled {
		t.Fatalf("never: %s", j.State)
	}
	// A retryable job comes due too.
	j := claimRaw(t, s, backend.JobClaimParams{Queue: "q1", Limit: 1}).Jobs[0]
	finish(t, s, Outcome{JobRef: refOf(j), To: engine.StateRetryable, Charge: backend.ChargeAttempt})
	if qs, _ := s.JobScheduleDue(ctx, &backend.JobScheduleDueParams{From: []engine.State{engine.StateRetryable, engine.StateScheduled}, To: engine.StateAvailable, Limit: 1}); !reflect.DeepEqual(qs, []string{"q1"}) {
		t.Fatalf("retryable due: %v", qs)
	}
}

func testDirectDeleteExpired(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	// Completed in q1, q2; archived in q1.
	insertRes(t, s, djob("c1", "q1", "k"), djob("c2", "q2", "k"), djob("c3", "q1", "k"), djob("x1", "q1", "k"))
	for _, q := range []string{"q1", "q2"} {
		for _, j := range claimRaw(t, s, backend.JobClaimParams{Queue: q, Limit: 10}).Jobs {
			if j.ID == "x1" {
				finish(t, s, Outcome{JobRef: refOf(j), To: engine.StateArchived,
					Reason: engine.ReasonSkipped, Event: engine.EventArchived})
				continue
			}
			if _, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(j)}}, EndProbation: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	del := func(p backend.JobDeleteExpiredParams) int {
		t.Helper()
		n, err := s.JobDeleteExpired(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Long retention: nothing.
	if n := del(backend.JobDeleteExpiredParams{Retention: engine.DefaultRetention(), Limit: 100}); n != 0 {
		t.Fatalf("deleted %d", n)
	}
	// q1 keeps completed 0: its completed jobs go, at most Limit.
	p := backend.JobDeleteExpiredParams{
		Retention:      engine.DefaultRetention(),
		QueueRetention: map[string]map[engine.State]time.Duration{"q1": {engine.StateCompleted: 0}},
		Limit:          1,
	}
	if n := del(p); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	p.Limit = 100
	if n := del(p); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	for id, isGone := range map[string]bool{"c1": true, "c3": true, "c2": false, "x1": false} {
		if gone(s, id) != isGone {
			t.Fatalf("%s: gone %v, want %v", id, !isGone, isGone)
		}
	}
	// Default retention 0 for archived, but q1's override keeps... only
	// completed: x1 goes with its events; q2's completed default applies.
	time.Sleep(2 * time.Millisecond)
	p.Retention = map[engine.State]time.Duration{engine.StateArchived: 0, engine.StateCompleted: time.Millisecond, engine.StateRunning: 0}
	p.QueueRetention = map[string]map[engine.State]time.Duration{"q2": {engine.StateCompleted: time.Hour}}
	if n := del(p); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	if !gone(s, "x1") {
		t.Fatal("x1 not deleted")
	}
	if ev, _ := s.JobEventList(ctx, &backend.JobEventListParams{JobID: "x1"}); len(ev) != 0 {
		t.Fatalf("events of a deleted job: %+v", ev)
	}
	p.QueueRetention = nil
	if n := del(p); n != 1 {
		t.Fatalf("deleted %d", n)
	}
}

// testDirectTwoStores: two stores on the same data (as two processes)
// claim concurrently: every job is claimed exactly once.
func testDirectTwoStores(t *testing.T, h Harness) {
	first := h.NewStore(t)
	stores := []backend.Store{first, h.reopen(t, first)}
	ctx := context.Background()
	const n = 200
	var batch []*backend.JobInsertParams
	for i := range n {
		batch = append(batch, djob(fmt.Sprintf("j%03d", i), "q", "k"))
	}
	insertRes(t, stores[0], batch...)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		s := stores[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := claimOnce(s, backend.JobClaimParams{Queue: "q", WorkerID: fmt.Sprint(w), LeaseID: fmt.Sprint(w), Limit: 7, LeaseDuration: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(res.Jobs) == 0 {
					return
				}
				items := make([]backend.JobCompleteItem, len(res.Jobs))
				for i, j := range res.Jobs {
					items[i] = backend.JobCompleteItem{JobRef: refOf(j)}
				}
				out, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items, EndProbation: true})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for i, j := range res.Jobs {
					if out[i] != nil {
						t.Errorf("complete %s: %v", j.ID, out[i])
					}
					seen[j.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("%s claimed %d times", id, c)
		}
	}
}
