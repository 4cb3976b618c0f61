package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// clientSetup serves a new fixture's engine over HTTP and returns a
// client of it.
func clientSetup(t *testing.T, opts ServerOptions, token string) (*fixture, *httptest.Server, *Client) {
	t.Helper()
	fx := newFixture(t)
	hs, c := serve(t, fx.eng, opts, token)
	return fx, hs, c
}

// serve serves ctl over HTTP and returns a client of it.
func serve(t *testing.T, ctl engine.Control, opts ServerOptions, token string) (*httptest.Server, *Client) {
	t.Helper()
	hs := httptest.NewServer(NewServer(ctl, opts))
	t.Cleanup(hs.Close)
	return hs, NewClient(hs.URL, token, ClientOptions{Timeout: 5 * time.Second, RetryBackoff: time.Millisecond})
}

func TestClientMapsErrorsBack(t *testing.T) {
	t.Parallel()
	fx, _, c := clientSetup(t, ServerOptions{}, "")
	ctx := engine.WithActor(context.Background(), "maya")

	if _, err := c.GetJob(ctx, "nope", false); !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing job: %v", err)
	}
	if _, err := c.Retry(ctx, "WAIT_1", engine.RetryOptions{}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("wrong state: %v", err)
	}
	if _, err := c.Retry(ctx, "PILL_1", engine.RetryOptions{}); !errors.Is(err, engine.ErrQuarantined) {
		t.Fatalf("quarantined: %v", err)
	}
	if _, err := c.UpdatePayload(ctx, "JOB_1", json.RawMessage(`{"a":1}`), 0); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("stale version: %v", err)
	}
	if _, err := c.UpdatePayload(ctx, "JOB_1", json.RawMessage(`{"a":"`+strings.Repeat("x", 1<<20)+`"}`), deadVersion); !errors.Is(err, engine.ErrPayloadTooLarge) || !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := c.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{"dead"}}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("bad filter: %v", err)
	}
	if _, err := c.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("empty selector: %v", err)
	}
	if _, err := c.RetryWithInput(ctx, "JOB_1", engine.RetryWithInputParams{Payload: json.RawMessage(`nope`)}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("bad input: %v", err)
	}
	var apiErr *Error
	if _, err := c.Operation(ctx, "nope"); !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Reason != "not_found" {
		t.Fatalf("typed error: %#v", err)
	}
	_, unsupported := serve(t, queuesUnsupported{fx.eng}, ServerOptions{}, "")
	if _, err := unsupported.Queues(ctx); !errors.Is(err, engine.ErrUnsupported) {
		t.Fatalf("unsupported: %v", err)
	}

	// Roles and read-only mode come back as ErrUnauthorized, ErrForbidden.
	_, anon := serve(t, fx.eng, ServerOptions{Tokens: testTokens}, "")
	if _, err := anon.Queues(ctx); !errors.Is(err, ErrUnauthorized) || !errors.Is(err, engine.ErrDenied) {
		t.Fatalf("no token: %v", err)
	}
	_, viewer := serve(t, fx.eng, ServerOptions{Tokens: testTokens}, tokenOf(engine.RoleViewer))
	if _, err := viewer.Retry(ctx, "JOB_1", engine.RetryOptions{}); !errors.Is(err, ErrForbidden) || !errors.Is(err, engine.ErrDenied) {
		t.Fatalf("viewer retry: %v", err)
	}
	if m, err := viewer.Meta(ctx); err != nil || m.Role != engine.RoleViewer || m.Actor != "vera/maya" {
		t.Fatalf("viewer meta: %+v %v", m, err)
	}

	if _, err := NewClient("ftp://x", "", ClientOptions{}).Queues(ctx); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("bad url: %v", err)
	}
}

