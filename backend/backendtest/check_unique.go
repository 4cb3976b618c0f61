package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Unique jobs (engine.UniqueOpts): a duplicate returns the job holding the
// key, the store holds the key atomically, the key is released when its
// holder leaves the holding states, periods bucket the key, and an
// operator's retry that would make a second holder is refused naming the
// first.

// newUnique is a Control fixture on a store that holds unique keys; on
// one that does not, it checks that a unique enqueue is refused as
// unsupported and skips.
func newUnique(t *testing.T, h Harness) *ctlFixture {
	t.Helper()
	f := newCtl(t, h, nil)
	if !backend.Declares(f.s, backend.CapabilityUnique) {
		_, err := f.e.Enqueue(context.Background(), engine.EnqueueParams{Queue: "later", Kind: "ok", Unique: &engine.UniqueOpts{}})
		if !errors.Is(err, engine.ErrUnsupported) {
			t.Fatalf("unique enqueue on a store without the %s capability: %v, want ErrUnsupported", backend.CapabilityUnique, err)
		}
		t.Skipf("SKIP: the %s store does not declare %s", f.s.Backend(), backend.CapabilityUnique)
	}
	return f
}

func uniqueChecks() []check {
	return []check{
		{name: "DuplicateReturnsExisting", fn: testUniqueDuplicate},
		{name: "KeyReleasedByState", fn: testUniqueReleased},
		{name: "PeriodBuckets", fn: testUniquePeriod},
		{name: "EightGoroutinesOneJob", fn: testUniqueConcurrent},
		{name: "BadInputRefused", fn: testUniqueBadInput},
		{name: "RetryRefusedNamesHolder", fn: testUniqueRetryRefused},
		{name: "BulkRetryCountsHeld", fn: testUniqueBulkRetry},
		{name: "PreviewCountsHeldKeys", fn: testUniquePreviewHeld},
		{name: "CopiesCarryTheKey", fn: testUniqueCopies},
	}
}

// enqueueMany enqueues ps and fails on any refusal.
func (f *ctlFixture) enqueueMany(t *testing.T, ps ...engine.EnqueueParams) []engine.EnqueueResult {
	t.Helper()
	res, err := f.e.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue %d (%s): %v", i, ps[i].ID, r.Err)
		}
	}
	return res
}

// countKey counts the jobs carrying key, by listing unique:KEY.
func (f *ctlFixture) countKey(t *testing.T, key string) int {
	t.Helper()
	return len(f.listAll(t, mustQuery(t, "unique:"+key), 50))
}

