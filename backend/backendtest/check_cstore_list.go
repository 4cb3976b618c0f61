package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// controlStoreChecks drive the ControlStore methods directly, against the
// ground truth of the harness where the store's own reads could agree
// with a wrong write: listing and counting, the maintained counters,
// operations and their fencing, the operator actions and paused queues.
func controlStoreChecks() []check {
	return []check{
		{name: "JobListFilterFields", fn: testCStoreFilterFields},
		{name: "OversizedFilterIsNoOutage", fn: testCStoreOversizedFilterNoOutage},
		{name: "JobListKeysetBothWays", fn: testCStoreListKeysetBothWays},
		{name: "JobCountCapAndAsOf", fn: testCStoreCountCapAndAsOf},
		{name: "CountersExactAfterEveryWrite", fn: testCStoreCountersExact},
		{name: "JobCountReconcileRepairsDrift", fn: testCStoreReconcileRepairsDrift},
		{name: "OperationFencingClaimAndList", fn: testCStoreOperationFencing},
		{name: "BulkTakesOnlyEarlierDeaths", fn: testCStoreBulkTakesOnlyEarlierDeaths},
		{name: "BulkWindowsAndRefusals", fn: testCStoreBulkWindowsAndRefusals},
		{name: "OperationUnrunnableFails", fn: testCStoreOperationUnrunnableFails},
		{name: "BulkSparseEveryAction", fn: testCStoreBulkSparseEveryAction},
		{name: "BulkQuarantineAndSuperseded", fn: testCStoreBulkQuarantineAndSuperseded},
		{name: "JobCountWithoutSuperseded", fn: testCStoreCountWithoutSuperseded},
		{name: "JobCountStatesAndQueuesAsOf", fn: testCStoreCountStatesAndQueuesAsOf},
		{name: "OperatorActions", fn: testCStoreOperatorActions},
		{name: "PausedQueueNotClaimed", fn: testCStorePausedQueueNotClaimed},
		{name: "ErrorGroupFollowsTheJob", fn: testErrorGroupFollowsTheJob},
	}
}

// listIDs lists the ids of the jobs matching f, sorted.
func listIDs(t testing.TB, s backend.Store, f engine.Filter) []string {
	t.Helper()
	js, err := s.JobListPage(context.Background(), &backend.JobListPageParams{Filter: f, Limit: 1000})
	if err != nil {
		t.Fatalf("JobListPage(%s): %v", f, err)
	}
	return sortedIDs(js)
}

