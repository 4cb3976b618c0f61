package backendtest

// Checks of the maintenance part of the contract: lease renewal, expired
// leases, due scheduling, retention deletes and the leader lease.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

func testLeaseRenew(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("a", "lq"), jobParams("b", "lq"))
	js := claimP(t, s, backend.JobClaimParams{Queue: "lq", WorkerID: "w", Limit: 2, LeaseDuration: time.Minute}).Jobs
	if len(js) != 2 {
		t.Fatalf("claimed %v", ids(js))
	}
	old := js[0].Lease.ExpiresAt
	bad := refOf(js[1])
	bad.Fence++
	res, err := s.JobLeaseRenew(ctx, &backend.JobLeaseRenewParams{
		Items: []backend.JobRef{refOf(js[0]), bad, {ID: js[1].ID, LeaseID: "other", Fence: js[1].Fence}}, LeaseDuration: time.Hour})
	if err != nil || len(res) != 3 {
		t.Fatalf("JobLeaseRenew: %v %v", res, err)
	}
	if res[0] != nil || !errors.Is(res[1], engine.ErrLeaseLost) || !errors.Is(res[2], engine.ErrLeaseLost) {
		t.Fatalf("renew results %v, want [nil ErrLeaseLost ErrLeaseLost]", res)
	}
	j := getJob(t, s, js[0].ID)
	if !j.Lease.ExpiresAt.After(old.Add(50 * time.Minute)) {
		t.Fatalf("lease expires %v, was %v: not extended by an hour", j.Lease.ExpiresAt, old)
	}
	if j.Lease.ID != js[0].Lease.ID || j.Fence != js[0].Fence {
		t.Fatalf("renewal changed the lease: %+v", j.Lease)
	}
	if j2 := getJob(t, s, js[1].ID); !j2.Lease.ExpiresAt.Equal(js[1].Lease.ExpiresAt) {
		t.Fatalf("a refused renewal extended the lease")
	}
	// A finished job's lease cannot be renewed.
	finish(t, s, Outcome{JobRef: refOf(js[0]), To: engine.StateAvailable, Event: engine.EventLeaseLost})
	res, err = s.JobLeaseRenew(ctx, &backend.JobLeaseRenewParams{Items: []backend.JobRef{refOf(js[0])}, LeaseDuration: time.Hour})
	if err != nil || len(res) != 1 || !errors.Is(res[0], engine.ErrLeaseLost) {
		t.Fatalf("renewal of a released job: %v %v, want ErrLeaseLost", res, err)
	}
}

func testExpiredLeases(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	beat := func(id string, ttl time.Duration) {
		t.Helper()
		if err := s.WorkerHeartbeat(ctx, &backend.WorkerHeartbeatParams{ID: id, Host: "h", PID: 1, Queues: []string{"x"}, TTL: ttl}); err != nil {
			t.Fatalf("WorkerHeartbeat: %v", err)
		}
	}
	beat("w-alive", time.Hour)
	beat("w-short", 100*time.Millisecond)
	for _, c := range []struct {
		id, worker string
		lease      time.Duration
	}{{"e-dead", "w-dead", 50 * time.Millisecond}, {"e-alive", "w-alive", 50 * time.Millisecond},
		{"e-short", "w-short", 50 * time.Millisecond}, {"e-long", "w-alive", time.Hour}} {
		insert(t, s, jobParams(c.id, "q-"+c.id))
		js := claimP(t, s, backend.JobClaimParams{Queue: "q-" + c.id, WorkerID: c.worker, Limit: 1, LeaseDuration: c.lease}).Jobs
		if len(js) != 1 {
			t.Fatalf("claim %s: %v", c.id, ids(js))
		}
	}
	list := func() map[string]bool {
		t.Helper()
		xs, err := s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 100})
		if err != nil {
			t.Fatalf("JobListExpiredLeases: %v", err)
		}
		m := map[string]bool{}
		for _, x := range xs {
			if x.Job == nil || x.Job.Lease == nil || x.Job.State != engine.StateRunning {
				t.Fatalf("expired lease entry without a running leased job: %+v", x)
			}
			m[x.Job.ID] = x.WorkerAlive
		}
		return m
	}
	var m map[string]bool
	eventually(t, waitLong, func() bool {
		m = list()
		return len(m) == 3 && !m["e-short"]
	}, "three expired leases, w-short's heartbeat expired (last %v)", m)
	if _, ok := m["e-long"]; ok {
		t.Fatal("an unexpired lease is listed")
	}
	if alive, ok := m["e-dead"]; !ok || alive {
		t.Fatalf("e-dead: listed %v alive %v, want listed and not alive", ok, alive)
	}
	if !m["e-alive"] {
		t.Fatal("e-alive: its worker heartbeats, WorkerAlive must be true")
	}
	xs, err := s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 1})
	if err != nil || len(xs) != 1 {
		t.Fatalf("limit 1: %d entries, %v", len(xs), err)
	}
	if err := s.WorkerDelete(ctx, &backend.WorkerDeleteParams{ID: "w-alive"}); err != nil {
		t.Fatalf("WorkerDelete: %v", err)
	}
	if m = list(); m["e-alive"] {
		t.Fatal("worker deleted but still reported alive")
	}
	beat("w-dead", time.Hour)
	if m = list(); !m["e-dead"] {
		t.Fatal("worker heartbeats again but is reported dead")
	}
}

