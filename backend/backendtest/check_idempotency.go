package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Idempotency keys committed with the mutation (backend.IdempotencyStore):
// claims, the step record every keyed write commits with, take-over of a
// dead holder's claim with what it committed, late writes refused, expiry.

func idempotencyChecks() []check {
	return []check{
		{name: "ClaimReplayMismatchInFlight", fn: testIdemClaim},
		{name: "TakeOverAnswersCommittedSteps", fn: testIdemTakeOver},
		{name: "ReleaseFreesOrHandsOver", fn: testIdemRelease},
		{name: "EveryMutationRecordsItsStep", fn: testIdemEveryMutation},
		{name: "ExpiryAndSweep", fn: testIdemExpiry},
	}
}

type idemFixture struct {
	*ctlFixture
	t *testing.T
}

// newIdem is a Control fixture whose queue "later" is paused, so jobs
// put there stay where the check puts them. It skips (after checking that
// the capability is refused as declared) on a store without keys.
func newIdem(t *testing.T, h Harness, tune func(*engine.Config)) *idemFixture {
	t.Helper()
	f := newCtl(t, h, tune)
	if !declares(f.s, backend.CapabilityIdempotency) {
		if _, err := f.e.IdempotencyClaim(f.ctx, &engine.IdempotencyClaimParams{Key: "k", RequestHash: "h"}); !errors.Is(err, engine.ErrUnsupported) {
			t.Fatalf("claim on a store without the %s capability: %v, want ErrUnsupported", backend.CapabilityIdempotency, err)
		}
		if f.e.IdempotencyDurable() {
			t.Fatal("IdempotencyDurable on a store without the capability")
		}
		t.Skipf("SKIP: the %s store does not declare %s", f.s.Backend(), backend.CapabilityIdempotency)
	}
	if !backend.Declares(f.s, backend.CapabilityIdempotency) {
		t.Fatalf("the %s store declares %s but does not implement backend.IdempotencyStore", f.s.Backend(), backend.CapabilityIdempotency)
	}
	if !f.e.IdempotencyDurable() {
		t.Fatal("IdempotencyDurable is false on a store with the capability")
	}
	if err := f.e.PauseQueue(f.ctx, "later"); err != nil {
		t.Fatal(err)
	}
	return &idemFixture{ctlFixture: f, t: t}
}

func declares(s backend.Store, c backend.Capability) bool { return backend.Declares(s, c) }

// claim claims key for hash with the claim TTL given (a minute when 0).
func (f *idemFixture) claim(key, hash string, claimTTL time.Duration) (*engine.IdempotencyClaim, error) {
	return f.e.IdempotencyClaim(f.ctx, &engine.IdempotencyClaimParams{Key: key, RequestHash: hash, ClaimTTL: claimTTL})
}

// mustClaim claims key and wants a token.
func (f *idemFixture) mustClaim(key, hash string, claimTTL time.Duration) *engine.IdempotencyClaim {
	f.t.Helper()
	c, err := f.claim(key, hash, claimTTL)
	if err != nil {
		f.t.Fatalf("claim %s: %v", key, err)
	}
	if c.Token == "" || c.Response != nil {
		f.t.Fatalf("claim %s: no token (response %q)", key, c.Response)
	}
	return c
}

// keyed is the context a mutation runs with under c.
func (f *idemFixture) keyed(c *engine.IdempotencyClaim) context.Context {
	return engine.WithIdempotency(f.ctx, engine.IdempotencyParams{Key: c.Key, Token: c.Token, Steps: c.Steps})
}

func (f *idemFixture) complete(c *engine.IdempotencyClaim, resp string) {
	f.t.Helper()
	if err := f.e.IdempotencyComplete(f.ctx, &engine.IdempotencyCompleteParams{Key: c.Key, Token: c.Token, Response: []byte(resp)}); err != nil {
		f.t.Fatalf("complete %s: %v", c.Key, err)
	}
}

func (f *idemFixture) release(c *engine.IdempotencyClaim) {
	f.t.Helper()
	if err := f.e.IdempotencyRelease(f.ctx, &engine.IdempotencyReleaseParams{Key: c.Key, Token: c.Token}); err != nil {
		f.t.Fatalf("release %s: %v", c.Key, err)
	}
}

// scheduled enqueues jobs due in an hour on the paused queue "later".
func (f *idemFixture) scheduled(ids ...string) {
	f.t.Helper()
	for _, id := range ids {
		enqueue(f.t, f.e, engine.EnqueueParams{ID: id, Queue: "later", Kind: "ok", Delay: time.Hour, Args: map[string]string{"id": id}})
	}
}

