package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

func TestIdempotency(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	away := new(atomic.Bool)
	srv := NewServer(retryStoreAway{Engine: fx.eng, away: away}, ServerOptions{Tokens: testTokens})
	op := tokenOf(engine.RoleOperator)
	retry := req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"retry","ids":["JOB_1"]}`, key: "k1", token: op}

	first := send(t, srv, retry)
	wantStatus(t, first, 200)
	if first.Header().Get(ReplayedHeader) != "" {
		t.Fatal("a first request marked replayed")
	}
	before := fx.snapshot(t)
	replay := send(t, srv, retry)
	wantStatus(t, replay, 200)
	if replay.Header().Get(ReplayedHeader) != "true" || replay.Body.String() != first.Body.String() {
		t.Fatalf("replay: header %q body %s", replay.Header().Get(ReplayedHeader), replay.Body.String())
	}
	if after, n := fx.snapshot(t), countEvents(t, fx.store, "JOB_1", engine.EventRetried); after != before || n != 1 {
		t.Fatalf("the replay ran again: JOB_1 retried %d times; before:\n%s\nafter:\n%s", n, before, after)
	}

	// The same key with another body, or another query: 422.
	other := retry
	other.body = `{"action":"retry","ids":["JOB_2"]}`
	w := send(t, srv, other)
	wantStatus(t, w, 422)
	if decode[errorBody](t, w).Reason != reasonIdempotencyMismatch || fx.state(t, "JOB_2") != engine.StateArchived {
		t.Fatalf("mismatch: %s", w.Body.String())
	}

	// Keys are scoped to the caller and the path: the same key elsewhere
	// is another key.
	admin := retry
	admin.token = tokenOf(engine.RoleAdmin)
	wantStatus(t, send(t, srv, admin), 200)
	if send(t, srv, admin).Header().Get(ReplayedHeader) != "true" {
		t.Fatal("the admin's own repeat is not replayed")
	}
	elsewhere := req{method: "POST", path: "/api/v1/jobs/JOB_3/retry", key: "k1", token: op}
	wantStatus(t, send(t, srv, elsewhere), 200)
	if fx.state(t, "JOB_3") != engine.StateAvailable {
		t.Fatal("the same key on another path did not run")
	}

	// An error answer is kept too; a refusal before running is not.
	wrong := req{method: "POST", path: "/api/v1/jobs/WAIT_1/retry", key: "k2", token: op}
	wantStatus(t, send(t, srv, wrong), 409)
	if w := send(t, srv, wrong); w.Code != 409 || w.Header().Get(ReplayedHeader) != "true" {
		t.Fatalf("replayed error: %d %q", w.Code, w.Header().Get(ReplayedHeader))
	}
	bad := req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":`, key: "k3", token: op}
	wantStatus(t, send(t, srv, bad), 400)
	good := bad
	good.body = `{"action":"retry","ids":["JOB_4"]}`
	wantStatus(t, send(t, srv, good), 200)

	// A store outage is not kept: the retry runs once the store is back.
	away.Store(true)
	down := req{method: "POST", path: "/api/v1/jobs/JOB_5/retry", key: "k4", token: op}
	wantStatus(t, send(t, srv, down), 503)
	away.Store(false)
	wantStatus(t, send(t, srv, down), 200)
	if fx.state(t, "JOB_5") != engine.StateAvailable {
		t.Fatal("the retry after the outage did not run")
	}
}

func TestIdempotencyInFlight(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := NewServer(retryHangs{Engine: fx.eng, entered: entered, release: release}, ServerOptions{})
	r := req{method: "POST", path: "/api/v1/jobs/JOB_1/retry", key: "slow"}
	var wg sync.WaitGroup
	var first *httptest.ResponseRecorder
	wg.Go(func() { first = send(t, srv, r) })
	// The first request holds the key once its retry has begun.
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the first request never started")
	}
	w := send(t, srv, r)
	wantStatus(t, w, http.StatusConflict)
	if decode[errorBody](t, w).Reason != reasonIdempotencyInFlight {
		t.Fatalf("in flight: %s", w.Body.String())
	}
	close(release)
	wg.Wait()
	wantStatus(t, first, 200)
	if w := send(t, srv, r); w.Header().Get(ReplayedHeader) != "true" {
		t.Fatal("after the first finished, the repeat is not replayed")
	}
	if n := countEvents(t, fx.store, "JOB_1", engine.EventRetried); n != 1 {
		t.Fatalf("JOB_1 retried %d times, want once", n)
	}
}

func TestMemoryIdempotencyStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemoryIdempotencyStore(time.Hour, 3, 0)
	m.now = func() time.Time { return now }
	holds := map[string]IdempotencyHold{}
	begin := func(key, hash string) IdempotencyOutcome {
		t.Helper()
		o, _, h, err := m.Begin(ctx, key, hash)
		if err != nil {
			t.Fatal(err)
		}
		if (o == IdempotencyStarted) != (h != nil) {
			t.Fatalf("outcome %v with hold %v", o, h)
		}
		if h != nil {
			holds[key] = h
		}
		return o
	}
	if begin("a", "h") != IdempotencyStarted || begin("a", "h") != IdempotencyInFlight || begin("a", "x") != IdempotencyMismatch {
		t.Fatal("begin outcomes")
	}
	if err := holds["a"].Complete(ctx, StoredResponse{Status: 201, Header: http.Header{"Etag": {`"2"`}}, Body: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	o, resp, _, _ := m.Begin(ctx, "a", "h")
	if o != IdempotencyReplay || resp.Status != 201 || string(resp.Body) != "ok" || resp.Header.Get("ETag") != `"2"` {
		t.Fatalf("replay %v %+v", o, resp)
	}
	// Bounded: a fourth key pushes out the oldest.
	begin("b", "h")
	begin("c", "h")
	begin("d", "h")
	if m.Len() != 3 || begin("a", "h") != IdempotencyStarted {
		t.Fatalf("eviction: %d entries", m.Len())
	}
	// Expired after the TTL.
	now = now.Add(2 * time.Hour)
	if begin("d", "other") != IdempotencyStarted || m.Len() != 1 {
		t.Fatalf("expiry: %d entries", m.Len())
	}
	// Abandoned keys are free again.
	_ = holds["d"].Abandon(ctx)
	if begin("d", "x") != IdempotencyStarted {
		t.Fatal("abandoned key not free")
	}
	// A hold whose record was evicted and claimed again touches nothing.
	stale := holds["d"]
	m.mu.Lock()
	m.remove(m.entries["d"])
	m.mu.Unlock()
	if begin("d", "y") != IdempotencyStarted {
		t.Fatal("evicted key not free")
	}
	_ = stale.Complete(ctx, StoredResponse{Status: 200})
	if begin("d", "y") != IdempotencyInFlight {
		t.Fatal("a stale hold completed the new claim")
	}
	// Bounded in bytes too.
	small := NewMemoryIdempotencyStore(time.Hour, 0, 1000)
	for i := range 20 {
		k := string(rune('a' + i))
		_, _, h, _ := small.Begin(ctx, k, "h")
		_ = h.Complete(ctx, StoredResponse{Status: 200, Body: make([]byte, 200)})
	}
	if small.Len() > 5 {
		t.Fatalf("byte bound: %d entries of 200 bytes under 1000", small.Len())
	}
}