func testUniqueDuplicate(t *testing.T, h Harness) {
	f := newUnique(t, h)
	if err := f.e.PauseQueue(f.ctx, "later"); err != nil {
		t.Fatal(err)
	}
	byQueue := &engine.UniqueOpts{ByQueue: true, Fields: []string{"customer"}}
	p := func(id, queue, kind, customer string, other int) engine.EnqueueParams {
		return engine.EnqueueParams{ID: id, Queue: queue, Kind: kind, Unique: byQueue,
			Payload: json.RawMessage(fmt.Sprintf(`{"customer":%q,"other":%d}`, customer, other))}
	}
	// One batch: the second item duplicates the first (a field outside
	// Fields differs), the third is another customer, the fourth another
	// queue, the fifth another kind.
	res := f.enqueueMany(t,
		p("u-1", "later", "ok", "c1", 1),
		p("u-2", "later", "ok", "c1", 2),
		p("u-3", "later", "ok", "c2", 1),
		p("u-4", "misc", "block", "c1", 1),
		p("u-5", "later", "fail", "c1", 1),
	)
	if res[0].Existing || res[0].Job.ID != "u-1" || res[0].Job.UniqueKey == "" {
		t.Fatalf("first: %+v", res[0])
	}
	if !res[1].Existing || res[1].Job == nil || res[1].Job.ID != "u-1" {
		t.Fatalf("duplicate in the same batch: %+v, want u-1 existing", res[1])
	}
	for _, i := range []int{2, 3, 4} {
		if res[i].Existing || res[i].Job.UniqueKey == res[0].Job.UniqueKey {
			t.Fatalf("item %d: %+v, want a new job with another key", i, res[i])
		}
	}
	if !gone(f.s, "u-2") {
		t.Fatal("the duplicate u-2 was written")
	}
	// In a later call, under another id, and by a second store over the
	// same data.
	again := f.enqueueMany(t, p("u-6", "later", "ok", "c1", 3))
	if !again[0].Existing || again[0].Job.ID != "u-1" || again[0].Job.UniqueKey != res[0].Job.UniqueKey {
		t.Fatalf("later duplicate: %+v", again[0])
	}
	if h.Reopen != nil {
		e2 := newEngine(t, h.Reopen(t, f.s), fast("other"), controlKinds()...)
		r2, err := e2.EnqueueMany(context.Background(), []engine.EnqueueParams{p("u-7", "later", "ok", "c1", 4)})
		if err != nil || r2[0].Err != nil || !r2[0].Existing || r2[0].Job.ID != "u-1" {
			t.Fatalf("duplicate through a second store: %v %+v", err, r2)
		}
	}
	// The same id again is the idempotent enqueue, as without uniqueness.
	same := f.enqueueMany(t, p("u-1", "later", "ok", "c1", 1))
	if !same[0].Existing || same[0].Job.ID != "u-1" {
		t.Fatalf("same id again: %+v", same[0])
	}
	// The key is on the stored job, and the filter finds it.
	if j := getJob(t, f.s, "u-1"); j.UniqueKey != res[0].Job.UniqueKey {
		t.Fatalf("stored key %q, enqueue said %q", j.UniqueKey, res[0].Job.UniqueKey)
	}
	if n := f.countKey(t, res[0].Job.UniqueKey); n != 1 {
		t.Fatalf("%d listed jobs carry key %s, want 1", n, res[0].Job.UniqueKey)
	}
	// Without uniqueness nothing is deduplicated.
	plain := f.enqueueMany(t, engine.EnqueueParams{ID: "plain-1", Queue: "later", Kind: "ok", Payload: json.RawMessage(`{"customer":"c1","other":1}`)})
	if plain[0].Existing || plain[0].Job.UniqueKey != "" {
		t.Fatalf("plain enqueue: %+v", plain[0])
	}
}

func testUniqueReleased(t *testing.T, h Harness) {
	f := newUnique(t, h)
	cases := []struct {
		name   string
		queue  string
		kind   string
		states []engine.State
		end    engine.State
		held   bool // a second enqueue after the end returns the first
	}{
		{"completed, default states", "misc", "ok", nil, engine.StateCompleted, false},
		{"archived, default states", "misc", "fail", nil, engine.StateArchived, false},
		{"completed, held when completed", "misc", "ok",
			append(append([]engine.State{}, engine.DefaultUniqueStates...), engine.StateCompleted), engine.StateCompleted, true},
		{"archived, held when completed only", "misc", "fail",
			append(append([]engine.State{}, engine.DefaultUniqueStates...), engine.StateCompleted), engine.StateArchived, false},
	}
	for i, c := range cases {
		u := &engine.UniqueOpts{ByPayload: true, States: c.states}
		payload := json.RawMessage(fmt.Sprintf(`{"case":%d,"msg":"x"}`, i))
		first := f.enqueueMany(t, engine.EnqueueParams{ID: fmt.Sprintf("r%d-a", i), Queue: c.queue, Kind: c.kind, MaxAttempts: 1, Unique: u, Payload: payload})
		waitState(t, f.s, first[0].Job.ID, c.end)
		second := f.enqueueMany(t, engine.EnqueueParams{ID: fmt.Sprintf("r%d-b", i), Queue: "later", Kind: c.kind, MaxAttempts: 1, Unique: u, Payload: payload, Delay: time.Hour})
		if second[0].Existing != c.held {
			t.Fatalf("%s: second enqueue %+v, want existing=%v", c.name, second[0], c.held)
		}
		if c.held && second[0].Job.ID != first[0].Job.ID {
			t.Fatalf("%s: second enqueue returned %s, want %s", c.name, second[0].Job.ID, first[0].Job.ID)
		}
	}
}

