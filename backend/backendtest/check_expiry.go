package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// Expiry: the dead, quarantined and undecodable jobs retention deletes
// within a window (`expires<D`), matched as the sweep reads them.

func expiryChecks() []check {
	return []check{
		{name: "CutsMatchAsTheReference", fn: testExpiryCuts},
		{name: "EngineFlagsWhatRetentionTakes", fn: testExpiryEngine},
	}
}

// testExpiryCuts: a store lists and counts, for resolved cuts, exactly the
// jobs sluicetype.ExpiryCut.Holds selects — each cut's state, its queues
// or the queues it leaves out, and a time between two batches of deaths —
// and none for no cut.
func testExpiryCuts(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	die := func(id, queue string, to engine.State) {
		j := running(t, s, id, func(p *backend.JobInsertParams) { p.Queue = queue })
		o := Outcome{JobRef: refOf(j), To: to, Charge: backend.ChargeAttempt, Event: engine.EventArchived,
			Error: &engine.AttemptError{Message: "gone " + id}, ErrorPattern: "gone", Reason: engine.ReasonAttemptsExhausted}
		switch to {
		case engine.StateQuarantined:
			quarantineJob(t, s, j, "crash "+id)
			return
		case engine.StateUndecodable:
			o.Event, o.Reason = engine.EventUndecodable, engine.ReasonUndecodable
		case engine.StateCompleted:
			o = Outcome{JobRef: refOf(j), To: to, Event: engine.EventCompleted}
		}
		finish(t, s, o)
	}
	batch := func(n int) {
		for _, q := range []string{"keep", "short"} {
			die(fmt.Sprintf("a%d-%s", n, q), q, engine.StateArchived)
		}
		die(fmt.Sprintf("q%d", n), "keep", engine.StateQuarantined)
		die(fmt.Sprintf("u%d", n), "keep", engine.StateUndecodable)
		die(fmt.Sprintf("c%d", n), "keep", engine.StateCompleted)
	}
	batch(0)
	// The two batches die apart on every store's clock: the cut between
	// them is strictly after the first's times and before the second's.
	first := storeNow(t, s)
	for storeNow(t, s).Sub(first) < 5*time.Millisecond {
		time.Sleep(time.Millisecond)
	}
	mid := storeNow(t, s)
	for storeNow(t, s).Sub(mid) < 5*time.Millisecond {
		time.Sleep(time.Millisecond)
	}
	batch(1)
	after := storeNow(t, s).Add(time.Second)

	var all []*engine.Job
	for _, id := range []string{"a0-keep", "a0-short", "q0", "u0", "c0", "a1-keep", "a1-short", "q1", "u1", "c1"} {
		all = append(all, getJob(t, s, id))
	}
	d := time.Hour
	cases := []struct {
		name string
		cuts []sluicetype.ExpiryCut
	}{
		{"archived but short, to mid; short, all", []sluicetype.ExpiryCut{
			{State: engine.StateArchived, NotQueues: []string{"short"}, Before: mid},
			{State: engine.StateArchived, Queues: []string{"short"}, Before: after}}},
		{"quarantined and undecodable to mid", []sluicetype.ExpiryCut{
			{State: engine.StateQuarantined, Before: mid}, {State: engine.StateUndecodable, Before: mid}}},
		{"a queue of its own only", []sluicetype.ExpiryCut{{State: engine.StateArchived, Queues: []string{"keep"}, Before: after}}},
		{"no cut", nil},
	}
	for _, tc := range cases {
		f := sluicetype.Filter{ExpiresWithin: &d, Expiring: tc.cuts}
		var want []string
		for _, j := range all {
			if f.Matches(j) {
				want = append(want, j.ID)
			}
		}
		rows, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: f, Limit: 100})
		if err != nil {
			t.Fatalf("%s: JobListPage: %v", tc.name, err)
		}
		if got := sorted(jobIDs(rows)); !slices.Equal(got, sorted(want)) {
			t.Fatalf("%s: listed %v, want %v", tc.name, got, sorted(want))
		}
		n, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: f, Max: 100})
		if err != nil {
			t.Fatalf("%s: JobCountMatching: %v", tc.name, err)
		}
		if n != int64(len(want)) {
			t.Fatalf("%s: counted %d, want %d", tc.name, n, len(want))
		}
	}
	// A reference that ignored the cuts would pass the cases above only
	// if they selected everything: the first selects some of each state.
	f := sluicetype.Filter{ExpiresWithin: &d, Expiring: cases[0].cuts}
	if !f.Matches(all[0]) || f.Matches(all[5]) || !f.Matches(all[6]) || f.Matches(all[2]) {
		t.Fatalf("the reference does not split the batches: %v %v %v %v", f.Matches(all[0]), f.Matches(all[5]), f.Matches(all[6]), f.Matches(all[2]))
	}
}

// testExpiryEngine: through the engine's control (and the API's, in its
// variant), expires<D lists and counts the jobs retention takes within D
// under the engine's own retention — a queue's override apart from the
// default, a state kept forever never — and groups their errors; a bulk
// action refuses it, since its selector would take other jobs by the time
// it runs.
func testExpiryEngine(t *testing.T, h Harness) {
	f := newCtl(t, h, func(c *engine.Config) {
		c.Retention = map[engine.State]time.Duration{
			engine.StateArchived: 14 * 24 * time.Hour, engine.StateQuarantined: engine.Forever,
			engine.StateCompleted: time.Hour,
		}
		c.QueueRetention = map[string]map[engine.State]time.Duration{"email": {engine.StateArchived: time.Hour}}
	})
	billing := f.dead(t, "billing", "b", 4, "dial tcp: connection refused")
	email := f.dead(t, "email", "e", 3, "template not found")
	enqueue(t, f.e, engine.EnqueueParams{ID: "ok-0", Queue: "misc", Kind: "ok"})
	waitState(t, f.s, "ok-0", engine.StateCompleted)

	cases := []struct {
		q    string
		want []string
	}{
		{"expires<61m", email}, // the hour's queue, a minute ahead
		{"expires<59m", nil},   // none dies within the hour yet
		{"expires<15d", append(slices.Clone(billing), email...)}, // the default's too
		{"expires<15d queue:billing", billing},
		{"expires<15d state:completed", nil}, // completed jobs are not warned of
	}
	for _, tc := range cases {
		got := sorted(jobIDs(f.listAll(t, mustQuery(t, tc.q), 50)))
		if !slices.Equal(got, sorted(tc.want)) {
			t.Fatalf("%s: listed %v, want %v", tc.q, got, sorted(tc.want))
		}
		c, err := f.c.CountJobs(f.ctx, engine.CountJobsParams{Filter: mustQuery(t, tc.q)})
		if err != nil {
			t.Fatalf("%s: CountJobs: %v", tc.q, err)
		}
		var n int64
		for _, v := range c.States {
			n += v
		}
		if n != int64(len(tc.want)) || c.States[engine.StateCompleted] != 0 {
			t.Fatalf("%s: counted %v, want %d in archived", tc.q, c.States, len(tc.want))
		}
	}
	groups, err := f.c.ErrorGroups(f.ctx, mustQuery(t, "expires<61m"))
	if err != nil {
		t.Fatalf("ErrorGroups(expires<61m): %v", err)
	}
	if len(groups) != 1 || groups[0].Count != int64(len(email)) {
		t.Fatalf("ErrorGroups(expires<61m) = %+v, want the email group of %d", groups, len(email))
	}
	_, err = f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "expires<61m"), DryRun: true})
	if !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a bulk retry by expires<61m: %v, want ErrInvalid", err)
	}
}
