package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Dead-letter routes of the deaths a claim writes: jobs past their
// deadline, archived instead of run.

// claimDeadlineRouted is the engine's claim write for jobs past their
// deadline, with routes: kind k1 to triage-k1 on queue dlq, every other
// kind to triage-default on its own queue.
func claimDeadlineRouted(worker string) backend.ClaimDeadlineWrite {
	p := backend.JobClaimParams{WorkerID: worker}
	withDeadlinePlan(&p)
	pd := p.PastDeadline
	pd.DeadLetter = &backend.DeadLetterRoutes{
		ByKind: map[string]*backend.DeadLetterRoute{
			"k1": {Kind: "triage-k1", Queue: "dlq", SchemaVersion: 1, MaxAttempts: 3, Actor: worker},
		},
		Default: &backend.DeadLetterRoute{Kind: "triage-default", SchemaVersion: 1, MaxAttempts: 3, Actor: worker},
	}
	return pd
}

// testDeadLetterAtClaim: the claim that archives jobs past their deadline
// routes each death in the same write, by its kind's rule else the
// default, with the dead job's payload; a dead-letter job past its
// deadline is archived and not routed; a dead-letter job that exists and
// is terminal is retried with the new death.
func testDeadLetterAtClaim(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	past := storeNow(t, s).Add(-time.Second)
	late := func(id, kind string) *backend.JobInsertParams {
		j := djob(id, "q", kind)
		j.Deadline = &past
		j.Tags = []string{"red"}
		return j
	}
	// dlq:c is a dead-letter job that triaged an earlier death of c and
	// completed; c was redriven and now dies again at claim.
	insertRes(t, s, djob("dlq:c", "q", "triage-default"))
	first := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 1, Kinds: map[string]int{"triage-default": 1}})
	if len(first.Jobs) != 1 {
		t.Fatalf("claimed %v, want dlq:c", ids(first.Jobs))
	}
	if errs, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(first.Jobs[0])}}}); err != nil || errs[0] != nil {
		t.Fatalf("complete dlq:c: %v %v", err, errs)
	}
	insertRes(t, s, late("a", "k1"), late("b", "k2"), late("c", "k2"), late("dlq:x", "k2"))

	pd := claimDeadlineRouted("w1")
	res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 10, PastDeadline: pd,
		Kinds: map[string]int{"k1": 1, "k2": 1}})
	if len(res.Jobs) != 0 {
		t.Fatalf("claimed %v", ids(res.Jobs))
	}
	if got := sortedIDs(deadAtClaim(res)); !slices.Equal(got, []string{"a", "b", "c", "dlq:x"}) {
		t.Fatalf("dead at claim %v, want a b c dlq:x", got)
	}
	want := map[string]struct{ kind, queue, deadKind string }{
		"a": {"triage-k1", "dlq", "k1"},
		"b": {"triage-default", "q", "k2"},
		"c": {"triage-default", "q", "k2"},
	}
	for id, w := range want {
		d := getJob(t, s, engine.DeadLetterID(id))
		if d.State != engine.StateAvailable || d.Kind != w.kind || d.Queue != w.queue || d.DeadLetterOf != id || len(d.Tags) != 0 {
			t.Fatalf("dead letter of %s: %s dead_letter_of %q tags %v", id, describe(d), d.DeadLetterOf, d.Tags)
		}
		var b engine.DeadLetterPayload
		if err := json.Unmarshal(d.Payload, &b); err != nil {
			t.Fatalf("dead letter of %s: payload %s: %v", id, d.Payload, err)
		}
		if b.DeadJobID != id || b.Kind != w.deadKind || b.Queue != "q" || !jsonEqual(b.Payload, []byte(`{"n":"`+id+`"}`)) ||
			b.Error != pd.LastError || b.Reason != engine.ReasonDeadlineExceeded {
			t.Fatalf("dead letter of %s: payload %s", id, d.Payload)
		}
		if fp, err := engine.FingerprintOf(d.Kind, d.Payload); err != nil || d.Fingerprint != fp {
			t.Fatalf("dead letter of %s: fingerprint %q, want %q (%v)", id, d.Fingerprint, fp, err)
		}
	}
	if !hasEvent(events(t, s, "dlq:c"), engine.EventRetried) {
		t.Fatalf("dlq:c was not retried with the new death: events %v", eventKinds(events(t, s, "dlq:c")))
	}
	if j := getJob(t, s, "dlq:x"); j.State != engine.StateArchived {
		t.Fatalf("dlq:x past its deadline: %s", describe(j))
	}
	if tryJob(s, "dlq:dlq:x") != nil {
		t.Fatal("a dead-letter job that died at claim was routed again")
	}
	if h.Truth != nil {
		checkCounts(t, s, h.Truth(t, s), "after deadline deaths routed at claim")
	}
}

// testDeadLetterAtClaimEngine: through the engine, a job past its deadline
// dies at claim and is routed by its kind's rule, which beats the
// default; a dead-letter job past its deadline is not routed; OnDead fires
// once for each death.
func testDeadLetterAtClaimEngine(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cfg := fast("w", "q")
	cfg.DeadLetter = &engine.DeadLetterRule{Kind: "triage-default"}
	ran := func(context.Context, *engine.Job) error { return errors.New("a job past its deadline ran") }
	e := newEngine(t, s, cfg,
		engine.Kind{Name: "k1", Handler: ran, DeadLetter: &engine.DeadLetterRule{Kind: "triage-k1", Queue: "dlq"}},
		engine.Kind{Name: "k2", Handler: ran})
	var mu sync.Mutex
	deaths := map[string]int{}
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) {
		mu.Lock()
		deaths[ev.Job.ID]++
		mu.Unlock()
	})
	// Enqueued before Start with a deadline already past: the first claim
	// meets them.
	past := storeNow(t, s).Add(-time.Second)
	for _, p := range []engine.EnqueueParams{
		{ID: "j1", Queue: "q", Kind: "k1", Deadline: &past},
		{ID: "j2", Queue: "q", Kind: "k2", Deadline: &past},
		{ID: "dlq:j3", Queue: "q", Kind: "k2", Deadline: &past},
	} {
		enqueue(t, e, p)
	}
	start(t, e)
	for _, id := range []string{"j1", "j2", "dlq:j3"} {
		if j := waitState(t, s, id, engine.StateArchived); j.TerminalReason != engine.ReasonDeadlineExceeded {
			t.Fatalf("%s: %s", id, describe(j))
		}
	}
	if d := getJob(t, s, "dlq:j1"); d.Kind != "triage-k1" || d.Queue != "dlq" || d.DeadLetterOf != "j1" {
		t.Fatalf("dlq:j1 %s", describe(d))
	}
	if d := getJob(t, s, "dlq:j2"); d.Kind != "triage-default" || d.Queue != "q" || d.DeadLetterOf != "j2" {
		t.Fatalf("dlq:j2 %s", describe(d))
	}
	if tryJob(s, "dlq:dlq:j3") != nil {
		t.Fatal("a dead-letter job past its deadline was routed")
	}
	eventually(t, waitLong, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return deaths["j1"] == 1 && deaths["j2"] == 1 && deaths["dlq:j3"] == 1
	}, "OnDead for the three deaths")
}