func testCStoreFilterFields(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	ctx := context.Background()
	mk := func(id, queue, kind, payload, meta string, tags ...string) *backend.JobInsertParams {
		j := djob(id, queue, kind)
		j.Payload = json.RawMessage(payload)
		if meta != "" {
			j.Metadata = json.RawMessage(meta)
		}
		j.Tags = tags
		return j
	}
	insertRes(t, s,
		mk("a", "billing", "charge", `{"customer":{"id":42},"vip":true,"name":"Ann"}`, `{"tenant":"acme"}`, "red", "blue"),
		mk("b", "billing", "charge", `{"customer":{"id":"42"},"vip":false,"name":"Bob"}`, `{"tenant":"globex"}`, "red"),
		mk("c", "billing", "refund", `{"customer":{"id":7},"odd-key":"x y","name":"O'Brien"}`, ``, "green"),
	)
	kill(t, s, "billing", 3, engine.StateArchived, func(i int) string {
		return []string{"dial tcp 10.0.0.1:5432: connection refused", "Timeout after 30s", "timeout after 31s"}[i]
	})
	time.Sleep(time.Millisecond)
	mid := storeNow(t, s)
	time.Sleep(time.Millisecond)
	insertRes(t, s, mk("d", "email", "send", `{"to":"x@example.com","n":3.5}`, `{"tenant":"acme"}`))
	d := getJob(t, s, "d")

	arch := []engine.State{engine.StateArchived}
	for _, tc := range []struct {
		name string
		f    engine.Filter
		want string
	}{
		{"none", engine.Filter{}, "a b c d"},
		{"state", engine.Filter{States: arch}, "a b c"},
		{"states", engine.Filter{States: []engine.State{engine.StateArchived, engine.StateAvailable}}, "a b c d"},
		{"hot state", engine.Filter{States: []engine.State{engine.StateAvailable}}, "d"},
		{"queue", engine.Filter{Queues: []string{"email"}}, "d"},
		{"queues", engine.Filter{Queues: []string{"email", "billing"}}, "a b c d"},
		{"kind", engine.Filter{Kinds: []string{"refund", "send"}}, "c d"},
		{"ids", engine.Filter{IDs: []string{"a", "d", "zz"}}, "a d"},
		{"id and state", engine.Filter{IDs: []string{"a", "d"}, States: arch}, "a"},
		{"fingerprint", engine.Filter{Fingerprint: "fp-b"}, "b"},
		{"tag", engine.Filter{Tags: []string{"red"}}, "a b"},
		{"tags any of", engine.Filter{Tags: []string{"blue", "green"}}, "a c"},
		{"error substring", engine.Filter{Error: "connection refused"}, "a"},
		{"error case-sensitive", engine.Filter{Error: "timeout"}, "c"},
		{"error pattern", engine.Filter{ErrorPattern: engine.NormalizeError("timeout after 5s")}, "c"},
		{"payload number", engine.Filter{Payload: []engine.PathMatch{{Path: "customer.id", Value: "42"}}}, "a b"},
		{"payload number not string", engine.Filter{Payload: []engine.PathMatch{{Path: "customer.id", Value: `"42"`}}}, ""},
		{"payload float", engine.Filter{Payload: []engine.PathMatch{{Path: "n", Value: "3.5"}}}, "d"},
		{"payload bool", engine.Filter{Payload: []engine.PathMatch{{Path: "vip", Value: "true"}}}, "a"},
		{"payload false", engine.Filter{Payload: []engine.PathMatch{{Path: "vip", Value: "false"}}}, "b"},
		{"payload string", engine.Filter{Payload: []engine.PathMatch{{Path: "name", Value: "O'Brien"}}}, "c"},
		{"payload dash key", engine.Filter{Payload: []engine.PathMatch{{Path: "odd-key", Value: "x y"}}}, "c"},
		{"payload missing", engine.Filter{Payload: []engine.PathMatch{{Path: "customer.nope", Value: "42"}}}, ""},
		{"payload two", engine.Filter{Payload: []engine.PathMatch{{Path: "customer.id", Value: "42"}, {Path: "vip", Value: "true"}}}, "a"},
		{"payload injection", engine.Filter{Payload: []engine.PathMatch{{Path: "name", Value: "x' OR '1'='1"}}}, ""},
		{"meta", engine.Filter{Meta: []engine.PathMatch{{Path: "tenant", Value: "acme"}}}, "a d"},
		{"error injection", engine.Filter{Error: "') OR 1=1 --"}, ""},
		{"created after", engine.Filter{CreatedAfter: &mid}, "d"},
		{"created before", engine.Filter{CreatedBefore: &mid}, "a b c"},
		{"created at bound", engine.Filter{CreatedAfter: &d.CreatedAt}, ""},
		{"finalized before", engine.Filter{FinalizedBefore: &mid}, "a b c"},
		{"finalized after", engine.Filter{FinalizedAfter: &mid}, ""},
		{"and", engine.Filter{States: arch, Kinds: []string{"charge"}, Tags: []string{"red"}, Meta: []engine.PathMatch{{Path: "tenant", Value: "globex"}}}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := strings.Fields(tc.want)
			if want == nil {
				want = []string{}
			}
			if got := listIDs(t, s, tc.f); !slices.Equal(got, want) {
				t.Errorf("JobListPage: %v, want %v", got, want)
			}
			n, capped, err := cs.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: tc.f})
			if err != nil || capped || n != int64(len(want)) {
				t.Errorf("JobCountMatching: %d %v %v, want %d", n, capped, err, len(want))
			}
		})
	}

	// Superseded jobs are left out when asked.
	if _, err := retryWithInput(t, s, withInputParams{ID: "a", NewID: "a2",
		Payload: json.RawMessage(`{"customer":{"id":43}}`), Fingerprint: "fp-a2", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	js, err := cs.JobListPage(ctx, &backend.JobListPageParams{Filter: engine.Filter{States: arch}, ExcludeSuperseded: true, Limit: 10})
	if err != nil || !slices.Equal(sortedIDs(js), []string{"b", "c"}) {
		t.Fatalf("exclude superseded: %v %v", ids(js), err)
	}
	if n, _, _ := cs.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: engine.Filter{States: arch}, ExcludeSuperseded: true}); n != 2 {
		t.Fatalf("count excluding superseded: %d", n)
	}
	// A path that could leave the quoted key is refused.
	if _, err := cs.JobListPage(ctx, &backend.JobListPageParams{Filter: engine.Filter{Payload: []engine.PathMatch{{Path: `a".b`, Value: "1"}}}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("bad path: %v", err)
	}
}

