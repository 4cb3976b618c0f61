package api

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// Keys kept in the engine's store (EngineIdempotencyStore), on real
// SQLite files: across restarts, across servers, and across failures
// between the mutation's commit and its answer.

// node is one server process: a store opened on the file, an engine, and
// a server over it.
type node struct {
	store *sqlite.Store
	e     *engine.Engine
	srv   *Server
}

// openNode opens path and serves it; wrap, when set, wraps the engine in
// the Control the server gets (to inject faults).
func openNode(t *testing.T, path string, opts ServerOptions, wrap func(*sqlite.Store, *engine.Engine) engine.Control) *node {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	var ctl engine.Control = e
	if wrap != nil {
		ctl = wrap(s, e)
	}
	return &node{store: s, e: e, srv: NewServer(ctl, opts)}
}

// scheduledJobs enqueues jobs due in an hour (nothing runs them).
func (n *node) scheduledJobs(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := n.e.Enqueue(context.Background(), engine.EnqueueParams{ID: id, Queue: "q", Kind: "k", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
}

// cancelledJobs enqueues jobs and cancels them, ready to be retried.
func (n *node) cancelledJobs(t *testing.T, ids ...string) {
	t.Helper()
	n.scheduledJobs(t, ids...)
	for _, id := range ids {
		if _, err := n.e.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
}

// countEvents counts a job's stored events of kind.
func countEvents(t *testing.T, s backend.Store, id string, kind engine.EventKind) int {
	t.Helper()
	ev, err := s.JobEventList(context.Background(), &backend.JobEventListParams{JobID: id})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ev {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func wantReplayed(t *testing.T, w *httptest.ResponseRecorder, first *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code != first.Code || w.Header().Get(ReplayedHeader) != "true" || w.Body.String() != first.Body.String() {
		t.Fatalf("not a replay of %d %s: %d %q %s", first.Code, first.Body.String(), w.Code, w.Header().Get(ReplayedHeader), w.Body.String())
	}
}

func TestEngineIdempotencySurvivesRestart(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	n1 := openNode(t, path, ServerOptions{}, nil)
	if _, ok := n1.srv.idem.(*EngineIdempotencyStore); !ok {
		t.Fatalf("a server over a SQLite engine keeps keys in %T", n1.srv.idem)
	}
	if m := decode[engine.Meta](t, send(t, n1.srv, req{method: "GET", path: "/api/v1/meta"})); m.Idempotency != "store" || !strings.Contains(strings.Join(m.Capabilities, ","), string(backend.CapabilityIdempotency)) {
		t.Fatalf("meta: %+v", m)
	}
	n1.scheduledJobs(t, "j")
	cancel := req{method: "POST", path: "/api/v1/jobs/j/cancel", key: "k1"}
	first := send(t, n1.srv, cancel)
	wantStatus(t, first, 200)
	if first.Header().Get(ReplayedHeader) != "" {
		t.Fatal("a first answer marked replayed")
	}
	enq := req{method: "POST", path: "/api/v1/jobs", key: "enq-1", body: `{"queue":"q","kind":"k","payload":{"n":1}}`}
	created := send(t, n1.srv, enq)
	wantStatus(t, created, 201)
	n1.store.Close() // the server process ends

	n2 := openNode(t, path, ServerOptions{}, nil)
	wantReplayed(t, send(t, n2.srv, cancel), first)
	wantReplayed(t, send(t, n2.srv, enq), created)
	other := cancel
	other.path = "/api/v1/jobs/j/retry"
	wantStatus(t, send(t, n2.srv, other), 200) // the same key on another path is another key
	mismatch := enq
	mismatch.body = `{"queue":"q","kind":"k","payload":{"n":2}}`
	w := send(t, n2.srv, mismatch)
	wantStatus(t, w, 422)
	if decode[errorBody](t, w).Reason != reasonIdempotencyMismatch {
		t.Fatalf("mismatch: %s", w.Body.String())
	}
	if n := countEvents(t, n2.store, "j", engine.EventCancelled); n != 1 {
		t.Fatalf("j cancelled %d times", n)
	}
	page, err := n2.e.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{Queues: []string{"q"}}})
	if err != nil || len(page.Jobs) != 2 {
		t.Fatalf("jobs on q: %v %v, want j and the one enqueued once", page, err)
	}

	// A server given the memory store says so.
	mem := NewServer(n2.e, ServerOptions{IdempotencyStore: NewMemoryIdempotencyStore(0, 0, 0)})
	if m := decode[engine.Meta](t, send(t, mem, req{method: "GET", path: "/api/v1/meta"})); m.Idempotency != "memory" {
		t.Fatalf("meta of a server with memory keys: %+v", m)
	}
}

func TestEngineIdempotencySharedByServers(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	a := openNode(t, path, ServerOptions{}, nil)
	b := openNode(t, path, ServerOptions{}, nil)
	const jobs = 8
	var ids []string
	for i := range jobs {
		ids = append(ids, "j"+string(rune('a'+i)))
	}
	a.cancelledJobs(t, ids...)
	for _, id := range ids {
		r := req{method: "POST", path: "/api/v1/jobs/" + id + "/retry", key: "redrive-" + id}
		var wg sync.WaitGroup
		var wa, wb *httptest.ResponseRecorder
		wg.Go(func() { wa = send(t, a.srv, r) })
		wg.Go(func() { wb = send(t, b.srv, r) })
		wg.Wait()
		fresh := 0
		var firstAnswer *httptest.ResponseRecorder
		for _, w := range []*httptest.ResponseRecorder{wa, wb} {
			switch {
			case w.Code == 200 && w.Header().Get(ReplayedHeader) == "":
				fresh++
				firstAnswer = w
			case w.Code == 200: // replayed: checked below
			case w.Code == 409 && decode[errorBody](t, w).Reason == reasonIdempotencyInFlight:
			default:
				t.Fatalf("%s: %d %s", id, w.Code, w.Body.String())
			}
		}
		if fresh != 1 {
			t.Fatalf("%s: %d fresh answers (a %d %q, b %d %q)", id, fresh, wa.Code, wa.Header().Get(ReplayedHeader), wb.Code, wb.Header().Get(ReplayedHeader))
		}
		// Both servers now replay the one answer.
		wantReplayed(t, send(t, a.srv, r), firstAnswer)
		wantReplayed(t, send(t, b.srv, r), firstAnswer)
		if n := countEvents(t, a.store, id, engine.EventRetried); n != 1 {
			t.Fatalf("%s retried %d times", id, n)
		}
	}
}

// failingWriter fails the answer: its connection broke after the
// mutation committed.
type failingWriter struct{ header http.Header }

func (f *failingWriter) Header() http.Header       { return f.header }
func (f *failingWriter) Write([]byte) (int, error) { panic("connection reset while answering") }
func (f *failingWriter) WriteHeader(int)           { panic("connection reset while answering") }

// cancelDuring cancels the request's context while its retry runs.
type cancelDuring struct {
	*engine.Engine
	cancel context.CancelFunc
}

func (c cancelDuring) Retry(ctx context.Context, id string, o engine.RetryOptions) (*engine.Job, error) {
	c.cancel()
	return c.Engine.Retry(ctx, id, o)
}

func TestEngineIdempotencyFailureBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	n := openNode(t, path, ServerOptions{}, nil)
	n.cancelledJobs(t, "j1", "j2")

	// The answer cannot be written.
	r := req{method: "POST", path: "/api/v1/jobs/j1/retry", key: "k"}
	hr := httptest.NewRequest(r.method, r.path, nil)
	hr.Host = "127.0.0.1"
	hr.Header.Set(IdempotencyHeader, r.key)
	func() {
		defer func() { _ = recover() }()
		n.srv.ServeHTTP(&failingWriter{header: http.Header{}}, hr)
	}()
	w := send(t, n.srv, r)
	wantStatus(t, w, 200)
	if w.Header().Get(ReplayedHeader) != "true" || decode[jobResponse](t, w).Job.State != engine.StateAvailable {
		t.Fatalf("after a failed answer: %q %s", w.Header().Get(ReplayedHeader), w.Body.String())
	}
	if c := countEvents(t, n.store, "j1", engine.EventRetried); c != 1 {
		t.Fatalf("j1 retried %d times", c)
	}

	// The client goes away while the mutation runs.
	ctx, cancel := context.WithCancel(context.Background())
	srv := NewServer(cancelDuring{Engine: n.e, cancel: cancel}, ServerOptions{})
	r2 := req{method: "POST", path: "/api/v1/jobs/j2/retry", key: "k"}
	hr = httptest.NewRequest(r2.method, r2.path, nil).WithContext(ctx)
	hr.Host = "127.0.0.1"
	hr.Header.Set(IdempotencyHeader, r2.key)
	gone := httptest.NewRecorder()
	srv.ServeHTTP(gone, hr)
	if ctx.Err() == nil {
		t.Fatal("the request was not cancelled")
	}
	w = send(t, n.srv, r2)
	if w.Code != 200 || w.Header().Get(ReplayedHeader) != "true" || w.Body.String() != gone.Body.String() {
		t.Fatalf("after the client went away: %d %q %s (first %d %s)", w.Code, w.Header().Get(ReplayedHeader), w.Body.String(), gone.Code, gone.Body.String())
	}
	if c := countEvents(t, n.store, "j2", engine.EventRetried); c != 1 {
		t.Fatalf("j2 retried %d times", c)
	}
}

// dies closes the store — the process dies — right after (or, before,
// right before) its retry commits: nothing of the request is written
// after that point.
type dies struct {
	*engine.Engine
	store  *sqlite.Store
	before bool
}

func (d dies) Retry(ctx context.Context, id string, o engine.RetryOptions) (*engine.Job, error) {
	if d.before {
		d.store.Close()
	}
	j, err := d.Engine.Retry(ctx, id, o)
	d.store.Close()
	return j, err
}

func TestEngineIdempotencyServerDiesAfterCommit(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	opts := ServerOptions{IdempotencyClaimTTL: 300 * time.Millisecond}
	n1 := openNode(t, path, opts, func(s *sqlite.Store, e *engine.Engine) engine.Control { return dies{Engine: e, store: s} })
	n1.cancelledJobs(t, "j")
	r := req{method: "POST", path: "/api/v1/jobs/j/retry", key: "k"}
	first := send(t, n1.srv, r) // the client never sees this answer
	wantStatus(t, first, 200)

	n2 := openNode(t, path, opts, nil)
	// The dead server's claim holds until it expires; then the request
	// takes it over and answers with what the first run committed.
	var w *httptest.ResponseRecorder
	deadline := time.Now().Add(20 * time.Second)
	for {
		w = send(t, n2.srv, r)
		if w.Code != 409 {
			break
		}
		if decode[errorBody](t, w).Reason != reasonIdempotencyInFlight || time.Now().After(deadline) {
			t.Fatalf("while the dead claim holds: %d %s", w.Code, w.Body.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantStatus(t, w, 200)
	if w.Body.String() != first.Body.String() {
		t.Fatalf("the taken-over answer differs from the first:\n%s\n%s", w.Body.String(), first.Body.String())
	}
	wantReplayed(t, send(t, n2.srv, r), w)
	if c := countEvents(t, n2.store, "j", engine.EventRetried); c != 1 {
		t.Fatalf("j retried %d times", c)
	}
}

func TestEngineIdempotencyServerDiesBeforeCommit(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	opts := ServerOptions{IdempotencyClaimTTL: 300 * time.Millisecond}
	n1 := openNode(t, path, opts, func(s *sqlite.Store, e *engine.Engine) engine.Control {
		return dies{Engine: e, store: s, before: true}
	})
	n1.cancelledJobs(t, "j")
	r := req{method: "POST", path: "/api/v1/jobs/j/retry", key: "k"}
	wantStatus(t, send(t, n1.srv, r), 503) // the store went away under it: nothing committed, the claim left behind

	n2 := openNode(t, path, opts, nil)
	var w *httptest.ResponseRecorder
	deadline := time.Now().Add(20 * time.Second)
	for {
		w = send(t, n2.srv, r)
		if w.Code != 409 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead claim never expired: %s", w.Body.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantStatus(t, w, 200)
	if w.Header().Get(ReplayedHeader) != "" || decode[jobResponse](t, w).Job.State != engine.StateAvailable {
		t.Fatalf("the retried request: %q %s", w.Header().Get(ReplayedHeader), w.Body.String())
	}
	wantReplayed(t, send(t, n2.srv, r), w)
	if c := countEvents(t, n2.store, "j", engine.EventRetried); c != 1 {
		t.Fatalf("j retried %d times", c)
	}
}

func TestEngineIdempotencyExpires(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	n := openNode(t, path, ServerOptions{IdempotencyTTL: 300 * time.Millisecond}, nil)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := req{method: "POST", path: "/api/v1/queues/q/pause", key: "k"}
	wantStatus(t, send(t, n.srv, r), 200)
	// Past the TTL the key is forgotten: the same key serves a new request
	// (before it, that request gets 422).
	other := r
	other.body = `{}`
	deadline := time.Now().Add(20 * time.Second)
	for {
		w := send(t, n.srv, other)
		if w.Code == 200 && w.Header().Get(ReplayedHeader) == "" {
			break
		}
		if w.Code != 422 || time.Now().After(deadline) {
			t.Fatalf("before or after expiry: %d %s", w.Code, w.Body.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Maintenance sweeps the record once it has expired too.
	rows := func() int {
		var c int
		if err := db.QueryRow(`SELECT count(*) FROM idempotency_keys`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	time.Sleep(350 * time.Millisecond) // past the TTL of the record just made
	if c := rows(); c != 1 {
		t.Fatalf("%d records before the sweep, want 1 (the first was replaced by the second)", c)
	}
	e, err := engine.New(n.store, engine.Config{MaintenanceInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	e.RunMaintenance(context.Background())
	if c := rows(); c != 0 {
		t.Fatalf("%d records after the sweep", c)
	}
}
