package backendtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// testErrorGroupFollowsTheJob carries jobs that failed (so they keep their
// last error's pattern) through their retry: promoted, claimed two ways
// (with and without a kind filter), renewed, completed and deleted on
// completion. At each step the error groups of every state count them
// where they are and nowhere else, and a list by the group's pattern
// finds them in their state: the claim's and the completion's fast paths
// move the group's entries as the general path does.
func testErrorGroupFollowsTheJob(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	const pattern = "upstream timed out after <n>ms"
	states := []engine.State{engine.StateRetryable, engine.StateAvailable, engine.StateRunning, engine.StateCompleted}
	// want: the jobs each state's group must hold (by id).
	check := func(step string, want map[engine.State][]string) {
		t.Helper()
		for _, st := range states {
			gs, err := s.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: engine.Filter{States: []engine.State{st}}})
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, g := range gs {
				if g.Pattern != pattern {
					t.Fatalf("%s: %s group %q, want only %q", step, st, g.Pattern, pattern)
				}
				n += g.Count
			}
			if n != int64(len(want[st])) {
				t.Fatalf("%s: %s error groups count %d jobs, want %d (%v)", step, st, n, len(want[st]), want[st])
			}
			got := listIDs(t, s, engine.Filter{States: []engine.State{st}, ErrorPattern: pattern})
			w := slices.Clone(want[st])
			slices.Sort(w)
			if !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
				t.Fatalf("%s: %s jobs of the group %v, want %v", step, st, got, w)
			}
		}
	}
	var ids []string
	for i, id := range []string{"eg-a", "eg-b", "eg-c", "eg-d"} {
		p := jobParams(id, "eg-q")
		if i%2 == 1 {
			p.Kind = "eg-other"
		}
		insert(t, s, p)
		ids = append(ids, id)
	}
	var failed []*engine.Job
	both := map[string]int{jobParams("x", "x").Kind: 1, "eg-other": 1}
	failed = append(failed, claimP(t, s, backend.JobClaimParams{Queue: "eg-q", WorkerID: "w1", Limit: 10, Kinds: both}).Jobs...)
	if len(failed) != 4 {
		t.Fatalf("claimed %v", ids)
	}
	for _, c := range failed {
		p := Outcome{JobRef: refOf(c), To: engine.StateRetryable, Charge: backend.ChargeAttempt, Delay: time.Millisecond,
			Error: &engine.AttemptError{Message: "upstream timed out after 3000ms"}, ErrorPattern: pattern,
			Event: engine.EventFailed, Actor: "w1"}.Plan(c)
		if _, err := s.JobFinish(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	check("failed", map[engine.State][]string{engine.StateRetryable: ids})
	time.Sleep(5 * time.Millisecond)
	scheduleDue(t, s)
	check("promoted", map[engine.State][]string{engine.StateAvailable: ids})

	// One claim takes the default kind's jobs only, one takes the rest.
	res := claimP(t, s, backend.JobClaimParams{Queue: "eg-q", WorkerID: "w2", LeaseID: "l2", Limit: 10,
		LeaseDuration: time.Minute, Kinds: map[string]int{jobParams("x", "x").Kind: 1}})
	first := res.Jobs
	if got := sortedIDs(first); !slices.Equal(got, []string{"eg-a", "eg-c"}) {
		t.Fatalf("claim by kind took %v", got)
	}
	check("half claimed", map[engine.State][]string{engine.StateAvailable: {"eg-b", "eg-d"}, engine.StateRunning: {"eg-a", "eg-c"}})
	// The second claim names no kind (any kind), as a worker of every
	// kind claims.
	res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "eg-q", WorkerID: "w2", LeaseID: "l3", Limit: 10, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	second := res.Jobs
	check("claimed", map[engine.State][]string{engine.StateRunning: ids})
	for _, j := range append(slices.Clone(first), second...) {
		if len(j.Errors) != 1 || j.LastErrorText() != "upstream timed out after 3000ms" {
			t.Fatalf("claimed %s with errors %+v, last %q", j.ID, j.Errors, j.LastErrorText())
		}
	}

	// A renewal leaves the group's entries as they are.
	var renew []backend.JobRef
	for _, j := range first {
		renew = append(renew, refOf(j))
	}
	out, err := s.JobLeaseRenew(ctx, &backend.JobLeaseRenewParams{Items: renew, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e != nil {
			t.Fatal(e)
		}
	}
	check("renewed", map[engine.State][]string{engine.StateRunning: ids})

	// Complete three (one of them deleted on completion) and leave one running.
	items := []backend.JobCompleteItem{{JobRef: refOf(first[0])}, {JobRef: refOf(second[0])}, {JobRef: refOf(second[1]), Delete: true}}
	out, err = s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items, EndProbation: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e != nil {
			t.Fatal(e)
		}
	}
	check("completed", map[engine.State][]string{engine.StateRunning: {first[1].ID},
		engine.StateCompleted: {first[0].ID, second[0].ID}})
	if !gone(s, second[1].ID) {
		t.Fatalf("%s deleted on completion is still there", second[1].ID)
	}
}