func testScheduleDue(t *testing.T, h Harness) {
	s := h.NewStore(t)
	soon := jobParams("soon", "sd1")
	soon.Delay = 100 * time.Millisecond
	late := jobParams("late", "sd2")
	late.Delay = time.Hour
	insert(t, s, soon, late)
	if j := getJob(t, s, "soon"); j.State != engine.StateScheduled {
		t.Fatalf("soon: %s", describe(j))
	}
	var got []string
	eventually(t, waitLong, func() bool {
		got = append(got, scheduleDue(t, s)...)
		return slices.Contains(got, "sd1")
	}, "JobScheduleDue to report queue sd1")
	if slices.Contains(got, "sd2") {
		t.Fatalf("queues %v: sd2 has no due work", got)
	}
	if j := getJob(t, s, "soon"); j.State != engine.StateAvailable {
		t.Fatalf("soon after due: %s", describe(j))
	}
	if j := getJob(t, s, "late"); j.State != engine.StateScheduled {
		t.Fatalf("late: %s", describe(j))
	}
	if qs := scheduleDue(t, s); len(qs) != 0 {
		t.Fatalf("nothing due, yet JobScheduleDue reports %v", qs)
	}
}

func testDeleteExpired(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("ra-completed", "ra"), jobParams("ra-archived", "ra"), jobParams("rb-completed", "rb"))
	js := claim(t, s, "ra", "w", 2)
	js = append(js, claim(t, s, "rb", "w", 1)...)
	for _, j := range js {
		if strings.HasSuffix(j.ID, "completed") {
			if res, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(j)}}, EndProbation: true}); err != nil || res[0] != nil {
				t.Fatalf("complete %s: %v %v", j.ID, res, err)
			}
		} else {
			finish(t, s, Outcome{JobRef: refOf(j), To: engine.StateArchived, Reason: engine.ReasonSkipped, Event: engine.EventArchived})
		}
	}
	avail := jobParams("ra-available", "ra")
	insert(t, s, avail)
	del := func(p backend.JobDeleteExpiredParams) int {
		t.Helper()
		if p.Limit == 0 {
			p.Limit = 100
		}
		n, err := s.JobDeleteExpired(ctx, &p)
		if err != nil {
			t.Fatalf("JobDeleteExpired: %v", err)
		}
		return n
	}
	present := func(want ...string) {
		t.Helper()
		for _, id := range []string{"ra-completed", "ra-archived", "rb-completed", "ra-available"} {
			if gone(s, id) == slices.Contains(want, id) {
				t.Fatalf("job %s: present %v, want %v", id, !gone(s, id), slices.Contains(want, id))
			}
		}
	}
	// completed: 0 everywhere but rb, which keeps them an hour; archived
	// has no retention: kept forever.
	if n := del(backend.JobDeleteExpiredParams{
		Retention:      map[engine.State]time.Duration{engine.StateCompleted: 0},
		QueueRetention: map[string]map[engine.State]time.Duration{"rb": {engine.StateCompleted: time.Hour}},
	}); n != 1 {
		t.Fatalf("deleted %d, want 1 (ra-completed)", n)
	}
	present("ra-archived", "rb-completed", "ra-available")
	if n := del(backend.JobDeleteExpiredParams{Retention: map[engine.State]time.Duration{engine.StateArchived: time.Hour}}); n != 0 {
		t.Fatalf("archived kept an hour: deleted %d", n)
	}
	if n := del(backend.JobDeleteExpiredParams{Retention: map[engine.State]time.Duration{engine.StateArchived: 0, engine.StateAvailable: 0}}); n != 1 {
		t.Fatalf("archived 0: deleted %d, want 1 (never a non-terminal job)", n)
	}
	present("rb-completed", "ra-available")
	if n := del(backend.JobDeleteExpiredParams{
		QueueRetention: map[string]map[engine.State]time.Duration{"rb": {engine.StateCompleted: 0}},
	}); n != 1 {
		t.Fatalf("queue override alone: deleted %d, want 1 (rb-completed)", n)
	}
	present("ra-available")
}

func testLeaderLease(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	attempt := func(name, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.LeaderAttempt(ctx, &backend.LeaderAttemptParams{Name: name, Holder: holder, TTL: ttl})
		if err != nil {
			t.Fatalf("LeaderAttempt(%s, %s): %v", name, holder, err)
		}
		return ok
	}
	resign := func(name, holder string) {
		t.Helper()
		if err := s.LeaderResign(ctx, &backend.LeaderResignParams{Name: name, Holder: holder}); err != nil {
			t.Fatalf("LeaderResign(%s, %s): %v", name, holder, err)
		}
	}
	if !attempt("t1", "h1", time.Hour) {
		t.Fatal("h1 could not take a free lease")
	}
	if attempt("t1", "h2", time.Hour) {
		t.Fatal("h2 took a lease h1 holds")
	}
	// h1 renews for a short while only; then it stops renewing.
	if !attempt("t1", "h1", 100*time.Millisecond) {
		t.Fatal("h1 could not renew its lease")
	}
	if !attempt("t2", "h2", time.Hour) {
		t.Fatal("leases of different names are not independent")
	}
	eventually(t, waitLong, func() bool { return attempt("t1", "h2", time.Hour) }, "h2 to take t1 once h1's lease expired")
	if attempt("t1", "h1", time.Hour) {
		t.Fatal("h1 took t1 back while h2 holds it")
	}
	resign("t1", "h1") // not the holder: nothing changes
	if attempt("t1", "h1", time.Hour) {
		t.Fatal("a resign by a non-holder released the lease")
	}
	resign("t1", "h2")
	if !attempt("t1", "h1", time.Hour) {
		t.Fatal("h1 could not take t1 after h2 resigned")
	}
	if attempt("t2", "h1", time.Hour) {
		t.Fatal("resigning t1 released t2")
	}
}