func testUniquePeriod(t *testing.T, h Harness) {
	f := newUnique(t, h)
	now := storeNow(t, f.s)
	base := now.Add(48 * time.Hour).Truncate(time.Hour)
	u := &engine.UniqueOpts{Period: time.Hour}
	at := func(d time.Duration) *time.Time { x := base.Add(d); return &x }
	res := f.enqueueMany(t,
		engine.EnqueueParams{ID: "p-1", Queue: "later", Kind: "ok", Unique: u, ScheduledAt: at(5 * time.Minute)},
		engine.EnqueueParams{ID: "p-2", Queue: "later", Kind: "ok", Unique: u, ScheduledAt: at(59 * time.Minute)},
		engine.EnqueueParams{ID: "p-3", Queue: "later", Kind: "ok", Unique: u, ScheduledAt: at(60 * time.Minute)},
		engine.EnqueueParams{ID: "p-4", Queue: "later", Kind: "ok", Unique: u, ScheduledAt: at(-time.Second)},
		engine.EnqueueParams{ID: "p-5", Queue: "later", Kind: "ok", Unique: u, ScheduledAt: at(0)},
	)
	want := []struct {
		existing bool
		id       string
	}{{false, "p-1"}, {true, "p-1"}, {false, "p-3"}, {false, "p-4"}, {true, "p-1"}}
	for i, w := range want {
		if res[i].Existing != w.existing || res[i].Job.ID != w.id {
			t.Fatalf("item %d: existing=%v id=%s, want existing=%v id=%s", i, res[i].Existing, res[i].Job.ID, w.existing, w.id)
		}
	}
	// Without ScheduledAt the bucket is the store's now plus Delay: two
	// enqueues a moment apart share it unless the hour turned between
	// them, which a second try rules out.
	for try := range 2 {
		a := f.enqueueMany(t, engine.EnqueueParams{ID: fmt.Sprintf("n-%d-a", try), Queue: "later", Kind: "block", Unique: u, Delay: 3 * time.Hour})
		b := f.enqueueMany(t, engine.EnqueueParams{ID: fmt.Sprintf("n-%d-b", try), Queue: "later", Kind: "block", Unique: u, Delay: 3 * time.Hour})
		if b[0].Existing && b[0].Job.ID == a[0].Job.ID {
			return
		}
	}
	t.Fatal("two enqueues a moment apart, with a delay, got different period buckets twice")
}

func testUniqueConcurrent(t *testing.T, h Harness) {
	f := newUnique(t, h)
	if err := f.e.PauseQueue(f.ctx, "later"); err != nil {
		t.Fatal(err)
	}
	// Half the goroutines enqueue through a second store over the same
	// data, as another process would.
	engines := []*engine.Engine{f.e}
	if h.Reopen != nil {
		engines = append(engines, newEngine(t, h.Reopen(t, f.s), fast("other"), controlKinds()...))
	}
	const goroutines, rounds = 8, 5
	for round := range rounds {
		u := &engine.UniqueOpts{ByPayload: true}
		payload := json.RawMessage(fmt.Sprintf(`{"round":%d}`, round))
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			ids   = map[string]int{}
			fresh int
			errs  []error
		)
		start := make(chan struct{})
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				e := engines[g%len(engines)]
				res, err := e.EnqueueMany(context.Background(), []engine.EnqueueParams{{
					ID: fmt.Sprintf("c%d-g%d", round, g), Queue: "later", Kind: "ok", Unique: u, Payload: payload}})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					err = res[0].Err
				}
				if err != nil {
					errs = append(errs, err)
					return
				}
				ids[res[0].Job.ID]++
				if !res[0].Existing {
					fresh++
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: %v", round, errors.Join(errs...))
		}
		if len(ids) != 1 || fresh != 1 {
			t.Fatalf("round %d: %d goroutines got jobs %v, %d of them new; want one job, new once", round, goroutines, ids, fresh)
		}
		for id := range ids {
			if n := f.countKey(t, getJob(t, f.s, id).UniqueKey); n != 1 {
				t.Fatalf("round %d: %d jobs carry the key, want 1", round, n)
			}
		}
	}
}

