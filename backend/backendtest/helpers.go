package backendtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// waitLong is the deadline of every wait in the suite: generous, since a
// loaded 2-core machine under -race is slow, and a passing check never
// waits for it.
const waitLong = 20 * time.Second

// eventually polls cond until it holds or timeout passes, then fails the
// test with msg (a format and its arguments, optional).
func eventually(t testing.TB, timeout time.Duration, cond func() bool, msg ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := 2 * time.Millisecond
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			what := "condition"
			if len(msg) > 0 {
				if f, ok := msg[0].(string); ok {
					what = fmt.Sprintf(f, msg[1:]...)
				}
			}
			t.Fatalf("%s: not reached within %s", what, timeout)
		}
		time.Sleep(wait)
		wait = min(wait*2, 25*time.Millisecond)
	}
}

// fast returns an engine config with short intervals, so the suite runs in
// seconds. queues get concurrency 4 unless changed by the caller.
//
// The lease is long next to everything else: no check waits for one to
// run out unless it sets its own, and on a loaded 2-core machine under
// -race a living worker's renewals and heartbeats have been seen to stall
// for well over a second; a lease lost that way reruns the job (as
// designed) and would spoil the exact counts the checks assert.
func fast(workerID string, queues ...string) engine.Config {
	cfg := engine.Config{
		WorkerID:            workerID,
		LeaseDuration:       5 * time.Second,
		HeartbeatInterval:   250 * time.Millisecond,
		PollInterval:        20 * time.Millisecond,
		MaintenanceInterval: 25 * time.Millisecond,
		CrashBackoff:        func(int) time.Duration { return 2 * time.Millisecond },
		ShutdownTimeout:     3 * time.Second,
		Queues:              map[string]engine.QueueConfig{},
	}
	for _, q := range queues {
		cfg.Queues[q] = engine.QueueConfig{Concurrency: 4}
	}
	return cfg
}

// quickBackoff is a Kind.Backoff that retries almost at once.
func quickBackoff(int) time.Duration { return 2 * time.Millisecond }

// newEngine builds an engine over s with kinds registered. It is not
// started.
func newEngine(t testing.TB, s backend.Store, cfg engine.Config, kinds ...engine.Kind) *engine.Engine {
	t.Helper()
	e, err := engine.New(s, cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	for _, k := range kinds {
		if k.Backoff == nil {
			k.Backoff = quickBackoff
		}
		if err := e.Register(k); err != nil {
			t.Fatalf("Register(%s): %v", k.Name, err)
		}
	}
	return e
}

// start starts e and stops it when the test ends (before the store is
// closed: cleanups run last-registered first).
func start(t testing.TB, e *engine.Engine) *engine.Engine {
	t.Helper()
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return e
}

// startEngine is newEngine then start.
func startEngine(t testing.TB, s backend.Store, cfg engine.Config, kinds ...engine.Kind) *engine.Engine {
	t.Helper()
	return start(t, newEngine(t, s, cfg, kinds...))
}

func enqueue(t testing.TB, e *engine.Engine, p engine.EnqueueParams) *engine.Job {
	t.Helper()
	j, err := e.Enqueue(context.Background(), p)
	if err != nil {
		t.Fatalf("Enqueue(%s %s): %v", p.Kind, p.ID, err)
	}
	if j == nil {
		t.Fatalf("Enqueue(%s %s): no job returned", p.Kind, p.ID)
	}
	return j
}

// getJob reads a job with its payload, failing the test on any error.
func getJob(t testing.TB, s backend.Store, id string) *engine.Job {
	t.Helper()
	j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: id, IncludePayload: true})
	if err != nil {
		t.Fatalf("JobGetByID(%s): %v", id, err)
	}
	return j
}

// tryJob reads a job; nil when the read failed.
func tryJob(s backend.Store, id string) *engine.Job {
	j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: id})
	if err != nil {
		return nil
	}
	return j
}

// gone reports whether the job's row is deleted.
func gone(s backend.Store, id string) bool {
	_, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: id})
	return errors.Is(err, engine.ErrNotFound)
}

// waitState waits until job id is in state, and returns it as read then.
func waitState(t testing.TB, s backend.Store, id string, state engine.State) *engine.Job {
	t.Helper()
	var last *engine.Job
	eventually(t, waitLong, func() bool {
		last = tryJob(s, id)
		return last != nil && last.State == state
	}, "job %s to reach %s (last seen: %s)", id, state, lastSeen{&last})
	return getJob(t, s, id)
}

// lastSeen describes the job *j when formatted, not when made: a
// message built before the wait would describe nothing.
type lastSeen struct{ j **engine.Job }

func (l lastSeen) String() string { return describe(*l.j) }

func describe(j *engine.Job) string {
	if j == nil {
		return "<none>"
	}
	return fmt.Sprintf("state=%s attempt=%d crash=%d fence=%d reason=%q errors=%d",
		j.State, j.Attempt, j.CrashAttempt, j.Fence, j.TerminalReason, len(j.Errors))
}