// cancelled enqueues jobs and cancels them (no key).
func (f *idemFixture) cancelled(ids ...string) {
	f.t.Helper()
	f.scheduled(ids...)
	for _, id := range ids {
		if _, err := f.e.Cancel(f.ctx, id); err != nil {
			f.t.Fatalf("cancel %s: %v", id, err)
		}
	}
}

// eventCount counts a job's stored events of kind.
func eventCount(t testing.TB, s backend.Store, id string, kind engine.EventKind) int {
	t.Helper()
	n := 0
	for _, ev := range events(t, s, id) {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

func testIdemClaim(t *testing.T, h Harness) {
	f := newIdem(t, h, nil)
	f.scheduled("j1")
	c := f.mustClaim("k1", "h1", 0)
	if len(c.Steps) != 0 || !c.ExpiresAt.After(storeNow(t, f.s).Add(23*time.Hour)) {
		t.Fatalf("fresh claim: steps %v, expires %s", c.Steps, c.ExpiresAt)
	}
	if _, err := f.claim("k1", "h1", 0); !errors.Is(err, engine.ErrIdempotencyInFlight) {
		t.Fatalf("second claim while the first holds: %v", err)
	}
	if _, err := f.claim("k1", "h2", 0); !errors.Is(err, engine.ErrIdempotencyMismatch) {
		t.Fatalf("claim for another request: %v", err)
	}
	ctx := f.keyed(c)
	j, err := f.e.Cancel(ctx, "j1")
	if err != nil || j.State != engine.StateCancelled {
		t.Fatalf("keyed cancel: %v %v", j, err)
	}
	// The same step again under the claim: refused, nothing changed.
	before := getJob(t, f.s, "j1")
	if _, err := f.e.Retry(ctx, "j1", engine.RetryOptions{}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("a step written twice: %v", err)
	}
	if after := getJob(t, f.s, "j1"); after.State != engine.StateCancelled || after.Version != before.Version {
		t.Fatalf("a refused step changed the job: %s", describe(after))
	}
	// A failed write records nothing: it rolled back.
	c2 := f.mustClaim("k2", "h", 0)
	if _, err := f.e.Cancel(f.keyed(c2), "j1"); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("cancel of a cancelled job: %v", err)
	}
	f.release(c2)
	if c := f.mustClaim("k2", "other", 0); len(c.Steps) != 0 {
		t.Fatalf("a failed write left steps: %v", c.Steps)
	}

	f.complete(c, `{"answer":1}`)
	r, err := f.claim("k1", "h1", 0)
	if err != nil || r.Token != "" || string(r.Response) != `{"answer":1}` {
		t.Fatalf("claim after completion: %+v %v", r, err)
	}
	if _, err := f.claim("k1", "h2", 0); !errors.Is(err, engine.ErrIdempotencyMismatch) {
		t.Fatalf("claim of a completed key for another request: %v", err)
	}
	// The completed claim's token holds nothing any more.
	lost := (*engine.ClaimLostError)(nil)
	if err := f.e.IdempotencyComplete(f.ctx, &engine.IdempotencyCompleteParams{Key: "k1", Token: c.Token, Response: []byte("x")}); !errors.Is(err, engine.ErrIdempotencyInFlight) || !errors.As(err, &lost) || lost.Op != "complete" {
		t.Fatalf("second completion: %v, want the engine's ClaimLostError (complete)", err)
	}
	if err := f.e.IdempotencyRenew(f.ctx, &engine.IdempotencyRenewParams{Key: "k1", Token: c.Token}); !errors.Is(err, engine.ErrIdempotencyInFlight) || !errors.As(err, &lost) || lost.Op != "renew" {
		t.Fatalf("renewal of a completed claim: %v, want the engine's ClaimLostError (renew)", err)
	}
	if _, err := f.e.Retry(ctx, "j1", engine.RetryOptions{}); !errors.Is(err, engine.ErrIdempotencyInFlight) {
		t.Fatalf("a write under a completed claim: %v", err)
	}
	if n := eventCount(t, f.s, "j1", engine.EventCancelled); n != 1 {
		t.Fatalf("j1 cancelled %d times", n)
	}

	// Of concurrent claims of one free key, one gets it.
	got := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := f.claim("race", "h", 0)
			got <- err
		}()
	}
	won := 0
	for range 8 {
		err := <-got
		switch {
		case err == nil:
			won++
		case !errors.Is(err, engine.ErrIdempotencyInFlight):
			t.Fatalf("concurrent claim: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent claims of one key won", won)
	}
}