func testUniqueBadInput(t *testing.T, h Harness) {
	f := newUnique(t, h)
	cases := []struct {
		name string
		u    engine.UniqueOpts
		want []string // in the error text
	}{
		{"missing field", engine.UniqueOpts{Fields: []string{"customer", "region"}}, []string{"bad-0", `"region"`, "no field"}},
		{"period not whole seconds", engine.UniqueOpts{Period: 1500 * time.Millisecond}, []string{"bad-1", "1.5s", "whole number of seconds"}},
		{"negative period", engine.UniqueOpts{Period: -time.Hour}, []string{"bad-2", "period"}},
		{"payload and fields", engine.UniqueOpts{ByPayload: true, Fields: []string{"customer"}}, []string{"bad-3", "exclusive"}},
		{"required state left out", engine.UniqueOpts{States: []engine.State{engine.StateAvailable}}, []string{"bad-4", "scheduled"}},
		{"unknown state", engine.UniqueOpts{States: append([]engine.State{"dead"}, engine.DefaultUniqueStates...)}, []string{"bad-5", `"dead"`}},
	}
	for i, c := range cases {
		id := fmt.Sprintf("bad-%d", i)
		_, err := f.e.Enqueue(context.Background(), engine.EnqueueParams{ID: id, Queue: "later", Kind: "ok", Unique: &c.u,
			Payload: json.RawMessage(`{"customer":"c1"}`)})
		if !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %s", c.name, err, w)
			}
		}
		if !gone(f.s, id) {
			t.Fatalf("%s: the refused job was stored", c.name)
		}
	}
}

// uniqueDeadAndHolder makes n dead unique jobs of prefix (each its own
// key) and, for each, a live duplicate scheduled an hour out that holds
// the key. It returns the dead ids and their holders.
func (f *ctlFixture) uniqueDeadAndHolder(t *testing.T, prefix string, n int) (dead, holders []string) {
	t.Helper()
	u := &engine.UniqueOpts{ByPayload: true}
	for i := range n {
		payload := json.RawMessage(fmt.Sprintf(`{"i":%d,"msg":"%s"}`, i, prefix))
		id := fmt.Sprintf("%s-dead-%d", prefix, i)
		f.enqueueMany(t, engine.EnqueueParams{ID: id, Queue: "billing", Kind: "fail", MaxAttempts: 1, Unique: u, Payload: payload})
		waitState(t, f.s, id, engine.StateArchived)
		live := f.enqueueMany(t, engine.EnqueueParams{ID: fmt.Sprintf("%s-live-%d", prefix, i), Queue: "billing", Kind: "fail", MaxAttempts: 1,
			Unique: u, Payload: payload, Delay: time.Hour})
		if live[0].Existing {
			t.Fatalf("the live duplicate of dead %s found %s holding the key", id, live[0].Job.ID)
		}
		dead, holders = append(dead, id), append(holders, live[0].Job.ID)
	}
	return dead, holders
}