func TestClientRoundTrips(t *testing.T) {
	t.Parallel()
	fx, _, c := clientSetup(t, ServerOptions{}, "")
	ctx := engine.WithActor(context.Background(), "maya")

	page, err := c.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"email"}}})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != "EMAIL_1" {
		t.Fatalf("list: %+v %v", page, err)
	}
	d, err := c.GetJob(ctx, "JOB_1", true)
	if err != nil || !strings.Contains(string(d.Job.Payload), "customer") {
		t.Fatalf("detail: %+v %v", d, err)
	}
	j, err := c.Retry(ctx, "JOB_1", engine.RetryOptions{})
	if a := fx.actors(t, "JOB_1", engine.EventRetried); err != nil || j.State != engine.StateAvailable || !slices.Equal(a, []string{"maya"}) {
		t.Fatalf("retry: %+v %v by %q", j, err, a)
	}
	if _, err := c.Cancel(ctx, "WAIT_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReleaseJob(ctx, "HELD_1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "JOB_5"); err != nil || fx.state(t, "JOB_5") != "" {
		t.Fatalf("delete: %v", err)
	}
	if j, err := c.UpdatePayload(ctx, "JOB_2", json.RawMessage(`{"b":2}`), deadVersion); err != nil || j.Version != deadVersion+1 {
		t.Fatalf("edit: %+v %v", j, err)
	}
	if j, err := c.RetryWithInput(ctx, "JOB_3", engine.RetryWithInputParams{ID: "JOB_3b", Payload: json.RawMessage(`{"c":3}`)}); err != nil || j.ID != "JOB_3b" {
		t.Fatalf("retry with input: %+v %v", j, err)
	}
	res, err := c.Apply(ctx, engine.ActionRetry, []string{"JOB_4", "nope"})
	if err != nil || len(res) != 2 || !res[0].OK || res[1].Reason != "not_found" {
		t.Fatalf("apply: %+v %v", res, err)
	}
	br, err := c.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{Queues: []string{"email"}}, DryRun: true})
	if err != nil || br.Matched != 1 {
		t.Fatalf("dry run: %+v %v", br, err)
	}
	br, err = c.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{Queues: []string{"email"}}})
	if err != nil || br.Operation == nil || br.Operation.CreatedBy != "maya" {
		t.Fatalf("bulk: %+v %v", br, err)
	}
	if ops, err := c.Operations(ctx, 10, ""); err != nil || len(ops.Operations) != 1 {
		t.Fatalf("operations: %+v %v", ops, err)
	}
	if op, err := c.CancelOperation(ctx, br.Operation.ID); err != nil || op.Status != engine.OperationCancelled {
		t.Fatalf("cancel operation: %+v %v", op, err)
	}
	// The pill's fingerprint is quarantined: an enqueue of it is refused.
	res2, err := c.EnqueueMany(ctx, []engine.EnqueueParams{
		{ID: "n1", Kind: "send", Args: map[string]int{"a": 1}, Timeout: time.Minute},
		{Kind: "charge", Payload: json.RawMessage(pillPayload)},
	})
	if err != nil || res2[0].Err != nil || res2[0].Job.Timeout != time.Minute || !errors.Is(res2[1].Err, engine.ErrQuarantined) {
		t.Fatalf("enqueue: %+v %v", res2, err)
	}
	// HELD_1 was released on its own: the record stays, holding none.
	if fps, err := c.Quarantine(ctx); err != nil || len(fps) != 1 || fps[0].Fingerprint != pillFingerprint {
		t.Fatalf("quarantine: %+v %v", fps, err)
	}
	if n, err := c.ReleaseFingerprint(ctx, pillFingerprint); err != nil || n != 0 {
		t.Fatalf("release fingerprint: %d %v", n, err)
	}
	if err := c.PauseQueue(ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	qs, err := c.Queues(ctx)
	if i := slices.IndexFunc(qs, func(q engine.QueueInfo) bool { return q.Name == "billing" }); err != nil || i < 0 || !qs[i].Paused {
		t.Fatalf("queues: %+v %v", qs, err)
	}
	if err := c.ResumeQueue(ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	if cs, err := c.Counts(ctx, "email"); err != nil || len(cs.Queues) != 1 {
		t.Fatalf("counts: %+v %v", cs, err)
	}
	// Dead still: JOB_2, JOB_3 and PILL_1 in billing, EMAIL_1 (its
	// operation cancelled before it ran): a group per queue, each
	// selecting its own.
	gs, err := c.ErrorGroups(ctx, engine.Filter{})
	if err != nil || len(gs) != 2 {
		t.Fatalf("error groups: %+v %v", gs, err)
	}
	for _, g := range gs {
		if g.Pattern != engine.NormalizeError("card declined") || !slices.Equal(g.Selector.Queues, []string{g.Queue}) {
			t.Fatalf("error group %+v", g)
		}
	}
}

// flaky answers the first n requests with 503 (or drops the connection),
// then passes them on; it records each request's idempotency key.
type flaky struct {
	next http.Handler
	n    atomic.Int32
	drop bool
	mu   sync.Mutex
	keys []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.keys = append(f.keys, r.Header.Get(IdempotencyHeader))
	f.mu.Unlock()
	if f.n.Add(-1) >= 0 {
		if f.drop {
			panic(http.ErrAbortHandler)
		}
		writeJSON(w, 503, errorBody{Error: "try again", Reason: reasonUnavailable}) // no Retry-After: the test stays quick
		return
	}
	f.next.ServeHTTP(w, r)
}

func TestClientRetries(t *testing.T) {
	t.Parallel()
	for _, drop := range []bool{false, true} {
		fl := &flaky{next: NewServer(newFixture(t).eng, ServerOptions{}), drop: drop}
		fl.n.Store(2)
		hs := httptest.NewServer(fl)
		defer hs.Close()
		c := NewClient(hs.URL, "", ClientOptions{RetryBackoff: time.Millisecond})
		if _, err := c.Retry(context.Background(), "JOB_1", engine.RetryOptions{}); err != nil {
			t.Fatalf("drop %v: retry through two failures: %v", drop, err)
		}
		if len(fl.keys) != 3 || fl.keys[0] == "" || fl.keys[0] != fl.keys[1] || fl.keys[1] != fl.keys[2] {
			t.Fatalf("drop %v: keys across attempts: %q", drop, fl.keys)
		}
		fl.n.Store(10)
		few := NewClient(hs.URL, "", ClientOptions{RetryBackoff: time.Millisecond, Retries: 2})
		if _, err := few.Queues(context.Background()); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("drop %v: out of retries: %v", drop, err)
		}
	}
	// Not retried: an answer that will not change.
	fl := &flaky{next: NewServer(newFixture(t).eng, ServerOptions{})}
	hs := httptest.NewServer(fl)
	defer hs.Close()
	c := NewClient(hs.URL, "", ClientOptions{RetryBackoff: time.Millisecond})
	if _, err := c.Retry(context.Background(), "WAIT_1", engine.RetryOptions{}); !errors.Is(err, engine.ErrWrongState) || len(fl.keys) != 1 {
		t.Fatalf("a 409 was retried: %v, %d attempts", err, len(fl.keys))
	}
}

func TestClientTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hs.Close()
	defer close(release)
	c := NewClient(hs.URL, "", ClientOptions{Timeout: 50 * time.Millisecond, Retries: -1})
	// The handler answers only once the call has returned (release), so
	// the call returns at all only because its timeout ended it.
	if _, err := c.Queues(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("timeout: %v", err)
	}
}

// nextChange is the next change of a subscription, failing t when the
// stream closes or nothing comes within wait. It passes over what the
// engine's poll of its counters sends when they moved (a job change that
// names no job): which poll sees a test's own change is a matter of
// timing, and the tests wait for the changes that name their jobs.
func nextChange(t *testing.T, ch <-chan engine.Change, wait time.Duration) engine.Change {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatal("stream closed")
			}
			if c.Kind == engine.ChangeJob && c.JobID == "" {
				continue
			}
			return c
		case <-deadline:
			t.Fatal("no change")
		}
	}
}

func TestClientSubscribe(t *testing.T) {
	t.Parallel()
	streams := newCountedStreams(newFixture(t).eng)
	hs, c := serve(t, streams, ServerOptions{Heartbeat: 20 * time.Millisecond}, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() engine.Change { t.Helper(); return nextChange(t, ch, 5*time.Second) }
	if _, err := c.Retry(ctx, "JOB_1", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next(); got.Kind != engine.ChangeJob || got.JobID != "JOB_1" || got.State != engine.StateAvailable {
		t.Fatalf("change %+v", got)
	}
	// The connection drops: the client reconnects and says to resync.
	hs.CloseClientConnections()
	if got := next(); got.Kind != engine.ChangeResync {
		t.Fatalf("after a drop: %+v", got)
	}
	streams.waitOpen(t, 1)
	if _, err := c.Retry(ctx, "JOB_2", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next(); got.JobID != "JOB_2" {
		t.Fatalf("after the reconnect: %+v", got)
	}
	cancel()
	for range ch {
	}

	// A subscription the server refuses fails at once.
	_, anon := serve(t, streams, ServerOptions{Tokens: testTokens}, "")
	if _, err := anon.Subscribe(context.Background()); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("refused subscription: %v", err)
	}
}

// TestClientSubscribeSaysWhenLost: the server goes away under an open
// stream. The client cannot reconnect at once, so it says the stream is
// lost (ChangeLost, with why) before it goes on trying: a console that
// waited for its next probe said live for 5 to 9 s with the server down.
// A server on the same address again: the client reconnects by itself
// and says to resync, and changes flow again.
func TestClientSubscribeSaysWhenLost(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(NewServer(newFixture(t).eng, ServerOptions{Heartbeat: 20 * time.Millisecond}))
	addr := hs.Listener.Addr().String()
	c := NewClient(hs.URL, "", ClientOptions{Timeout: 5 * time.Second, RetryBackoff: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() engine.Change { t.Helper(); return nextChange(t, ch, 10*time.Second) }
	// The server dies: no more connections, and the open stream cut.
	hs.Listener.Close()
	hs.CloseClientConnections()
	hs.Close()
	if got := next(); got.Kind != engine.ChangeLost || !errors.Is(got.Err, ErrUnavailable) {
		t.Fatalf("with the server gone: %+v", got)
	}

	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address cannot be taken again: %v", err)
	}
	back := httptest.NewUnstartedServer(NewServer(newFixture(t).eng, ServerOptions{Heartbeat: 20 * time.Millisecond}))
	back.Listener.Close()
	back.Listener = l
	back.Start()
	defer back.Close()
	if got := next(); got.Kind != engine.ChangeResync {
		t.Fatalf("with the server back: %+v", got)
	}
	if _, err := c.Retry(ctx, "JOB_1", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next(); got.Kind != engine.ChangeJob || got.JobID != "JOB_1" {
		t.Fatalf("after the reconnect: %+v", got)
	}
	cancel() // before back.Close, which waits for the stream to end
	for range ch {
	}
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	rd := newSSEReader(strings.NewReader("retry: 2000\n: connected\n\nevent: change\ndata: {\"kind\":\"job\"}\n\n: ping\n\ndata: a\ndata: b\r\n\r\n"))
	var got []sseEvent
	for {
		ev, err := rd.next()
		if err != nil {
			break
		}
		got = append(got, ev)
	}
	want := []sseEvent{{}, {name: "change", data: `{"kind":"job"}`}, {}, {data: "a\nb"}}
	if !slices.Equal(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
}

// TestEventsSayStoreLost: the engine's Subscribe says ChangeLost when its
// poll of the store fails. The server sends it as a "lost" event (its
// data the error and the reason unavailable), not as a change, whose
// kinds stay job, operation and resync; the resync that says the store is
// back follows. Before, the stream left it out, and a console attached
// over HTTP said live until its next probe, up to 5 s later.
func TestEventsSayStoreLost(t *testing.T) {
	t.Parallel()
	lost := newStoreLost(newFixture(t).eng)
	hs, _ := serve(t, lost, ServerOptions{Heartbeat: time.Hour}, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", hs.URL+Prefix+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lost.tell(t, engine.Change{Kind: engine.ChangeLost, Err: errors.New("sqlite: job counts: disk I/O error\n\x1b[31m")},
		engine.Change{Kind: engine.ChangeResync})
	rd := newSSEReader(resp.Body)
	var got []sseEvent
	for len(got) < 2 {
		ev, err := rd.next()
		if err != nil {
			t.Fatalf("the stream ended after %+v: %v", got, err)
		}
		if ev.name != "" {
			got = append(got, ev)
		}
	}
	want := []sseEvent{
		{name: sseEventLost, data: `{"error":"sqlite: job counts: disk I/O error\n\u001b[31m","reason":"unavailable"}`},
		{name: sseEventChange, data: `{"kind":"resync"}`},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
}

// TestClientSubscribeHearsStoreLost: over a stream that stays up, the
// server's "lost" event reaches the subscriber as ChangeLost with an
// error that is ErrUnavailable and names the server's store; the resync
// after it, and changes after that, as ever.
func TestClientSubscribeHearsStoreLost(t *testing.T) {
	t.Parallel()
	lost := newStoreLost(newFixture(t).eng)
	_, c := serve(t, lost, ServerOptions{Heartbeat: time.Hour}, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost.tell(t, engine.Change{Kind: engine.ChangeLost, Err: errors.New("postgres: job counts: connection refused")},
		engine.Change{Kind: engine.ChangeResync})
	next := func() engine.Change { t.Helper(); return nextChange(t, ch, 5*time.Second) }
	got := next()
	if got.Kind != engine.ChangeLost || !errors.Is(got.Err, ErrUnavailable) ||
		got.Err.Error() != "server's store: postgres: job counts: connection refused" {
		t.Fatalf("lost: %+v (%v)", got, got.Err)
	}
	if got := next(); got.Kind != engine.ChangeResync {
		t.Fatalf("after the lost event: %+v", got)
	}
	if _, err := c.Retry(ctx, "JOB_1", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next(); got.Kind != engine.ChangeJob || got.JobID != "JOB_1" {
		t.Fatalf("after the resync: %+v", got)
	}
}

// downGate is a server that can be taken down: while down it counts each
// request (tries) and drops its connection unanswered, as a server that
// is not there yet.
type downGate struct {
	next  http.Handler
	down  atomic.Bool
	tries chan struct{}
}

func (g *downGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.down.Load() {
		select {
		case g.tries <- struct{}{}:
		default:
		}
		panic(http.ErrAbortHandler)
	}
	g.next.ServeHTTP(w, r)
}

// TestClientSubscribeBackSoon: after an outage long enough for the
// stream's reconnection backoff to grow, a server that is back is heard
// again (resync) within about a second of its return. The backoff
// doubled up to 5 s, so a console waited up to that long after the
// server was back to say live: here, after the fifth try that found the
// server away the next one came 3.2 s later; it is capped at 1 s now.
func TestClientSubscribeBackSoon(t *testing.T) {
	t.Parallel()
	g := &downGate{next: NewServer(newFixture(t).eng, ServerOptions{Heartbeat: 20 * time.Millisecond}), tries: make(chan struct{}, 64)}
	hs := httptest.NewServer(g)
	defer hs.Close()
	// The default backoff (200 ms, doubled).
	c := NewClient(hs.URL, "", ClientOptions{Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.down.Store(true)
	hs.CloseClientConnections()
	if got := nextChange(t, ch, 10*time.Second); got.Kind != engine.ChangeLost {
		t.Fatalf("with the server away: %+v", got)
	}
	// The try at once and four after a pause: the pauses have grown
	// (200 ms, 400 ms, 800 ms, then 1.6 s before the fix or 1 s).
	for i := range 5 {
		select {
		case <-g.tries:
		case <-time.After(10 * time.Second):
			t.Fatalf("the client stopped trying after %d tries", i)
		}
	}
	g.down.Store(false)
	select {
	case got, ok := <-ch:
		if !ok || got.Kind != engine.ChangeResync {
			t.Fatalf("with the server back: %+v (open %v)", got, ok)
		}
	case <-time.After(2500 * time.Millisecond):
		t.Fatal("the server has been back 2.5 s and the stream is not: the reconnection waits out a long backoff")
	}
	cancel()
	for range ch {
	}
}