func testIdemTakeOver(t *testing.T, h Harness) {
	f := newIdem(t, h, nil)
	f.cancelled("a", "b", "d")
	f.scheduled("c")
	const claimTTL = 300 * time.Millisecond
	c1 := f.mustClaim("apply", "h", claimTTL)
	ctx1 := f.keyed(c1)
	res, err := f.e.Apply(ctx1, engine.ActionRetry, []string{"a", "b", "c"})
	if err != nil || !res[0].OK || !res[1].OK || res[2].OK {
		t.Fatalf("apply: %+v %v", res, err)
	}
	// The holder dies here, before its answer is stored. Until its claim
	// expires the key is in flight; then the next request takes it over.
	var c2 *engine.IdempotencyClaim
	eventually(t, waitLong, func() bool {
		c, err := f.claim("apply", "h", time.Minute)
		if errors.Is(err, engine.ErrIdempotencyInFlight) {
			return false
		}
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		c2 = c
		return true
	}, "the dead holder's claim is taken over")
	if c2.Token == "" || c2.Token == c1.Token {
		t.Fatalf("take-over: token %q (first %q)", c2.Token, c1.Token)
	}
	var keys []string
	for k := range c2.Steps {
		keys = append(keys, k)
	}
	if len(keys) != 2 {
		t.Fatalf("steps handed over: %v, want the two retries that committed", keys)
	}
	// The first holder's late writes are refused.
	if _, err := f.e.Retry(ctx1, "d", engine.RetryOptions{}); !errors.Is(err, engine.ErrIdempotencyInFlight) {
		t.Fatalf("a write under a lost claim: %v", err)
	}
	if _, err := f.e.Apply(ctx1, engine.ActionRetry, []string{"d"}); !errors.Is(err, engine.ErrIdempotencyInFlight) {
		t.Fatalf("apply under a lost claim: %v", err)
	}
	if j := getJob(t, f.s, "d"); j.State != engine.StateCancelled {
		t.Fatalf("a write under a lost claim changed d: %s", describe(j))
	}
	if err := f.e.IdempotencyRenew(f.ctx, &engine.IdempotencyRenewParams{Key: "apply", Token: c1.Token}); !errors.Is(err, engine.ErrIdempotencyInFlight) {
		t.Fatalf("renewal of a lost claim: %v", err)
	}
	// The new holder runs the request again: what committed is answered
	// from the record, the rest runs.
	ctx2 := f.keyed(c2)
	res2, err := f.e.Apply(ctx2, engine.ActionRetry, []string{"a", "b", "c"})
	if err != nil || !res2[0].OK || !res2[1].OK || res2[2].OK || res2[2].Reason != "wrong_state" {
		t.Fatalf("apply after take-over: %+v %v", res2, err)
	}
	retriedOnce(t, f.s, []string{"a", "b"})
	f.complete(c2, "done")
	if r, err := f.claim("apply", "h", 0); err != nil || string(r.Response) != "done" {
		t.Fatalf("after completion: %+v %v", r, err)
	}
}

func testIdemRelease(t *testing.T, h Harness) {
	f := newIdem(t, h, nil)
	f.scheduled("j")
	// Nothing committed: the record goes, the key is free for anything.
	c := f.mustClaim("k", "h", 0)
	f.release(c)
	if _, err := f.claim("k", "another", 0); err != nil {
		t.Fatalf("claim after a release with nothing committed: %v", err)
	}
	// Something committed: the next request takes over at once and gets
	// its result.
	c = f.mustClaim("k2", "h", 0)
	first, err := f.e.Cancel(f.keyed(c), "j")
	if err != nil {
		t.Fatal(err)
	}
	f.release(c)
	if _, err := f.claim("k2", "another", 0); !errors.Is(err, engine.ErrIdempotencyMismatch) {
		t.Fatalf("claim for another request after a release with a step: %v", err)
	}
	c2 := f.mustClaim("k2", "h", 0)
	if len(c2.Steps) != 1 {
		t.Fatalf("steps: %v", c2.Steps)
	}
	again, err := f.e.Cancel(f.keyed(c2), "j")
	if err != nil {
		t.Fatalf("cancel answered from the record: %v", err)
	}
	if again.State != engine.StateCancelled || again.Version != first.Version || !again.StateChangedAt.Equal(first.StateChangedAt) {
		t.Fatalf("recorded result: %s, first %s", describe(again), describe(first))
	}
	if n := eventCount(t, f.s, "j", engine.EventCancelled); n != 1 {
		t.Fatalf("j cancelled %d times", n)
	}
}