func testUniqueRetryRefused(t *testing.T, h Harness) {
	f := newUnique(t, h)
	dead, holders := f.uniqueDeadAndHolder(t, "one", 1)
	// Single retry, through the engine: the typed error.
	_, err := f.e.Retry(f.ctx, dead[0], engine.RetryOptions{})
	var held *engine.UniqueHeldError
	if !errors.As(err, &held) || held.HolderID != holders[0] || held.ID != dead[0] || held.Key == "" {
		t.Fatalf("retry of %s: %v, want a UniqueHeldError naming %s", dead[0], err, holders[0])
	}
	// Through the Control under test: a conflict naming the holder.
	if _, err := f.c.Retry(f.ctx, dead[0], engine.RetryOptions{}); !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), holders[0]) {
		t.Fatalf("Control retry of %s: %v, want a conflict naming %s", dead[0], err, holders[0])
	}
	if j := getJob(t, f.s, dead[0]); j.State != engine.StateArchived {
		t.Fatalf("refused retry changed the job: %s", describe(j))
	}
	if j := getJob(t, f.s, holders[0]); j.State != engine.StateScheduled {
		t.Fatalf("refused retry changed the holder: %s", describe(j))
	}

	// Many: a per-id result; a dead unique job whose key nobody holds is
	// retried.
	many, manyHolders := f.uniqueDeadAndHolder(t, "many", 2)
	free := "free-dead"
	f.enqueueMany(t, engine.EnqueueParams{ID: free, Queue: "billing", Kind: "fail", MaxAttempts: 1,
		Unique: &engine.UniqueOpts{ByPayload: true}, Payload: json.RawMessage(`{"msg":"free"}`)})
	waitState(t, f.s, free, engine.StateArchived)
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	res, err := f.c.Apply(f.ctx, engine.ActionRetry, []string{many[0], free, many[1]})
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range []int{0, 2} {
		if res[i].OK || res[i].Reason != "unique_held" || !strings.Contains(res[i].Error, manyHolders[k]) {
			t.Errorf("result %d: %+v, want unique_held naming %s", i, res[i], manyHolders[k])
		}
	}
	if !res[1].OK {
		t.Errorf("free job: %+v", res[1])
	}
	if j := getJob(t, f.s, free); j.State != engine.StateAvailable {
		t.Fatalf("free job not retried: %s", describe(j))
	}
}

// testUniqueBulkRetry retries in bulk every archived job of billing: the
// ones whose key a live job holds are counted failed, and the
// operation's error says how many and names a holder; two dead jobs of
// one free key are not both retried; the rest are retried.
func testUniqueBulkRetry(t *testing.T, h Harness) {
	f := newUnique(t, h)
	if !backend.Declares(f.s, backend.CapabilityOperations) {
		t.Skip("SKIP: no bulk operations")
	}
	dead, holders := f.uniqueDeadAndHolder(t, "bulk", 3)
	// Two dead jobs of one key nobody holds: one is retried, the other
	// refused with the first as holder. And a plain dead job.
	u := &engine.UniqueOpts{ByPayload: true}
	for _, id := range []string{"twin-a", "twin-b"} {
		f.enqueueMany(t, engine.EnqueueParams{ID: id, Queue: "billing", Kind: "fail", MaxAttempts: 1, Unique: u, Payload: json.RawMessage(`{"msg":"twin"}`)})
		waitState(t, f.s, id, engine.StateArchived)
	}
	f.enqueueMany(t, engine.EnqueueParams{ID: "plain", Queue: "billing", Kind: "fail", MaxAttempts: 1, Payload: json.RawMessage(`{"msg":"plain"}`)})
	waitState(t, f.s, "plain", engine.StateArchived)
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived queue:billing"), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err = f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived queue:billing"), Plan: r.Plan})
	if err != nil {
		t.Fatal(err)
	}
	op := f.waitOperation(t, r.Operation.ID)
	if op.Failed != int64(len(dead)+1) || op.Succeeded != 2 {
		t.Fatalf("bulk retry: %+v, want %d failed (held) and 2 retried", op, len(dead)+1)
	}
	named := false
	for _, h := range append(holders, "twin-a") {
		named = named || strings.Contains(op.Error, "held by "+h)
	}
	if !strings.Contains(op.Error, fmt.Sprintf("%d refused by this run because a live job holds their unique key", len(dead)+1)) || !named {
		t.Fatalf("bulk retry error %q does not say how many keys are held and by what", op.Error)
	}
	for _, id := range append(dead, "twin-b") {
		if j := getJob(t, f.s, id); j.State != engine.StateArchived {
			t.Fatalf("bulk retry changed held job %s: %s", id, describe(j))
		}
	}
	for _, id := range []string{"twin-a", "plain"} {
		if j := getJob(t, f.s, id); j.State != engine.StateAvailable {
			t.Fatalf("bulk retry left %s: %s", id, describe(j))
		}
	}
}

