package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// kill claims the given jobs of queue (all of its available jobs must be
// these) and finishes each in state to with an error message of msg(i).
func kill(t testing.TB, s *sqlite.Store, queue string, n int, to engine.State, msg func(i int) string) []*engine.Job {
	t.Helper()
	res := claim(t, s, engine.JobClaimParams{Queue: queue, Limit: n})
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
		d, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: to, Reason: reason,
			Charge: engine.ChargeAttempt, Error: &engine.AttemptError{Message: m},
			ErrorPattern: engine.NormalizeError(m), Event: engine.EventArchived, Actor: "w1"})
		if err != nil {
			t.Fatalf("kill %s: %v", j.ID, err)
		}
		out[i] = d
	}
	return out
}

// rawDB opens the store's file on its own connection, for checks against
// the jobs themselves.
func rawDB(t testing.TB, s *sqlite.Store) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", s.Path()+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// truth counts the jobs per queue and state with GROUP BY.
func truth(t testing.TB, db *sql.DB) map[string]map[engine.State]int64 {
	t.Helper()
	rows, err := db.Query(`SELECT queue, state, count(*) FROM jobs GROUP BY queue, state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[engine.State]int64{}
	for rows.Next() {
		var q, st string
		var n int64
		if err := rows.Scan(&q, &st, &n); err != nil {
			t.Fatal(err)
		}
		if out[q] == nil {
			out[q] = map[engine.State]int64{}
		}
		out[q][engine.State(st)] = n
	}
	return out
}

func countsEqual(a, b map[string]map[engine.State]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[engine.State]int64) bool { return maps.Equal(x, y) })
}

// checkCounts compares the maintained counters with the jobs.
func checkCounts(t testing.TB, s *sqlite.Store, db *sql.DB, step string) {
	t.Helper()
	got, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	if want := truth(t, db); !countsEqual(got, want) {
		t.Fatalf("after %s: counters %v, jobs %v", step, got, want)
	}
}

func listIDs(t testing.TB, s *sqlite.Store, f engine.Filter) []string {
	t.Helper()
	js, err := s.JobList(ctx, &engine.JobListParams{Filter: f, Limit: 1000})
	if err != nil {
		t.Fatalf("JobList(%s): %v", f, err)
	}
	out := ids(js)
	slices.Sort(out)
	return out
}

func TestFilterFields(t *testing.T) {
	s := sqlitetest.New(t)
	mk := func(id, queue, kind, payload, meta string, tags ...string) *engine.JobInsertParams {
		j := job(id, queue, kind)
		j.Payload = json.RawMessage(payload)
		if meta != "" {
			j.Metadata = json.RawMessage(meta)
		}
		j.Tags = tags
		return j
	}
	insert(t, s,
		mk("a", "billing", "charge", `{"customer":{"id":42},"vip":true,"name":"Ann"}`, `{"tenant":"acme"}`, "red", "blue"),
		mk("b", "billing", "charge", `{"customer":{"id":"42"},"vip":false,"name":"Bob"}`, `{"tenant":"globex"}`, "red"),
		mk("c", "billing", "refund", `{"customer":{"id":7},"odd-key":"x y","name":"O'Brien"}`, ``, "green"),
	)
	kill(t, s, "billing", 3, engine.StateArchived, func(i int) string {
		return []string{"dial tcp 10.0.0.1:5432: connection refused", "Timeout after 30s", "timeout after 31s"}[i]
	})
	time.Sleep(time.Millisecond)
	mid := time.Now()
	time.Sleep(time.Millisecond)
	insert(t, s, mk("d", "email", "send", `{"to":"x@example.com","n":3.5}`, `{"tenant":"acme"}`))
	d := get(t, s, "d")

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
				t.Errorf("JobList: %v, want %v", got, want)
			}
			n, capped, err := s.JobCount(ctx, &engine.JobCountParams{Filter: tc.f})
			if err != nil || capped || n != int64(len(want)) {
				t.Errorf("JobCount: %d %v %v, want %d", n, capped, err, len(want))
			}
		})
	}

	// Superseded jobs are left out when asked.
	if _, err := s.JobRetryWithInput(ctx, &engine.JobRetryWithInputParams{ID: "a", NewID: "a2",
		Payload: json.RawMessage(`{"customer":{"id":43}}`), Fingerprint: "fp-a2", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	js, err := s.JobList(ctx, &engine.JobListParams{Filter: engine.Filter{States: arch}, ExcludeSuperseded: true, Limit: 10})
	if err != nil || !slices.Equal(sortedIDs(js), []string{"b", "c"}) {
		t.Fatalf("exclude superseded: %v %v", ids(js), err)
	}
	if n, _, _ := s.JobCount(ctx, &engine.JobCountParams{Filter: engine.Filter{States: arch}, ExcludeSuperseded: true}); n != 2 {
		t.Fatalf("count excluding superseded: %d", n)
	}
	// A path that could leave the quoted key is refused.
	if _, err := s.JobList(ctx, &engine.JobListParams{Filter: engine.Filter{Payload: []engine.PathMatch{{Path: `a".b`, Value: "1"}}}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("bad path: %v", err)
	}
}