// testIdemEveryMutation runs each mutation under a key, lets its holder
// "die" after the commit (release without an answer), runs it again
// under the claim taken over, and checks that the second run answers the
// first's result and changes nothing.
func testIdemEveryMutation(t *testing.T, h Harness) {
	f := newIdem(t, h, nil)
	f.cancelled("retry-me", "rwi")
	f.scheduled("cancel-me", "delete-me", "edit-me")
	if _, err := f.e.EnqueueMany(f.ctx, []engine.EnqueueParams{{ID: "taken", Queue: "later", Kind: "fail", Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	edit := getJob(t, f.s, "edit-me")
	var bulkJobs []engine.EnqueueParams
	for i := range 50 {
		bulkJobs = append(bulkJobs, engine.EnqueueParams{Queue: "billing", Kind: "ok", Delay: time.Hour, Args: map[string]int{"i": i}})
	}
	if _, err := f.e.EnqueueMany(f.ctx, bulkJobs); err != nil {
		t.Fatal(err)
	}

	// A quarantined job on email, which is then paused.
	enqueue(t, f.e, engine.EnqueueParams{ID: "pill", Queue: "email", Kind: "boom", Args: map[string]int{"n": 1}})
	waitState(t, f.s, "pill", engine.StateQuarantined)
	if err := f.e.PauseQueue(f.ctx, "email"); err != nil {
		t.Fatal(err)
	}
	fp := getJob(t, f.s, "pill").Fingerprint

	// A bulk cancel runs only from a dry run's plan.
	cancelPlan, err := f.e.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionCancel, DryRun: true,
		Selector: engine.Filter{Queues: []string{"billing"}, States: []engine.State{engine.StateScheduled}}})
	if err != nil {
		t.Fatal(err)
	}
	var opID string
	cases := []struct {
		name string
		run  func(ctx context.Context) (any, error)
		// once checks that the mutation's effect happened once.
		once func()
	}{
		{"Retry", func(ctx context.Context) (any, error) {
			return f.e.Retry(ctx, "retry-me", engine.RetryOptions{})
		}, func() { retriedOnce(t, f.s, []string{"retry-me"}) }},
		{"Cancel", func(ctx context.Context) (any, error) {
			return f.e.Cancel(ctx, "cancel-me")
		}, func() {
			if n := eventCount(t, f.s, "cancel-me", engine.EventCancelled); n != 1 {
				t.Errorf("cancelled %d times", n)
			}
		}},
		{"UpdatePayload", func(ctx context.Context) (any, error) {
			return f.e.UpdatePayload(ctx, "edit-me", json.RawMessage(`{"fixed":true}`), edit.Version)
		}, func() {
			if n := eventCount(t, f.s, "edit-me", engine.EventPayloadEdited); n != 1 {
				t.Errorf("payload edited %d times", n)
			}
		}},
		{"RetryWithInput", func(ctx context.Context) (any, error) {
			// No id given: the engine makes one up, so a second run that
			// was not answered from the record would make another copy.
			return f.e.RetryWithInput(ctx, "rwi", engine.RetryWithInputParams{Payload: json.RawMessage(`{"fixed":1}`)})
		}, func() {
			if j := getJob(t, f.s, "rwi"); j.SupersededBy == "" {
				t.Errorf("rwi not superseded")
			}
		}},
		{"Delete", func(ctx context.Context) (any, error) {
			return nil, f.e.Delete(ctx, "delete-me")
		}, func() {
			if !gone(f.s, "delete-me") {
				t.Errorf("delete-me not deleted")
			}
		}},
		{"EnqueueMany", func(ctx context.Context) (any, error) {
			res, err := f.e.EnqueueMany(ctx, []engine.EnqueueParams{
				{Queue: "later", Kind: "ok", Delay: time.Hour, Args: map[string]int{"new": 1}}, // id made up
				{ID: "taken", Queue: "later", Kind: "ok", Delay: time.Hour},                    // conflict
				{Queue: "later", Kind: "bad kind"},                                             // refused before the store
			})
			if err != nil {
				return nil, err
			}
			out := make([]string, len(res))
			for i, r := range res {
				switch {
				case r.Err != nil:
					out[i] = "error:" + engine.ReasonCode(r.Err)
				default:
					out[i] = r.Job.ID + fmt.Sprintf(" existing=%v", r.Existing)
				}
			}
			return out, nil
		}, func() {}},
		{"Bulk", func(ctx context.Context) (any, error) {
			// Paced at one job a second over 50 jobs: still running when
			// it is cancelled below.
			res, err := f.e.Bulk(ctx, engine.BulkParams{Action: engine.ActionCancel, RatePerSecond: 1, Plan: cancelPlan.Plan})
			if err == nil && res.Operation != nil {
				opID = res.Operation.ID
			}
			return res, err
		}, func() {
			ops, err := f.e.Operations(f.ctx, 50, "")
			if err != nil || len(ops.Operations) != 1 {
				t.Errorf("operations: %v %v", ops, err)
			}
		}},
		{"PauseQueue", func(ctx context.Context) (any, error) {
			return nil, f.e.PauseQueue(ctx, "billing")
		}, func() {}},
		{"ReleaseFingerprint", func(ctx context.Context) (any, error) {
			return f.e.ReleaseFingerprint(ctx, fp)
		}, func() {
			if n := eventCount(t, f.s, "pill", engine.EventReleased); n != 1 {
				t.Errorf("pill released %d times", n)
			}
		}},
	}
	for i, tc := range cases {
		key := fmt.Sprintf("key-%d", i)
		c := f.mustClaim(key, "h", 0)
		first, err := tc.run(f.keyed(c))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f.release(c) // the holder dies after the commit
		c2 := f.mustClaim(key, "h", 0)
		if len(c2.Steps) != 1 {
			t.Fatalf("%s: steps handed over: %v", tc.name, c2.Steps)
		}
		again, err := tc.run(f.keyed(c2))
		if err != nil {
			t.Fatalf("%s answered from the record: %v", tc.name, err)
		}
		a, _ := json.Marshal(first)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Errorf("%s: the answer from the record differs:\n first %s\n again %s", tc.name, a, b)
		}
		tc.once()
		f.complete(c2, "ok")
	}
	if opID == "" {
		t.Fatal("bulk made no operation")
	}
	c := f.mustClaim("cancel-op", "h", 0)
	first, err := f.e.CancelOperation(f.keyed(c), opID)
	if err != nil {
		t.Fatal(err)
	}
	f.release(c)
	c2 := f.mustClaim("cancel-op", "h", 0)
	again, err := f.e.CancelOperation(f.keyed(c2), opID)
	if err != nil || again.Status != engine.OperationCancelled || first.FinishedAt == nil || again.FinishedAt == nil ||
		!again.FinishedAt.Equal(*first.FinishedAt) {
		t.Fatalf("cancel operation from the record: %+v %v (first %+v)", again, err, first)
	}
	if n := len(f.listAll(t, engine.Filter{Queues: []string{"later"}, States: []engine.State{engine.StateScheduled}}, 50)); n != 3 {
		// taken, edit-me and the one EnqueueMany made up (cancel-me was
		// cancelled, delete-me deleted).
		t.Errorf("%d scheduled jobs on later, want 3", n)
	}
	if n := len(f.listAll(t, engine.Filter{Queues: []string{"later"}, States: []engine.State{engine.StateAvailable}}, 50)); n != 2 {
		// retry-me and the copy of rwi.
		t.Errorf("%d available jobs on later, want 2", n)
	}
}