// testUniquePreviewHeld dry-runs a bulk retry whose held jobs are the
// oldest of more than a sample's worth: the preview counts every matched
// job whose key a live job holds, not the sample's, and names a holder;
// a dead job whose key nobody holds and a plain one are not counted.
func testUniquePreviewHeld(t *testing.T, h Harness) {
	f := newUnique(t, h)
	if !backend.Declares(f.s, backend.CapabilityOperations) {
		t.Skip("SKIP: no bulk operations")
	}
	_, holders := f.uniqueDeadAndHolder(t, "prev", 3)
	var ps []engine.EnqueueParams
	for i := range engine.BulkSampleSize + 1 {
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("later-%02d", i), Queue: "billing", Kind: "fail", MaxAttempts: 1,
			Unique: &engine.UniqueOpts{ByPayload: true}, Payload: json.RawMessage(fmt.Sprintf(`{"later":%d}`, i))})
	}
	ps = append(ps, engine.EnqueueParams{ID: "later-plain", Queue: "billing", Kind: "fail", MaxAttempts: 1, Payload: json.RawMessage(`{"msg":"plain"}`)})
	f.enqueueMany(t, ps...)
	for _, p := range ps {
		waitState(t, f.s, p.ID, engine.StateArchived)
	}
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	sel := mustQuery(t, "state:archived queue:billing")
	r, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: sel, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(3 + len(ps)); r.Matched != want {
		t.Fatalf("dry run matched %d, want %d", r.Matched, want)
	}
	for _, j := range r.Sample {
		if strings.HasPrefix(j.ID, "prev-") {
			t.Fatalf("the sample holds %s: the check needs the held jobs outside it", j.ID)
		}
	}
	if r.UniqueHeld != 3 || !slices.Contains(holders, r.UniqueHolder) {
		t.Fatalf("dry run: %d held, holder %q; want 3 held by one of %v", r.UniqueHeld, r.UniqueHolder, holders)
	}
	// A delete takes no key: nothing to count.
	r, err = f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionDelete, Selector: sel, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.UniqueHeld != 0 || r.UniqueHolder != "" {
		t.Fatalf("delete's dry run: %d held, holder %q; want none", r.UniqueHeld, r.UniqueHolder)
	}
	// A selection of free keys only: none held.
	r, err = f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived queue:billing id:later-00,later-plain"), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Matched != 2 || r.UniqueHeld != 0 {
		t.Fatalf("dry run of free keys: matched %d, %d held; want 2, none", r.Matched, r.UniqueHeld)
	}
}