// testCStoreListKeysetBothWays pages through a list of several states
// forwards and back.
func testCStoreListKeysetBothWays(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	ctx := context.Background()
	var all []*backend.JobInsertParams
	for i := range 12 {
		all = append(all, djob(fmt.Sprintf("d%02d", i), "dead", "k"))
	}
	insertRes(t, s, all...)
	kill(t, s, "dead", 12, engine.StateArchived, func(int) string { return "x" })
	for i := range 5 {
		insertRes(t, s, djob(fmt.Sprintf("w%02d", i), "wait", "k"))
	}
	res := claimRaw(t, s, backend.JobClaimParams{Queue: "wait", Limit: 2}) // two running, three available
	if len(res.Jobs) != 2 {
		t.Fatal(res.Jobs)
	}
	// The truth: newest first by (state_changed_at, id).
	full, err := cs.JobListPage(ctx, &backend.JobListPageParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != 17 {
		t.Fatalf("%d rows", len(full))
	}
	for i := 1; i < len(full); i++ {
		a, b := full[i-1], full[i]
		if a.StateChangedAt.Before(b.StateChangedAt) || (a.StateChangedAt.Equal(b.StateChangedAt) && a.ID < b.ID) {
			t.Fatalf("out of order at %d: %s %s", i, a.ID, b.ID)
		}
		if a.Payload != nil {
			t.Fatal("list rows carry payloads")
		}
	}
	for _, f := range []engine.Filter{{}, {States: []engine.State{engine.StateArchived, engine.StateRunning, engine.StateAvailable}}} {
		// Forwards, 5 at a time.
		var fwd []*engine.Job
		var after *engine.Cursor
		for {
			page, err := cs.JobListPage(ctx, &backend.JobListPageParams{Filter: f, After: after, Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			fwd = append(fwd, page...)
			if len(page) < 5 {
				break
			}
			last := page[len(page)-1]
			after = &engine.Cursor{At: last.StateChangedAt, ID: last.ID}
		}
		if !slices.Equal(ids(fwd), ids(full)) {
			t.Fatalf("forwards %v\nwant %v", ids(fwd), ids(full))
		}
		// Backwards from the 11th row: rows 10..6, oldest first.
		k := full[10]
		back, err := cs.JobListPage(ctx, &backend.JobListPageParams{Filter: f, After: &engine.Cursor{At: k.StateChangedAt, ID: k.ID}, Reverse: true, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		want := ids(full[5:10])
		slices.Reverse(want)
		if !slices.Equal(ids(back), want) {
			t.Fatalf("backwards %v, want %v", ids(back), want)
		}
	}
}

func testCStoreCountCapAndAsOf(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	ctx := context.Background()
	for i := range 10 {
		insertRes(t, s, djob(fmt.Sprintf("j%d", i), "q", "k"))
	}
	f := engine.Filter{Queues: []string{"q"}}
	for _, tc := range []struct {
		max    int64
		n      int64
		capped bool
	}{{0, 10, false}, {5, 5, true}, {9, 9, true}, {10, 10, false}, {100, 10, false}} {
		n, capped, err := cs.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: f, Max: tc.max})
		if err != nil || n != tc.n || capped != tc.capped {
			t.Errorf("Max %d: %d %v %v, want %d %v", tc.max, n, capped, err, tc.n, tc.capped)
		}
	}
	asOf := getJob(t, s, "j9").StateChangedAt
	time.Sleep(time.Millisecond)
	kill(t, s, "q", 10, engine.StateArchived, func(int) string { return "x" })
	insertRes(t, s, djob("late", "q", "k"))
	n, _, err := cs.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: f, AsOf: &asOf})
	if err != nil || n != 0 {
		t.Fatalf("as of before the deaths: %d %v", n, err)
	}
	now := storeNow(t, s)
	n, _, _ = cs.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: f, AsOf: &now})
	if n != 11 {
		t.Fatalf("as of now: %d", n)
	}
}