func testIdemExpiry(t *testing.T, h Harness) {
	// No maintenance: this check sweeps by itself and counts.
	f := newIdem(t, h, func(c *engine.Config) { c.NoMaintenance = true })
	ttl := 300 * time.Millisecond
	claim := func(key, hash string) (*engine.IdempotencyClaim, error) {
		return f.e.IdempotencyClaim(f.ctx, &engine.IdempotencyClaimParams{Key: key, RequestHash: hash, TTL: ttl, ClaimTTL: ttl})
	}
	for _, k := range []string{"e1", "e2", "e3"} {
		c, err := claim(k, "h")
		if err != nil {
			t.Fatal(err)
		}
		f.complete(c, "r")
	}
	live := f.mustClaim("live", "h", 0) // 24 h: not swept
	f.complete(live, "r")
	// Past the TTL a key is free again, whatever the request (before it,
	// another request is refused: see ClaimReplayMismatchInFlight).
	eventually(t, waitLong, func() bool {
		c, err := claim("e1", "other")
		return err == nil && c.Token != ""
	}, "e1 expires")
	is := f.s
	swept := 0
	eventually(t, waitLong, func() bool {
		n, err := is.IdempotencyDeleteExpired(f.ctx, &backend.IdempotencyDeleteExpiredParams{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		swept += n
		return swept >= 2
	}, "expired records swept")
	for _, k := range []string{"e2", "e3"} {
		if _, err := claim(k, "other"); err != nil {
			t.Fatalf("%s after the sweep: %v", k, err)
		}
	}
	if r, err := f.claim("live", "h", 0); err != nil || string(r.Response) != "r" {
		t.Fatalf("a live record after the sweep: %+v %v", r, err)
	}
	if engine.DefaultIdempotencyTTL != 24*time.Hour {
		t.Fatalf("default TTL %s", engine.DefaultIdempotencyTTL)
	}
}