// testUniqueCopies: a retry with new input and a replay from a step copy
// the original's unique key. While a live job holds it each is refused
// naming that job, and writes nothing; once the key is free the copy
// takes it, so a duplicate enqueue finds the copy and the next copy is
// refused naming it.
func testUniqueCopies(t *testing.T, h Harness) {
	f := newUnique(t, h)
	dead, holders := f.uniqueDeadAndHolder(t, "copy", 2)
	key := getJob(t, f.s, dead[0]).UniqueKey
	fork := func(id, newID string) error {
		j := getJob(t, f.s, id)
		_, err := f.s.JobFork(f.ctx, &backend.JobForkParams{ID: id, Version: j.Version, NewID: newID,
			Checkpoint: json.RawMessage(`{}`), OriginalCheckpoint: json.RawMessage(`{}`),
			OriginalEvent: backend.EventWrite{Kind: engine.EventRetried, Message: "replayed as " + newID},
			CopyEvent:     backend.EventWrite{Kind: engine.EventRetried, To: engine.StateAvailable, Message: "replay of " + id}})
		return err
	}
	withInput := func(id, newID string) error {
		_, err := f.c.RetryWithInput(f.ctx, id, engine.RetryWithInputParams{ID: newID, Payload: json.RawMessage(`{"fixed":true}`)})
		return err
	}
	wantHeld := func(what string, err error, id, holder string) {
		t.Helper()
		var held *engine.UniqueHeldError
		if !errors.As(err, &held) && !(errors.Is(err, engine.ErrConflict) && strings.Contains(err.Error(), "live job "+holder+" holds")) {
			t.Fatalf("%s of %s: %v, want a UniqueHeldError naming %s", what, id, err, holder)
		}
		if held != nil && (held.HolderID != holder || held.ID != id || held.Key != key) {
			t.Fatalf("%s of %s: %+v, want %s held by %s", what, id, held, key, holder)
		}
	}
	wantHeld("retry with input", withInput(dead[0], "copy-input-0"), dead[0], holders[0])
	wantHeld("replay", fork(dead[0], "copy-fork-0"), dead[0], holders[0])
	for _, id := range []string{"copy-input-0", "copy-fork-0"} {
		if j := tryJob(f.s, id); j != nil {
			t.Fatalf("a refused copy was written: %s", describe(j))
		}
	}
	if j := getJob(t, f.s, dead[0]); j.SupersededBy != "" || j.State != engine.StateArchived {
		t.Fatalf("a refused copy changed the original: %s", describe(j))
	}

	// The key freed, a retry with input takes it.
	if _, err := f.e.Cancel(f.ctx, holders[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.c.PauseQueue(f.ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	if err := withInput(dead[0], "copy-input-1"); err != nil {
		t.Fatalf("retry with input of %s, key free: %v", dead[0], err)
	}
	if j := getJob(t, f.s, "copy-input-1"); j.UniqueKey != key {
		t.Fatalf("the copy carries key %q, want %q", j.UniqueKey, key)
	}
	dup := f.enqueueMany(t, engine.EnqueueParams{ID: "copy-dup", Queue: "billing", Kind: "fail", MaxAttempts: 1,
		Unique: &engine.UniqueOpts{ByPayload: true}, Payload: json.RawMessage(`{"i":0,"msg":"copy"}`)})
	if !dup[0].Existing || dup[0].Job.ID != "copy-input-1" {
		t.Fatalf("a duplicate of the copied key: %+v, want the copy copy-input-1 returned", dup[0].Job)
	}

	// A replay of the other dead job once its holder is gone takes its key
	// too; a retry with input of it is then refused naming the replay.
	if _, err := f.e.Cancel(f.ctx, holders[1]); err != nil {
		t.Fatal(err)
	}
	if err := fork(dead[1], "copy-fork-1"); err != nil {
		t.Fatalf("replay of %s, key free: %v", dead[1], err)
	}
	key = getJob(t, f.s, dead[1]).UniqueKey
	if j := getJob(t, f.s, "copy-fork-1"); j.UniqueKey != key {
		t.Fatalf("the replay carries key %q, want %q", j.UniqueKey, key)
	}
	_, err := f.s.JobRetryCopy(f.ctx, &backend.JobRetryCopyParams{ID: dead[1], NewID: "copy-input-2", Payload: json.RawMessage(`{"fixed":2}`),
		OriginalEvent: backend.EventWrite{Kind: engine.EventRetried}, CopyEvent: backend.EventWrite{Kind: engine.EventRetried, To: engine.StateAvailable}})
	wantHeld("retry with input", err, dead[1], "copy-fork-1")
}
