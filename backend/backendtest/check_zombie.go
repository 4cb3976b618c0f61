package backendtest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// snapshot is everything a refused write must leave as it was.
type snapshot struct {
	Job    *engine.Job
	Events []engine.Event
}

func snap(t testing.TB, s backend.Store, id string) snapshot {
	t.Helper()
	return snapshot{Job: getJob(t, s, id), Events: events(t, s, id)}
}

func sameSnapshot(t testing.TB, what string, before, after snapshot) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed the job:\nbefore %+v\n       %+v\nafter  %+v\n       %+v", what, before.Job, before.Events, after.Job, after.Events)
	}
}

// testZombie: worker A's lease expires, the job is released and reclaimed
// by worker B; A's late writes are all refused and change nothing.
func testZombie(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("z", "zq"))
	a := claimP(t, s, backend.JobClaimParams{Queue: "zq", WorkerID: "w-a", LeaseID: "lease-a", Limit: 1, LeaseDuration: 50 * time.Millisecond}).Jobs
	if len(a) != 1 {
		t.Fatalf("A claimed %v", ids(a))
	}
	refA := refOf(a[0])

	// The lease runs out; the reaper (here by hand, as the engine does)
	// releases it: A's process is gone from the store's view.
	var expired *backend.ExpiredLease
	eventually(t, waitLong, func() bool {
		xs, err := s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 10})
		if err != nil {
			t.Fatalf("JobListExpiredLeases: %v", err)
		}
		for i := range xs {
			if xs[i].Job.ID == "z" {
				expired = &xs[i]
				return true
			}
		}
		return false
	}, "A's lease to expire")
	if expired.WorkerAlive {
		t.Fatal("w-a never heartbeat, yet is reported alive")
	}
	if got := refOf(expired.Job); got != refA {
		t.Fatalf("expired lease names %+v, A holds %+v", got, refA)
	}
	finish(t, s, Outcome{JobRef: refA, To: engine.StateAvailable, Event: engine.EventLeaseLost, Actor: "reaper"})

	b := claimP(t, s, backend.JobClaimParams{Queue: "zq", WorkerID: "w-b", LeaseID: "lease-b", Limit: 1, LeaseDuration: time.Hour}).Jobs
	if len(b) != 1 || b[0].Fence != refA.Fence+1 {
		t.Fatalf("B claimed %v, want z with fence %d", ids(b), refA.Fence+1)
	}
	before := snap(t, s, "z")

	// A wakes up and reports, in every way it can.
	res, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refA}}, EndProbation: true})
	if err != nil || len(res) != 1 || !errors.Is(res[0], engine.ErrLeaseLost) {
		t.Fatalf("A's late completion: %v %v, want ErrLeaseLost", res, err)
	}
	sameSnapshot(t, "A's late completion", before, snap(t, s, "z"))
	res, err = s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refA, Delete: true}}, EndProbation: true})
	if err != nil || len(res) != 1 || !errors.Is(res[0], engine.ErrLeaseLost) {
		t.Fatalf("A's late completion with delete: %v %v, want ErrLeaseLost", res, err)
	}
	sameSnapshot(t, "A's late completion with delete", before, snap(t, s, "z"))

	lateFinishes := []Outcome{
		{JobRef: refA, To: engine.StateRetryable, Charge: backend.ChargeAttempt, Delay: time.Hour, Event: engine.EventFailed,
			Error: &engine.AttemptError{Message: "late error"}},
		{JobRef: refA, To: engine.StateRetryable, Charge: backend.ChargeCrash, Event: engine.EventCrashed,
			Error: &engine.AttemptError{Crash: true, Message: "late panic"}},
		{JobRef: refA, To: engine.StateQuarantined, Reason: engine.ReasonQuarantined, Charge: backend.ChargeCrash, Quarantine: true,
			Event: engine.EventQuarantined, Error: &engine.AttemptError{Crash: true, Message: "late quarantine"}},
		{JobRef: refA, To: engine.StateArchived, Reason: engine.ReasonSkipped, Event: engine.EventArchived},
		{JobRef: refA, To: engine.StateScheduled, Delay: time.Hour, Event: engine.EventSnoozed},
		{JobRef: refA, To: engine.StateAvailable, Event: engine.EventShutdown},
		{JobRef: refA, To: engine.StateDeleted},
	}
	for _, p := range lateFinishes {
		if _, err := tryFinish(s, p); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("A's late JobFinish to %s: %v, want ErrLeaseLost", p.To, err)
		}
		sameSnapshot(t, "A's late JobFinish to "+string(p.To), before, snap(t, s, "z"))
	}
	// The same fence with another lease id, and the right lease id with
	// B's fence, are refused too.
	forged := []backend.JobRef{{ID: "z", LeaseID: refA.LeaseID, Fence: b[0].Fence}, {ID: "z", LeaseID: "lease-x", Fence: b[0].Fence}}
	for _, ref := range forged {
		if _, err := tryFinish(s, Outcome{JobRef: ref, To: engine.StateArchived, Reason: engine.ReasonSkipped}); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("forged ref %+v: %v, want ErrLeaseLost", ref, err)
		}
	}
	rr, err := s.JobLeaseRenew(ctx, &backend.JobLeaseRenewParams{Items: []backend.JobRef{refA}, LeaseDuration: time.Hour})
	if err != nil || len(rr) != 1 || !errors.Is(rr[0], engine.ErrLeaseLost) {
		t.Fatalf("A's late renewal: %v %v, want ErrLeaseLost", rr, err)
	}
	sameSnapshot(t, "A's late writes", before, snap(t, s, "z"))
	if _, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "fp-z"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a refused quarantine left a record: %v", err)
	}

	// B's own outcome still applies.
	res, err = s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(b[0])}}, EndProbation: true})
	if err != nil || res[0] != nil {
		t.Fatalf("B's completion: %v %v", res, err)
	}
	if j := getJob(t, s, "z"); j.State != engine.StateCompleted || j.Attempt != 0 || j.CrashAttempt != 0 || j.Fence != 2 {
		t.Fatalf("after B: %s", describe(j))
	}
}
