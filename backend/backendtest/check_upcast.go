package backendtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

func upcastChecks() []check {
	return []check{
		{name: "OldVersionUpcast", fn: testUpcast},
		{name: "NoUpcastPathUndecodable", fn: testNoUpcastPath},
		{name: "TypedPayloadMismatchUndecodable", fn: testTypedMismatch},
		{name: "NewerVersionNotClaimed", fn: testNewerVersion},
	}
}

// addField is an upcaster that sets one field of the payload object.
func addField(name string, value any) engine.Upcaster {
	return func(p json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, err
		}
		if _, ok := m[name]; ok {
			return nil, fmt.Errorf("field %s already there: upcaster ran twice", name)
		}
		m[name] = value
		return json.Marshal(m)
	}
}

func testUpcast(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var mu sync.Mutex
	seen := map[string]*engine.Job{}
	startEngine(t, s, fast("w1", "q"), engine.Kind{
		Name: "up", Version: 3,
		Upcasters: map[int]engine.Upcaster{1: addField("v2", true), 2: addField("v3", "yes")},
		Handler: func(_ context.Context, j *engine.Job) error {
			mu.Lock()
			seen[j.ID] = j.Clone()
			mu.Unlock()
			return nil
		},
	})
	e := newEngine(t, s, fast("client")) // a client that does not know the kind
	enqueue(t, e, engine.EnqueueParams{ID: "v1", Queue: "q", Kind: "up", SchemaVersion: 1, Payload: json.RawMessage(`{"a":1}`)})
	enqueue(t, e, engine.EnqueueParams{ID: "v2", Queue: "q", Kind: "up", SchemaVersion: 2, Payload: json.RawMessage(`{"a":2,"v2":false}`)})
	enqueue(t, e, engine.EnqueueParams{ID: "v3", Queue: "q", Kind: "up", SchemaVersion: 3, Payload: json.RawMessage(`{"a":3,"v2":false,"v3":"no"}`)})
	want := map[string]string{
		"v1": `{"a":1,"v2":true,"v3":"yes"}`,
		"v2": `{"a":2,"v2":false,"v3":"yes"}`,
		"v3": `{"a":3,"v2":false,"v3":"no"}`,
	}
	for id, payload := range want {
		j := waitState(t, s, id, engine.StateCompleted)
		mu.Lock()
		hj := seen[id]
		mu.Unlock()
		if hj == nil || hj.SchemaVersion != 3 || !jsonEqual(hj.Payload, []byte(payload)) {
			t.Fatalf("%s reached the handler as %+v, want version 3 payload %s", id, hj, payload)
		}
		if j.Attempt != 0 || len(j.Errors) != 0 {
			t.Fatalf("%s: %s", id, describe(j))
		}
	}
	// The stored payload is not rewritten by an upcast.
	if j := getJob(t, s, "v1"); j.SchemaVersion != 1 || !jsonEqual(j.Payload, []byte(`{"a":1}`)) {
		t.Fatalf("stored v1 job changed: version %d payload %s", j.SchemaVersion, j.Payload)
	}
}

func testNoUpcastPath(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var calls atomic.Int64
	e := startEngine(t, s, fast("w1", "q"), engine.Kind{
		Name: "gap", Version: 3,
		Upcasters: map[int]engine.Upcaster{2: addField("v3", true)}, // nothing from 1
		Handler:   func(context.Context, *engine.Job) error { calls.Add(1); return nil },
	})
	enqueue(t, e, engine.EnqueueParams{ID: "old", Queue: "q", Kind: "gap", SchemaVersion: 1, Payload: json.RawMessage(`{"a":1}`), MaxAttempts: 5})
	enqueue(t, e, engine.EnqueueParams{ID: "mid", Queue: "q", Kind: "gap", SchemaVersion: 2, Payload: json.RawMessage(`{"a":2}`)})
	j := waitState(t, s, "old", engine.StateUndecodable)
	if j.Attempt != 0 || j.CrashAttempt != 0 || j.TerminalReason != engine.ReasonUndecodable || j.FinalizedAt == nil {
		t.Fatalf("no upcast path: %s", describe(j))
	}
	if len(j.Errors) != 1 || !containsFold(j.Errors[0].Message, "upcast") {
		t.Fatalf("errors %+v: want one naming the missing upcaster", j.Errors)
	}
	if ev := events(t, s, "old"); !hasEvent(ev, engine.EventUndecodable) {
		t.Fatalf("events %v: want undecodable", eventKinds(ev))
	}
	waitState(t, s, "mid", engine.StateCompleted)
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times, want once (for the v2 job only)", calls.Load())
	}
}

func testTypedMismatch(t *testing.T, h Harness) {
	s := h.NewStore(t)
	type args struct {
		N int `json:"n"`
	}
	var got atomic.Int64
	e := startEngine(t, s, fast("w1", "q"), engine.Kind{
		Name: "typed",
		Handler: engine.TypedHandler(func(_ context.Context, _ *engine.Job, a args) error {
			got.Add(int64(a.N))
			return nil
		}),
	})
	enqueue(t, e, engine.EnqueueParams{ID: "bad", Queue: "q", Kind: "typed", Payload: json.RawMessage(`{"n":"not a number"}`), MaxAttempts: 5})
	enqueue(t, e, engine.EnqueueParams{ID: "good", Queue: "q", Kind: "typed", Args: args{N: 7}})
	j := waitState(t, s, "bad", engine.StateUndecodable)
	if j.Attempt != 0 || j.CrashAttempt != 0 || len(j.Errors) != 1 || j.FinalizedAt == nil {
		t.Fatalf("mismatched payload: %s errors %+v", describe(j), j.Errors)
	}
	waitState(t, s, "good", engine.StateCompleted)
	if got.Load() != 7 {
		t.Fatalf("typed handler saw %d, want 7 (the bad job must not reach it)", got.Load())
	}
}

func testNewerVersion(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var calls atomic.Int64
	e := newEngine(t, s, fast("w1", "q"), engine.Kind{
		Name: "up", Version: 3,
		Upcasters: map[int]engine.Upcaster{1: addField("v2", true), 2: addField("v3", true)},
		Handler:   func(context.Context, *engine.Job) error { calls.Add(1); return nil },
	})
	// The newer job is older and first in claim order: a worker that could
	// claim it would have claimed it before (or with) the one after it.
	enqueue(t, e, engine.EnqueueParams{ID: "v4", Queue: "q", Kind: "up", SchemaVersion: 4, Payload: json.RawMessage(`{"a":4}`)})
	enqueue(t, e, engine.EnqueueParams{ID: "v3", Queue: "q", Kind: "up", SchemaVersion: 3, Payload: json.RawMessage(`{"a":3}`)})
	start(t, e)
	waitState(t, s, "v3", engine.StateCompleted)
	enqueue(t, e, engine.EnqueueParams{ID: "v3b", Queue: "q", Kind: "up", SchemaVersion: 3, Payload: json.RawMessage(`{"a":33}`)})
	waitState(t, s, "v3b", engine.StateCompleted)
	j := getJob(t, s, "v4")
	if j.State != engine.StateAvailable || j.Fence != 0 || j.AttemptedAt != nil || j.Attempt != 0 || len(j.Errors) != 0 {
		t.Fatalf("a job newer than the worker was touched: %s", describe(j))
	}
	if calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2", calls.Load())
	}
}