func events(t testing.TB, s backend.Store, id string) []engine.Event {
	t.Helper()
	ev, err := s.JobEventList(context.Background(), &backend.JobEventListParams{JobID: id})
	if err != nil {
		t.Fatalf("JobEventList(%s): %v", id, err)
	}
	return ev
}

func eventKinds(ev []engine.Event) []engine.EventKind {
	out := make([]engine.EventKind, len(ev))
	for i, e := range ev {
		out[i] = e.Kind
	}
	return out
}

func hasEvent(ev []engine.Event, k engine.EventKind) bool {
	return slices.ContainsFunc(ev, func(e engine.Event) bool { return e.Kind == k })
}

func storeNow(t testing.TB, s backend.Store) time.Time {
	t.Helper()
	now, err := s.Now(context.Background())
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	return now
}

// checkLease checks the invariant "a lease exists iff running", and that a
// lease carries the job's fence.
func checkLease(t testing.TB, j *engine.Job) {
	t.Helper()
	if j.State == engine.StateRunning {
		if j.Lease == nil {
			t.Fatalf("job %s is running without a lease", j.ID)
		}
		if j.Lease.Fence != j.Fence {
			t.Fatalf("job %s: lease fence %d, job fence %d", j.ID, j.Lease.Fence, j.Fence)
		}
		if j.Lease.ID == "" || j.Lease.WorkerID == "" || j.Lease.ExpiresAt.IsZero() {
			t.Fatalf("job %s: incomplete lease %+v", j.ID, *j.Lease)
		}
		return
	}
	if j.Lease != nil {
		t.Fatalf("job %s is %s but holds lease %+v", j.ID, j.State, *j.Lease)
	}
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// counter counts calls per key, safely.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) inc(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
	return c.m[k]
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// ---- store-level helpers ----

var kindsK = map[string]int{"k": 1}

// jobParams is a store-level new job: kind k, a payload naming the id, a
// fingerprint of its own.
func jobParams(id, queue string) *backend.JobInsertParams {
	return &backend.JobInsertParams{
		ID:            id,
		Queue:         queue,
		Kind:          "k",
		Payload:       json.RawMessage(fmt.Sprintf(`{"id":%q}`, id)),
		SchemaVersion: 1,
		MaxAttempts:   5,
		Fingerprint:   "fp-" + id,
	}
}

// insert writes jobs through the store, failing on any refusal.
func insert(t testing.TB, s backend.Store, ps ...*backend.JobInsertParams) []*engine.Job {
	t.Helper()
	res, err := s.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: ps, RefuseQuarantined: true})
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	if len(res) != len(ps) {
		t.Fatalf("JobInsertMany: %d results for %d jobs", len(res), len(ps))
	}
	out := make([]*engine.Job, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("JobInsertMany: job %s refused: %v", ps[i].ID, r.Err)
		}
		if r.Job == nil {
			t.Fatalf("JobInsertMany: job %s: no job returned", ps[i].ID)
		}
		out[i] = r.Job
	}
	return out
}

// claim takes up to limit jobs of queue for worker, kind k v1, a long
// lease: at most one first-crash suspect, and a job of two crashes or more
// when nothing else is there.
func claim(t testing.TB, s backend.Store, queue, worker string, limit int) []*engine.Job {
	t.Helper()
	return claimP(t, s, backend.JobClaimParams{Queue: queue, WorkerID: worker, Limit: limit, Suspects: 1, Lone: true}).Jobs
}

// claimOne claims exactly one job of queue and checks it is id.
func claimOne(t testing.TB, s backend.Store, queue, id string) *engine.Job {
	t.Helper()
	js := claim(t, s, queue, "w-test", 1)
	if len(js) != 1 || js[0].ID != id {
		t.Fatalf("claim on %s: got %v, want [%s]", queue, ids(js), id)
	}
	return js[0]
}

func ids(js []*engine.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func refOf(j *engine.Job) backend.JobRef {
	if j.Lease == nil {
		return backend.JobRef{ID: j.ID, Fence: j.Fence}
	}
	return backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Lease.Fence}
}

func scheduleDue(t testing.TB, s backend.Store) []string {
	t.Helper()
	qs, err := s.JobScheduleDue(context.Background(), &backend.JobScheduleDueParams{From: []engine.State{engine.StateRetryable, engine.StateScheduled}, To: engine.StateAvailable, Limit: 1000})
	if err != nil {
		t.Fatalf("JobScheduleDue: %v", err)
	}
	return qs
}

// ranBy reports whether worker id got is an incarnation of the engine
// configured with WorkerID name (the engine adds a random suffix).
func ranBy(got, name string) bool {
	return strings.HasPrefix(got, name+"/") && !strings.Contains(got[len(name)+1:], "/")
}