func sortedIDs(js []*engine.Job) []string {
	out := ids(js)
	slices.Sort(out)
	return out
}

// TestListKeysetBothWays pages through a list of several states (one index
// branch each, merged) forwards and back.
func TestListKeysetBothWays(t *testing.T) {
	s := sqlitetest.New(t)
	var all []*engine.JobInsertParams
	for i := range 12 {
		all = append(all, job(fmt.Sprintf("d%02d", i), "dead", "k"))
	}
	insert(t, s, all...)
	kill(t, s, "dead", 12, engine.StateArchived, func(int) string { return "x" })
	for i := range 5 {
		insert(t, s, job(fmt.Sprintf("w%02d", i), "wait", "k"))
	}
	res := claim(t, s, engine.JobClaimParams{Queue: "wait", Limit: 2}) // two running, three available
	if len(res.Jobs) != 2 {
		t.Fatal(res.Jobs)
	}
	// The truth: newest first by (state_changed_at, id).
	full, err := s.JobList(ctx, &engine.JobListParams{Limit: 100})
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
			page, err := s.JobList(ctx, &engine.JobListParams{Filter: f, After: after, Limit: 5})
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
		back, err := s.JobList(ctx, &engine.JobListParams{Filter: f, After: &engine.Cursor{At: k.StateChangedAt, ID: k.ID}, Reverse: true, Limit: 5})
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

func TestCountCapAndAsOf(t *testing.T) {
	s := sqlitetest.New(t)
	for i := range 10 {
		insert(t, s, job(fmt.Sprintf("j%d", i), "q", "k"))
	}
	f := engine.Filter{Queues: []string{"q"}}
	for _, tc := range []struct {
		max    int64
		n      int64
		capped bool
	}{{0, 10, false}, {5, 5, true}, {9, 9, true}, {10, 10, false}, {100, 10, false}} {
		n, capped, err := s.JobCount(ctx, &engine.JobCountParams{Filter: f, Max: tc.max})
		if err != nil || n != tc.n || capped != tc.capped {
			t.Errorf("Max %d: %d %v %v, want %d %v", tc.max, n, capped, err, tc.n, tc.capped)
		}
	}
	asOf := get(t, s, "j9").StateChangedAt
	time.Sleep(time.Millisecond)
	kill(t, s, "q", 10, engine.StateArchived, func(int) string { return "x" })
	insert(t, s, job("late", "q", "k"))
	n, _, err := s.JobCount(ctx, &engine.JobCountParams{Filter: f, AsOf: &asOf})
	if err != nil || n != 0 {
		t.Fatalf("as of before the deaths: %d %v", n, err)
	}
	now := time.Now()
	n, _, _ = s.JobCount(ctx, &engine.JobCountParams{Filter: f, AsOf: &now})
	if n != 11 {
		t.Fatalf("as of now: %d", n)
	}
}

// TestCountersExact drives every kind of write and compares the counters
// with a GROUP BY after each.
func TestCountersExact(t *testing.T) {
	s := sqlitetest.New(t)
	db := rawDB(t, s)
	check := func(step string) { t.Helper(); checkCounts(t, s, db, step) }

	later := job("later", "a", "k")
	later.Delay = time.Hour
	soon := job("soon", "a", "k")
	soon.Delay = time.Millisecond
	past := time.Now().Add(-time.Minute)
	expired := job("expired", "b", "k")
	expired.Deadline = &past
	insert(t, s, job("a1", "a", "k"), job("a2", "a", "k"), job("a3", "a", "k"), later, soon, expired,
		job("b1", "b", "k"), job("b2", "b", "k"))
	insert(t, s, job("a1", "a", "k")) // the same job again: no change
	check("insert")

	res := claim(t, s, engine.JobClaimParams{Queue: "b", Limit: 1})
	if len(res.Dead) != 1 || len(res.Jobs) != 1 {
		t.Fatalf("claim b: %v %v", ids(res.Dead), ids(res.Jobs))
	}
	check("claim with a deadline archive")
	out, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: []engine.JobCompleteItem{{JobRef: ref(res.Jobs[0])}}})
	if err != nil || out[0] != nil {
		t.Fatal(err, out)
	}
	check("complete")

	res = claim(t, s, engine.JobClaimParams{Queue: "a", Limit: 3})
	r := res.Jobs
	if _, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: []engine.JobCompleteItem{
		{JobRef: ref(r[0]), Delete: true}, {JobRef: ref(r[0]), Delete: true}}}); err != nil {
		t.Fatal(err)
	}
	check("complete with delete (twice)")
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(r[1]), To: engine.StateRetryable, Charge: engine.ChargeAttempt,
		Error: &engine.AttemptError{Message: "e"}}); err != nil {
		t.Fatal(err)
	}
	check("finish retryable")
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(r[2]), To: engine.StateDeleted}); err != nil {
		t.Fatal(err)
	}
	check("finish deleted")
	time.Sleep(5 * time.Millisecond)
	if _, err := s.JobScheduleDue(ctx, &engine.JobScheduleDueParams{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	check("schedule due")

	// Quarantine with holds, then release.
	poison := func(id, queue string) *engine.JobInsertParams {
		j := job(id, queue, "k")
		j.Fingerprint = "poison"
		return j
	}
	pl := poison("p-later", "c")
	pl.Delay = time.Hour
	insert(t, s, poison("p1", "c"), poison("p2", "d"), pl)
	res = claim(t, s, engine.JobClaimParams{Queue: "c", Limit: 1})
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(res.Jobs[0]), To: engine.StateQuarantined,
		Charge: engine.ChargeCrash, Quarantine: true, Error: &engine.AttemptError{Crash: true, Message: "boom"}}); err != nil {
		t.Fatal(err)
	}
	check("quarantine with holds")
	if _, err := s.JobRelease(ctx, &engine.JobActionParams{ID: "p2", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	check("release one job")
	if _, err := s.FingerprintRelease(ctx, &engine.FingerprintReleaseParams{Fingerprint: "poison"}); err != nil {
		t.Fatal(err)
	}
	check("release fingerprint")

	// Operator actions.
	if _, err := s.JobRetry(ctx, &engine.JobRetryParams{ID: "expired", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	check("retry")
	if _, err := s.JobCancel(ctx, &engine.JobActionParams{ID: "later", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	check("cancel")
	if err := s.JobDelete(ctx, &engine.JobActionParams{ID: "later", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	check("delete")
	insert(t, s, job("e1", "e", "k"), job("e2", "e", "k"), job("e3", "e", "k"))
	kill(t, s, "e", 3, engine.StateArchived, func(int) string { return "x" })
	if _, err := s.JobRetryWithInput(ctx, &engine.JobRetryWithInputParams{ID: "e1", NewID: "e1-fixed",
		Payload: json.RawMessage(`{}`), Fingerprint: "fp-e1-fixed"}); err != nil {
		t.Fatal(err)
	}
	check("retry with input")

	insert(t, s, job("k1", "keep", "k"), job("k2", "keep", "k"))
	claim(t, s, engine.JobClaimParams{Queue: "keep", Limit: 1})
	check("a job kept running")

	// Operations: cancel everything waiting, then delete every cancelled job.
	for _, action := range []engine.Action{engine.ActionCancel, engine.ActionDelete} {
		time.Sleep(time.Millisecond)
		op, err := s.OperationInsert(ctx, &engine.OperationInsertParams{ID: "op-" + string(action), Action: action,
			Selector: engine.Filter{States: []engine.State{engine.StateAvailable, engine.StateScheduled, engine.StateCancelled}}})
		if err != nil {
			t.Fatal(err)
		}
		runOperation(t, s, op.ID, 2)
		check("operation " + string(action))
	}

	// Retention.
	n, err := s.JobDeleteExpired(ctx, &engine.JobDeleteExpiredParams{Retention: map[engine.State]time.Duration{
		engine.StateCompleted: 0, engine.StateArchived: 0}, Limit: 100})
	if err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	check("retention")

	before, _ := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err := s.JobCountReconcile(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if !countsEqual(before, after) {
		t.Fatalf("reconcile changed exact counters: %v → %v", before, after)
	}
	if len(after) == 0 {
		t.Fatal("no jobs left to count")
	}
	for q := range after {
		one, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{Queue: q})
		if err != nil || len(one) != 1 || !maps.Equal(one[q], after[q]) {
			t.Fatalf("counts of queue %s: %v %v", q, one, err)
		}
	}
}

// runOperation claims the operation and runs its batches of limit jobs to
// the end.
func runOperation(t testing.TB, s *sqlite.Store, id string, limit int) *engine.Operation {
	t.Helper()
	lease, err := s.OperationClaim(ctx, &engine.OperationClaimParams{Holder: "runner", TTL: time.Minute})
	if err != nil || lease == nil || lease.Operation.ID != id {
		t.Fatalf("claim operation %s: %+v %v", id, lease, err)
	}
	for range 10_000 {
		op, err := s.OperationProcessBatch(ctx, &engine.OperationProcessBatchParams{
			ID: id, Holder: lease.Holder, Fence: lease.Fence, Limit: limit, TTL: time.Minute})
		if err != nil {
			t.Fatalf("operation %s: %v", id, err)
		}
		if op.Status != engine.OperationRunning {
			return op
		}
	}
	t.Fatalf("operation %s does not end", id)
	return nil
}

func TestOperationFencing(t *testing.T) {
	s := sqlitetest.New(t)
	db := rawDB(t, s)
	for i := range 6 {
		insert(t, s, job(fmt.Sprintf("j%d", i), "q", "k"))
	}
	kill(t, s, "q", 6, engine.StateArchived, func(int) string { return "x" })
	op, err := s.OperationInsert(ctx, &engine.OperationInsertParams{ID: "op1", Action: engine.ActionRetry,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}}, CreatedBy: "maya", Matched: 6})
	if err != nil || op.Status != engine.OperationPending || op.CreatedBy != "maya" || op.Matched != 6 {
		t.Fatalf("insert: %+v %v", op, err)
	}
	if _, err := s.OperationInsert(ctx, &engine.OperationInsertParams{ID: "op1", Action: engine.ActionRetry}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("same id again: %v", err)
	}
	a, err := s.OperationClaim(ctx, &engine.OperationClaimParams{Holder: "A", TTL: time.Millisecond})
	if err != nil || a == nil || a.Fence != 1 || a.Operation.Status != engine.OperationRunning || a.Operation.StartedAt == nil {
		t.Fatalf("claim A: %+v %v", a, err)
	}
	time.Sleep(5 * time.Millisecond)
	b, err := s.OperationClaim(ctx, &engine.OperationClaimParams{Holder: "B", TTL: time.Minute})
	if err != nil || b == nil || b.Fence <= a.Fence || b.Holder != "B" {
		t.Fatalf("claim B after A's lease ran out: %+v %v", b, err)
	}
	if again, err := s.OperationClaim(ctx, &engine.OperationClaimParams{Holder: "C", TTL: time.Minute}); err != nil || again != nil {
		t.Fatalf("claim of a leased operation: %+v %v", again, err)
	}
	snapshot := truth(t, db)
	// A's stale fence changes nothing.
	if _, err := s.OperationProcessBatch(ctx, &engine.OperationProcessBatchParams{ID: "op1", Holder: "A", Fence: a.Fence, Limit: 10}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("stale fence: %v", err)
	}
	if _, err := s.OperationProcessBatch(ctx, &engine.OperationProcessBatchParams{ID: "op1", Holder: "A", Fence: b.Fence, Limit: 10}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("wrong holder: %v", err)
	}
	if got := truth(t, db); !countsEqual(got, snapshot) {
		t.Fatalf("a refused batch changed jobs: %v → %v", snapshot, got)
	}
	if cur, _ := s.OperationGet(ctx, &engine.OperationGetParams{ID: "op1"}); cur.Processed != 0 {
		t.Fatalf("a refused batch recorded progress: %+v", cur)
	}
	// B's batches run; one batch of 4, then cancelled.
	op, err = s.OperationProcessBatch(ctx, &engine.OperationProcessBatchParams{ID: "op1", Holder: "B", Fence: b.Fence, Limit: 4})
	if err != nil || op.Status != engine.OperationRunning || op.Processed != 4 || op.Succeeded != 4 {
		t.Fatalf("batch: %+v %v", op, err)
	}
	ev, _ := s.JobEventList(ctx, &engine.JobEventListParams{JobID: "j0"})
	if last := ev[len(ev)-1]; last.Kind != engine.EventRetried || last.Actor != "maya" || !strings.Contains(last.Message, "op1") {
		t.Fatalf("event of a bulk retry: %+v", last)
	}
	if op, err := s.OperationCancel(ctx, &engine.OperationCancelParams{ID: "op1", Actor: "maya"}); err != nil || op.Status != engine.OperationCancelled || op.FinishedAt == nil {
		t.Fatalf("cancel: %+v %v", op, err)
	}
	if _, err := s.OperationCancel(ctx, &engine.OperationCancelParams{ID: "op1"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := s.OperationCancel(ctx, &engine.OperationCancelParams{ID: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	snapshot = truth(t, db)
	op, err = s.OperationProcessBatch(ctx, &engine.OperationProcessBatchParams{ID: "op1", Holder: "B", Fence: b.Fence, Limit: 4})
	if err != nil || op.Status != engine.OperationCancelled || op.Processed != 4 {
		t.Fatalf("batch after cancel: %+v %v", op, err)
	}
	if got := truth(t, db); !countsEqual(got, snapshot) {
		t.Fatalf("a batch of a cancelled operation changed jobs: %v → %v", snapshot, got)
	}
	if next, err := s.OperationClaim(ctx, &engine.OperationClaimParams{Holder: "C", TTL: time.Minute}); err != nil || next != nil {
		t.Fatalf("claim of a cancelled operation: %+v %v", next, err)
	}
	// Listing: newest first, keyset.
	for i := range 3 {
		if _, err := s.OperationInsert(ctx, &engine.OperationInsertParams{ID: fmt.Sprintf("op-x%d", i), Action: engine.ActionDelete,
			Selector: engine.Filter{Queues: []string{"none"}}}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.OperationList(ctx, &engine.OperationListParams{Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != "op-x2" || page[1].ID != "op-x1" {
		t.Fatalf("first page: %v", page)
	}
	page, err = s.OperationList(ctx, &engine.OperationListParams{Limit: 5, After: &engine.Cursor{At: page[1].CreatedAt, ID: page[1].ID}})
	if err != nil || len(page) != 2 || page[0].ID != "op-x0" || page[1].ID != "op1" {
		t.Fatalf("second page: %v", page)
	}
	if _, err := s.OperationGet(ctx, &engine.OperationGetParams{ID: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

// TestBulkTakesOnlyEarlierDeaths: an operation takes the jobs that entered
// their state at or before its creation, whatever their ids.
func TestBulkTakesOnlyEarlierDeaths(t *testing.T) {
	s := sqlitetest.New(t)
	// "m" jobs die before the operation, "a" and "z" jobs (ids on both
	// sides) after it.
	for _, id := range []string{"m1", "m2", "m3"} {
		insert(t, s, job(id, "early", "k"))
	}
	for _, id := range []string{"a1", "z1"} {
		insert(t, s, job(id, "late", "k"))
	}
	kill(t, s, "early", 3, engine.StateArchived, func(int) string { return "x" })
	time.Sleep(time.Millisecond)
	op, err := s.OperationInsert(ctx, &engine.OperationInsertParams{ID: "op", Action: engine.ActionRetry,
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
		if j := get(t, s, id); j.State != want {
			t.Errorf("%s: %s, want %s", id, j.State, want)
		}
	}
}

// TestBulkWindowsAndRefusals: a selector matching a few jobs among many is
// walked over several windows; a quarantined fingerprint's job is refused
// (counted failed); a superseded job is left out unless included.
func TestBulkWindowsAndRefusals(t *testing.T) {
	s := sqlitetest.New(t)
	db := rawDB(t, s)
	var js []*engine.JobInsertParams
	for i := range 60 {
		js = append(js, job(fmt.Sprintf("j%02d", i), "q", "k"))
	}
	insert(t, s, js...)
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
	insert(t, s, &engine.JobInsertParams{ID: "pill", Queue: "pills", Kind: "k", Payload: json.RawMessage(`{}`),
		Fingerprint: get(t, s, rare[0]).Fingerprint, MaxAttempts: 1})
	res := claim(t, s, engine.JobClaimParams{Queue: "pills", Limit: 1})
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(res.Jobs[0]), To: engine.StateQuarantined,
		Charge: engine.ChargeCrash, Quarantine: true, Error: &engine.AttemptError{Crash: true, Message: "boom"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobRetryWithInput(ctx, &engine.JobRetryWithInputParams{ID: rare[1], NewID: rare[1] + "-fixed",
		Payload: json.RawMessage(`{"fixed":true}`), Fingerprint: "fp-fixed"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	sel := engine.Filter{States: []engine.State{engine.StateArchived}, Error: "rare"}
	op, err := s.OperationInsert(ctx, &engine.OperationInsertParams{ID: "op", Action: engine.ActionRetry, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	// Batches of 2 look at 20 ids each: 61 ids take several batches.
	done := runOperation(t, s, op.ID, 2)
	if done.Status != engine.OperationCompleted || done.Processed != 2 || done.Succeeded != 1 || done.Failed != 1 ||
		!strings.Contains(done.Error, rare[0]) {
		t.Fatalf("operation: %+v", done)
	}
	if j := get(t, s, rare[2]); j.State != engine.StateAvailable || j.MaxAttempts != 3 || j.Attempt != 1 {
		t.Fatalf("retried: %+v", j)
	}
	for _, id := range rare[:2] {
		if j := get(t, s, id); j.State != engine.StateArchived {
			t.Fatalf("%s: %s", id, j.State)
		}
	}
	checkCounts(t, s, db, "bulk retry")
	// Included superseded jobs are retried (forced).
	time.Sleep(time.Millisecond)
	sel.IncludeSuperseded = true
	op, err = s.OperationInsert(ctx, &engine.OperationInsertParams{ID: "op2", Action: engine.ActionRetry, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	done = runOperation(t, s, op.ID, 1000)
	if done.Succeeded != 1 || done.Failed != 1 {
		t.Fatalf("operation with superseded jobs: %+v", done)
	}
	if j := get(t, s, rare[1]); j.State != engine.StateAvailable {
		t.Fatalf("superseded job not retried: %s", j.State)
	}
	// A selector with no state the action changes completes at once.
	op, err = s.OperationInsert(ctx, &engine.OperationInsertParams{ID: "op3", Action: engine.ActionRelease,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil {
		t.Fatal(err)
	}
	if done := runOperation(t, s, op.ID, 10); done.Status != engine.OperationCompleted || done.Processed != 0 {
		t.Fatalf("empty operation: %+v", done)
	}
}

func TestOperatorActions(t *testing.T) {
	s := sqlitetest.New(t)
	past := time.Now().Add(-time.Hour)
	dl := job("dl", "q", "k")
	dl.Deadline = &past
	insert(t, s, job("a", "q", "k"), job("b", "q", "k"))
	kill(t, s, "q", 2, engine.StateArchived, func(int) string { return "dial tcp 10.1.1.1:80: refused" })
	insert(t, s, dl)
	if res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1}); len(res.Dead) != 1 {
		t.Fatalf("deadline archive: %+v", res)
	}
	d := get(t, s, "dl")
	if d.State != engine.StateArchived || d.TerminalReason != engine.ReasonDeadlineExceeded {
		t.Fatalf("dl: %+v", d)
	}
	gs, err := s.JobErrorGroups(ctx, &engine.JobErrorGroupsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil || len(gs) != 2 || gs[0].Count != 2 || gs[0].Pattern != "dial tcp <addr>: refused" ||
		gs[0].Sample != "dial tcp 10.1.1.1:80: refused" || gs[1].Count != 1 || gs[0].FirstSeen.After(gs[0].LastSeen) {
		t.Fatalf("groups: %+v %v", gs, err)
	}

	// Retry: one more attempt, the passed deadline dropped, history kept.
	j, err := s.JobRetry(ctx, &engine.JobRetryParams{ID: "dl", Actor: "maya"})
	if err != nil || j.State != engine.StateAvailable || j.Deadline != nil || j.MaxAttempts != 3 || j.FinalizedAt != nil ||
		j.TerminalReason != "" || j.Version != d.Version+1 {
		t.Fatalf("retry: %+v %v", j, err)
	}
	a := get(t, s, "a")
	newDL := time.Now().Add(time.Hour)
	j, err = s.JobRetry(ctx, &engine.JobRetryParams{ID: "a", Actor: "maya", Deadline: &newDL})
	if err != nil || j.Attempt != a.Attempt || j.MaxAttempts != 3 || len(j.Errors) != 1 || j.Deadline == nil || !j.Deadline.Equal(newDL.UTC()) {
		t.Fatalf("retry with a deadline: %+v %v", j, err)
	}
	ev, _ := s.JobEventList(ctx, &engine.JobEventListParams{JobID: "a"})
	if last := ev[len(ev)-1]; last.Kind != engine.EventRetried || last.Actor != "maya" || last.From != engine.StateArchived || last.To != engine.StateAvailable {
		t.Fatalf("retry event: %+v", last)
	}
	if _, err := s.JobRetry(ctx, &engine.JobRetryParams{ID: "a"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("retry of an available job: %v", err)
	}
	if _, err := s.JobRetry(ctx, &engine.JobRetryParams{ID: "nope"}); !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("retry of a missing job: %v", err)
	}

	// Retry with input: new id taken → conflict; superseded → conflict unless forced.
	if _, err := s.JobRetryWithInput(ctx, &engine.JobRetryWithInputParams{ID: "b", NewID: "a", Payload: json.RawMessage(`{}`), Fingerprint: "x"}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("retry with input onto an existing id: %v", err)
	}
	if _, err := s.JobRetryWithInput(ctx, &engine.JobRetryWithInputParams{ID: "a", NewID: "a2", Payload: json.RawMessage(`{}`), Fingerprint: "x"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("retry with input of a waiting job: %v", err)
	}
	meta := get(t, s, "b")
	c, err := s.JobRetryWithInput(ctx, &engine.JobRetryWithInputParams{ID: "b", NewID: "b2", Payload: json.RawMessage(`{"fixed":1}`), Fingerprint: "fp-b2", Actor: "maya"})
	if err != nil || c.RetryOf != "b" || c.Queue != "q" || c.Kind != "k" || c.MaxAttempts != meta.MaxAttempts ||
		c.State != engine.StateAvailable || string(c.Payload) != `{"fixed":1}` || c.Fingerprint != "fp-b2" {
		t.Fatalf("copy: %+v %v", c, err)
	}
	if b := get(t, s, "b"); b.SupersededBy != "b2" || b.State != engine.StateArchived {
		t.Fatalf("original: %+v", b)
	}
	if _, err := s.JobRetry(ctx, &engine.JobRetryParams{ID: "b"}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("retry of a superseded job: %v", err)
	}

	// Payload edits: version checked, refused while running.
	b := get(t, s, "b")
	e, err := s.JobUpdatePayload(ctx, &engine.JobUpdatePayloadParams{ID: "b", Payload: json.RawMessage(`{"v":2}`), Fingerprint: "fp-v2", Version: b.Version, Actor: "maya"})
	if err != nil || string(e.Payload) != `{"v":2}` || e.Fingerprint != "fp-v2" || e.Version != b.Version+1 {
		t.Fatalf("edit: %+v %v", e, err)
	}
	if _, err := s.JobUpdatePayload(ctx, &engine.JobUpdatePayloadParams{ID: "b", Payload: json.RawMessage(`{}`), Version: b.Version}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("stale edit: %v", err)
	}
	// Quarantined fingerprints refuse retries, and retries with input onto them.
	if _, err := s.JobRetry(ctx, &engine.JobRetryParams{ID: "b", Force: true}); err != nil {
		t.Fatal(err)
	}
	run := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 10})
	var rb *engine.Job
	for _, x := range run.Jobs {
		if x.ID == "b" {
			rb = x
		}
	}
	if rb == nil {
		t.Fatalf("b not claimed: %v", ids(run.Jobs))
	}
	if _, err := s.JobUpdatePayload(ctx, &engine.JobUpdatePayloadParams{ID: "b", Payload: json.RawMessage(`{}`), Version: rb.Version}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("edit of a running job: %v", err)
	}
	if err := s.JobDelete(ctx, &engine.JobActionParams{ID: "b"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("delete of a running job: %v", err)
	}
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(rb), To: engine.StateQuarantined, Charge: engine.ChargeCrash,
		Quarantine: true, Error: &engine.AttemptError{Crash: true, Message: "boom"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobRetryWithInput(ctx, &engine.JobRetryWithInputParams{ID: "b", NewID: "b3", Payload: json.RawMessage(`{"v":2}`), Fingerprint: "fp-v2"}); !errors.Is(err, engine.ErrQuarantined) {
		t.Fatalf("retry with input onto a quarantined fingerprint: %v", err)
	}
	if _, err := s.JobCancel(ctx, &engine.JobActionParams{ID: "b"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("cancel of a quarantined job: %v", err)
	}
	r, err := s.JobRelease(ctx, &engine.JobActionParams{ID: "b", Actor: "maya"})
	if err != nil || r.State != engine.StateAvailable || r.CrashAttempt != 0 {
		t.Fatalf("release: %+v %v", r, err)
	}
	// Cancel of a running job clears its lease; the worker's late write is refused.
	var x *engine.Job
	for _, r := range run.Jobs {
		if r.ID != "b" {
			x = r
		}
	}
	cj, err := s.JobCancel(ctx, &engine.JobActionParams{ID: x.ID, Actor: "maya"})
	if err != nil || cj.State != engine.StateCancelled || cj.Lease != nil || cj.TerminalReason != engine.ReasonCancelled || cj.FinalizedAt == nil {
		t.Fatalf("cancel running: %+v %v", cj, err)
	}
	if out, _ := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: []engine.JobCompleteItem{{JobRef: ref(x)}}}); !errors.Is(out[0], engine.ErrLeaseLost) {
		t.Fatalf("late completion of a cancelled job: %v", out[0])
	}
	if _, err := s.JobRetry(ctx, &engine.JobRetryParams{ID: x.ID}); err != nil {
		t.Fatalf("retry of a cancelled job: %v", err)
	}
}

func TestPausedQueueNotClaimed(t *testing.T) {
	s := sqlitetest.New(t)
	insert(t, s, job("a", "q", "k"), job("b", "other", "k"))
	if err := s.QueuePause(ctx, &engine.QueuePauseParams{Queue: "q", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	if err := s.QueuePause(ctx, &engine.QueuePauseParams{Queue: "empty", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	if res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 5}); len(res.Jobs) != 0 || res.Now.IsZero() {
		t.Fatalf("claimed from a paused queue: %v", ids(res.Jobs))
	}
	if res := claim(t, s, engine.JobClaimParams{Queue: "other", Limit: 5}); len(res.Jobs) != 1 {
		t.Fatalf("other queue: %v", ids(res.Jobs))
	}
	qs, err := s.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(qs)
	if want := "[{empty true map[]} {other false map[running:1]} {q true map[available:1]}]"; got != want {
		t.Fatalf("queues %s, want %s", got, want)
	}
	if err := s.QueueResume(ctx, &engine.QueuePauseParams{Queue: "q", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	if res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 5}); len(res.Jobs) != 1 {
		t.Fatalf("after resume: %v", ids(res.Jobs))
	}
	if !slices.Contains(s.Capabilities(), "operations") {
		t.Fatal(s.Capabilities())
	}
}

// TestOperationUnrunnableFails: an operation no batch can run fails with
// the reason instead of being retried forever.
func TestOperationUnrunnableFails(t *testing.T) {
	s := sqlitetest.New(t)
	insert(t, s, job("a", "q", "k"))
	for _, p := range []*engine.OperationInsertParams{
		{ID: "op-action", Action: "explode", Selector: engine.Filter{Queues: []string{"q"}}},
		{ID: "op-path", Action: engine.ActionCancel, Selector: engine.Filter{Payload: []engine.PathMatch{{Path: `x"y`, Value: "1"}}}},
	} {
		if _, err := s.OperationInsert(ctx, p); err != nil {
			t.Fatal(err)
		}
		op := runOperation(t, s, p.ID, 10)
		if op.Status != engine.OperationFailed || op.FinishedAt == nil || op.Error == "" || op.Processed != 0 {
			t.Fatalf("%s: %+v", p.ID, op)
		}
	}
	if j := get(t, s, "a"); j.State != engine.StateAvailable {
		t.Fatalf("a failed operation changed a job: %s", j.State)
	}
}

// TestMigration0002OnExistingJobs upgrades a file written at schema 1: the
// counters start from the jobs there, and last errors come back from the
// error lists.
func TestMigration0002OnExistingJobs(t *testing.T) {
	init1, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		string(init1),
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, 1)`,
		`INSERT INTO jobs (id, queue, kind, state, scheduled_at, created_at, state_changed_at, errors) VALUES
			('a', 'q1', 'k', 'archived', 1, 1, 1, '[{"attempt":1,"message":"first"},{"attempt":2,"message":"second"}]'),
			('b', 'q1', 'k', 'archived', 1, 1, 2, '[]'),
			('c', 'q2', 'k', 'available', 1, 1, 3, '[]')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[engine.State]int64{"q1": {engine.StateArchived: 2}, "q2": {engine.StateAvailable: 1}}
	if !countsEqual(got, want) {
		t.Fatalf("counters after the upgrade: %v, want %v", got, want)
	}
	if ids := listIDs(t, s, engine.Filter{Error: "second"}); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("last error after the upgrade: %v", ids)
	}
	if sqlite.SchemaVersion() < 2 { // later migrations add to it
		t.Fatalf("schema version %d", sqlite.SchemaVersion())
	}
}

// TestJobCountReconcileRepairsDrift: counters edited by hand (a drift) are
// put back to the truth, and a queue with no jobs left loses its row.
func TestJobCountReconcileRepairsDrift(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jobs := make([]*engine.JobInsertParams, 0, 30)
	for i := range 30 {
		q := []string{"billing", "email", "reports"}[i%3]
		jobs = append(jobs, &engine.JobInsertParams{ID: fmt.Sprintf("job-%02d", i), Queue: q, Kind: "k",
			SchemaVersion: 1, MaxAttempts: 3, Payload: json.RawMessage(`{}`)})
	}
	if _, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	want, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE job_counts SET n = n + 7 WHERE queue = 'email';
		INSERT INTO job_counts (queue, state, n) VALUES ('ghost', 'archived', 5)`); err != nil {
		t.Fatal(err)
	}
	drifted, _ := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if countsEqual(drifted, want) {
		t.Fatal("the hand edit did not change the counters")
	}
	if err := s.JobCountReconcile(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	if !countsEqual(got, want) {
		t.Fatalf("after reconcile: %v, want %v", got, want)
	}
}
