package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/api/apimetrics"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// Tokens of the contract test's server, one per role.
const (
	tokViewer    = "viewer-token-0123456789"
	tokInspector = "inspector-token-0123456789"
	tokOperator  = "operator-token-0123456789"
	tokAdmin     = "admin-token-0123456789"
	tokUnknown   = "nobody-token-0123456789"
)

// contractCase is one request of the contract test and the status it must
// get. Every answer, good or bad, is validated against api/openapi.yaml.
type contractCase struct {
	name     string
	method   string
	path     string // with its query
	token    string // "" sends no Authorization header
	key      string // Idempotency-Key; "-" sends none
	ctype    string // Content-Type; "" is application/json when there is a body
	header   map[string]string
	body     string
	want     int
	readOnly bool   // sent to the read-only server
	stream   bool   // an event stream: only the status and headers are read
	contains string // text the answer's body must hold ("" for none)
}

// contractFixture is the engine behind the contract test's servers: dead
// billing jobs, an available one, a quarantined one, a pending operation.
type contractFixture struct {
	eng  *engine.Engine
	fp   string // the quarantined fingerprint
	opID string // a pending operation
	// haltedID is a halted canary run.
	haltedID string
	etag     string // the ETag of job "edit"
}

// contractGroup is the id of the error group of the fixture's dead jobs
// (killJobs).
var contractGroup = engine.ErrorGroupID("billing", "charge", "card service down")

func newContractFixture(t *testing.T) *contractFixture {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	killJobs(t, store, []string{"dead-1", "dead-2", "dead-3", "dead-4", "dead-5", "dead-6"})
	e, err := engine.New(store, engine.Config{NoMaintenance: true, PayloadLimit: 4096})
	if err != nil {
		t.Fatal(err)
	}
	f := &contractFixture{eng: e}
	for _, id := range []string{"avail-1", "avail-2", "edit"} {
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "email", Kind: "send", Payload: json.RawMessage(`{"to":"a@example.com"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// A poison pill: its crash quarantines its fingerprint.
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "pill", Queue: "reports", Kind: "render", Payload: json.RawMessage(`{"report":"q3"}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := store.JobClaim(ctx, &backend.JobClaimParams{Queue: "reports", WorkerID: "w", LeaseID: "l", Limit: 1,
		Kinds: map[string]int{"render": 1}, LeaseDuration: time.Minute})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("claim the pill: %v %v", res, err)
	}
	job := res.Jobs[0]
	if _, err := store.JobFinish(ctx, backendtest.Outcome{
		JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
		To:     engine.StateQuarantined, Reason: engine.ReasonQuarantined, Charge: backend.ChargeCrash, Quarantine: true,
		Event: engine.EventQuarantined, Actor: "w", Message: "out of memory",
		Error: &engine.AttemptError{Crash: true, Message: "out of memory", Worker: "w"}, ErrorPattern: "out of memory",
	}.Plan(job)); err != nil {
		t.Fatal(err)
	}
	f.fp = job.Fingerprint
	// A workflow waiting for its children: its list row carries the wait.
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "parent", Queue: "flows", Kind: "fan", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	res, err = store.JobClaim(ctx, &backend.JobClaimParams{Queue: "flows", WorkerID: "w", LeaseID: "l2", Limit: 1,
		Kinds: map[string]int{"fan": 1}, LeaseDuration: time.Minute})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("claim the parent: %v %v", res, err)
	}
	job = res.Jobs[0]
	kids := []string{"parent~s1.0", "parent~s1.1"}
	cp, err := (&engine.Checkpoint{Version: 1, Children: kids, Wait: &engine.Wait{Kind: engine.WaitKindChildren, Step: 2, Name: "all",
		Children: kids, Done: 1, Until: time.Now().Add(time.Hour)}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	wp := backendtest.Outcome{JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
		To: engine.StateScheduled, Delay: time.Hour, Event: engine.EventWaiting, Actor: "w"}.Plan(job)
	wp.Checkpoint = &backend.CheckpointWrite{Checkpoint: cp}
	if _, err := store.JobFinish(ctx, wp); err != nil {
		t.Fatal(err)
	}
	// A sync job running, a second one waiting: once sync is limited to
	// one at a time, the waiting one's list row names its hold.
	for _, id := range []string{"sync-1", "sync-2"} {
		if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "ledger", Kind: "sync", Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	res, err = store.JobClaim(ctx, &backend.JobClaimParams{Queue: "ledger", WorkerID: "w", LeaseID: "l3", Limit: 1,
		Kinds: map[string]int{"sync": 1}, LeaseDuration: time.Hour})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("claim a sync job: %v %v", res, err)
	}
	f.haltedID = api.HaltedOperation(t, e, store)
	op, err := e.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{IDs: []string{"dead-6"}}})
	if err != nil {
		t.Fatal(err)
	}
	f.opID = op.Operation.ID
	d, err := e.GetJob(ctx, "edit", false)
	if err != nil {
		t.Fatal(err)
	}
	f.etag = fmt.Sprintf("%q", fmt.Sprint(d.Job.Version))
	declareSchedules(t, store, "dead-1")
	return f
}

// declareSchedules writes two schedules as a process declaring them
// would, the first having fired job.
func declareSchedules(t *testing.T, store backend.Store, job string) {
	t.Helper()
	ctx := context.Background()
	ss, err := backend.ScheduleStoreOf(store)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.ScheduleUpsert(ctx, &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{
		{Name: "nightly", Spec: "30 2 * * *", Zone: "Europe/Berlin"}, {Name: "reports", Spec: "@every 1m0s", Zone: "UTC"},
	}}); err != nil {
		t.Fatal(err)
	}
	row, err := ss.ScheduleGet(ctx, &backend.ScheduleGetParams{Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ScheduleMarkFired(ctx, &backend.ScheduleMarkFiredParams{Marks: []backend.ScheduleMark{
		{Name: "nightly", From: row.LastTick, To: row.LastTick.Add(time.Second), Job: job},
	}}); err != nil {
		t.Fatal(err)
	}
}

// loadSpec reads api/openapi.yaml with an independent OpenAPI library and
// checks the document itself.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("openapi.yaml")
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// TestAPIContract drives every route of api/openapi.yaml with good and
// deliberately bad requests — every role, unknown ids, malformed bodies,
// missing headers, a read-only server — and validates every answer with
// kin-openapi: the status must be declared for the operation, and the
// headers and body must match the spec. A good request must also be one
// the spec accepts. It fails when a route the server serves is not in the
// spec, or when a route of the spec is not driven to a success and to a
// failure.
func TestAPIContract(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t)
	tokens := map[string]api.Identity{
		tokViewer: {Name: "vera", Role: engine.RoleViewer}, tokInspector: {Name: "ines", Role: engine.RoleInspector},
		tokOperator: {Name: "otto", Role: engine.RoleOperator}, tokAdmin: {Name: "ada", Role: engine.RoleAdmin},
	}
	srv := api.NewServer(f.eng, api.ServerOptions{Tokens: tokens, Metrics: apimetrics.New(f.eng, nil)})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ro := httptest.NewServer(api.NewServer(f.eng, api.ServerOptions{Tokens: tokens, ReadOnly: true, Metrics: apimetrics.New(f.eng, nil)}))
	t.Cleanup(ro.Close)

	doc := loadSpec(t)
	specRoutes := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			specRoutes[method+" "+path] = true
		}
	}
	for _, r := range srv.Routes() {
		if !specRoutes[r] {
			t.Errorf("the server serves %s, which api/openapi.yaml does not describe", r)
		}
	}
	doc.Servers = openapi3.Servers{{URL: "http://contract.test"}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}

	big := `{"blob":"` + strings.Repeat("x", 5000) + `"}`
	j := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []contractCase{
		// GET /jobs
		{name: "list as viewer", method: "GET", path: "/api/v1/jobs?state=archived&limit=2", token: tokViewer, want: 200},
		{name: "list waiting jobs", method: "GET", path: "/api/v1/jobs?state=scheduled", token: tokViewer, want: 200},
		{name: "list next page", method: "GET", path: "/api/v1/jobs?q=state:archived%20queue:billing&limit=50", token: tokViewer, want: 200},
		{name: "list without token", method: "GET", path: "/api/v1/jobs", want: 401},
		{name: "list with unknown token", method: "GET", path: "/api/v1/jobs", token: tokUnknown, want: 401},
		{name: "list with unknown state", method: "GET", path: "/api/v1/jobs?state=zombie", token: tokViewer, want: 400},
		{name: "list with limit 0 (the default)", method: "GET", path: "/api/v1/jobs?limit=0", token: tokViewer, want: 200},
		{name: "list with limit 201", method: "GET", path: "/api/v1/jobs?limit=201", token: tokViewer, want: 400},
		{name: "list with a bad cursor", method: "GET", path: "/api/v1/jobs?cursor=%21%21", token: tokViewer, want: 400},
		{name: "list payload filter as viewer", method: "GET", path: "/api/v1/jobs?q=payload.to:x", token: tokViewer, want: 403},
		{name: "list a schedule's jobs as viewer", method: "GET", path: "/api/v1/jobs?q=meta.sluice.schedule:nightly%20state:archived", token: tokViewer, want: 200},
		{name: "list other metadata as viewer", method: "GET", path: "/api/v1/jobs?q=meta.sluice.schedule:nightly%20meta.tenant:acme", token: tokViewer, want: 403},
		{name: "list a schedule's ticks as viewer", method: "GET", path: "/api/v1/jobs?q=meta.sluice.tick:x", token: tokViewer, want: 403},
		{name: "list payload filter as inspector", method: "GET", path: "/api/v1/jobs?q=payload.to:x", token: tokInspector, want: 200},
		// POST /jobs
		{name: "enqueue", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-1", body: `{"id":"new-1","queue":"email","kind":"send","payload":{"to":"b@example.com"}}`, want: 201},
		{name: "enqueue replayed", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-1", body: `{"id":"new-1","queue":"email","kind":"send","payload":{"to":"b@example.com"}}`, want: 201},
		{name: "enqueue key reused for another body", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-1", body: `{"id":"new-2","queue":"email","kind":"send"}`, want: 422},
		{name: "enqueue an existing id", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-2", body: `{"id":"new-1","queue":"email","kind":"send","payload":{"to":"b@example.com"}}`, want: 200},
		{name: "enqueue a batch", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-3", body: `[{"id":"new-3","queue":"email","kind":"send"},{"id":"new-4","queue":"email","kind":"send"}]`, want: 200},
		{name: "enqueue as viewer", method: "POST", path: "/api/v1/jobs", token: tokViewer, key: "enq-4", body: `{"kind":"send"}`, want: 403},
		{name: "enqueue without key", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "-", body: `{"kind":"send"}`, want: 400},
		{name: "enqueue malformed", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-5", body: `{"kind":`, want: 400},
		{name: "enqueue unknown field", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-6", body: `{"kind":"send","colour":"red"}`, want: 400},
		{name: "enqueue not JSON", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-7", ctype: "text/plain", body: `kind=send`, want: 415},
		{name: "enqueue a payload over the limit", method: "POST", path: "/api/v1/jobs", token: tokOperator, key: "enq-8", body: `{"kind":"send","payload":` + big + `}`, want: 413},
		{name: "enqueue on a read-only server", method: "POST", path: "/api/v1/jobs", token: tokAdmin, key: "enq-9", body: `{"kind":"send"}`, want: 403, readOnly: true},
		// GET /jobs/export
		{name: "export as viewer", method: "GET", path: "/api/v1/jobs/export?state=archived", token: tokViewer, want: 200, stream: true},
		{name: "export with payload as inspector", method: "GET", path: "/api/v1/jobs/export?q=queue:billing&include_payload=true", token: tokInspector, want: 200, stream: true},
		{name: "export with payload as viewer", method: "GET", path: "/api/v1/jobs/export?include_payload=true", token: tokViewer, want: 403},
		{name: "export with a bad query", method: "GET", path: "/api/v1/jobs/export?q=state:zombie", token: tokViewer, want: 400},
		{name: "export with a cursor", method: "GET", path: "/api/v1/jobs/export?cursor=x", token: tokViewer, want: 400},
		{name: "export without token", method: "GET", path: "/api/v1/jobs/export", want: 401},
		// GET /jobs/counts
		{name: "counts", method: "GET", path: "/api/v1/jobs/counts", token: tokViewer, want: 200},
		{name: "counts of a queue", method: "GET", path: "/api/v1/jobs/counts?queue=billing", token: tokViewer, want: 200},
		{name: "counts of a bad queue name", method: "GET", path: "/api/v1/jobs/counts?queue=%20bad%20", token: tokViewer, want: 400},
		{name: "counts without token", method: "GET", path: "/api/v1/jobs/counts", want: 401},
		// GET /jobs/counts/filter
		{name: "filter counts", method: "GET", path: "/api/v1/jobs/counts/filter?q=error:refused", token: tokViewer, want: 200},
		{name: "filter counts of a state, bounded", method: "GET", path: "/api/v1/jobs/counts/filter?state=archived&max=1", token: tokViewer, want: 200},
		{name: "filter counts by payload as inspector", method: "GET", path: "/api/v1/jobs/counts/filter?q=payload.to:x", token: tokInspector, want: 200},
		{name: "filter counts by payload as viewer", method: "GET", path: "/api/v1/jobs/counts/filter?q=payload.to:x", token: tokViewer, want: 403},
		{name: "filter counts with a bad max", method: "GET", path: "/api/v1/jobs/counts/filter?max=many", token: tokViewer, want: 400},
		{name: "filter counts with an unknown parameter", method: "GET", path: "/api/v1/jobs/counts/filter?colour=red", token: tokViewer, want: 400},
		{name: "filter counts without token", method: "GET", path: "/api/v1/jobs/counts/filter", want: 401},
		// GET /jobs/{id}
		{name: "get", method: "GET", path: "/api/v1/jobs/dead-1", token: tokViewer, want: 200},
		{name: "get with payload", method: "GET", path: "/api/v1/jobs/dead-1?include_payload=true", token: tokInspector, want: 200},
		{name: "get with payload as viewer", method: "GET", path: "/api/v1/jobs/dead-1?include_payload=true", token: tokViewer, want: 403},
		{name: "get with a bad flag", method: "GET", path: "/api/v1/jobs/dead-1?include_payload=perhaps", token: tokViewer, want: 400},
		{name: "get unknown", method: "GET", path: "/api/v1/jobs/nope", token: tokViewer, want: 404},
		{name: "get without token", method: "GET", path: "/api/v1/jobs/dead-1", want: 401},
		// POST /jobs/{id}/retry
		{name: "retry", method: "POST", path: "/api/v1/jobs/dead-1/retry", token: tokOperator, key: "retry-1", want: 200},
		{name: "retry with a body", method: "POST", path: "/api/v1/jobs/dead-2/retry", token: tokOperator, key: "retry-2", body: `{"force":false}`, want: 200},
		{name: "retry an available job", method: "POST", path: "/api/v1/jobs/avail-1/retry", token: tokOperator, key: "retry-3", want: 409},
		{name: "retry unknown", method: "POST", path: "/api/v1/jobs/nope/retry", token: tokOperator, key: "retry-4", want: 404},
		{name: "retry malformed", method: "POST", path: "/api/v1/jobs/dead-3/retry", token: tokOperator, key: "retry-5", body: `{"force":"yes"}`, want: 400},
		{name: "retry a quarantined job", method: "POST", path: "/api/v1/jobs/pill/retry", token: tokOperator, key: "retry-6", want: 409},
		{name: "retry as viewer", method: "POST", path: "/api/v1/jobs/dead-3/retry", token: tokViewer, key: "retry-7", want: 403},
		{name: "retry without key", method: "POST", path: "/api/v1/jobs/dead-3/retry", token: tokOperator, key: "-", want: 400},
		{name: "retry read-only", method: "POST", path: "/api/v1/jobs/dead-3/retry", token: tokAdmin, key: "retry-8", want: 403, readOnly: true},
		// POST /jobs/{id}/cancel
		{name: "cancel", method: "POST", path: "/api/v1/jobs/avail-2/cancel", token: tokOperator, key: "cancel-1", want: 200},
		{name: "cancel a dead job", method: "POST", path: "/api/v1/jobs/dead-3/cancel", token: tokOperator, key: "cancel-2", want: 409},
		{name: "cancel unknown", method: "POST", path: "/api/v1/jobs/nope/cancel", token: tokOperator, key: "cancel-3", want: 404},
		{name: "cancel without token", method: "POST", path: "/api/v1/jobs/avail-1/cancel", key: "cancel-4", want: 401},
		// POST /jobs/{id}/signals/{name}
		{name: "signal", method: "POST", path: "/api/v1/jobs/avail-1/signals/approved", token: tokOperator, key: "sig-1", body: `{"by":"ops"}`, want: 200},
		{name: "signal without payload", method: "POST", path: "/api/v1/jobs/avail-1/signals/approved", token: tokOperator, key: "sig-2", want: 200},
		{name: "signal a dead job", method: "POST", path: "/api/v1/jobs/dead-3/signals/approved", token: tokOperator, key: "sig-3", body: `1`, want: 409},
		{name: "signal unknown", method: "POST", path: "/api/v1/jobs/nope/signals/approved", token: tokOperator, key: "sig-4", want: 404},
		{name: "signal a bad name", method: "POST", path: "/api/v1/jobs/avail-1/signals/bad%20name", token: tokOperator, key: "sig-5", want: 400},
		{name: "signal malformed payload", method: "POST", path: "/api/v1/jobs/avail-1/signals/approved", token: tokOperator, key: "sig-6", body: `{"by":`, want: 400},
		{name: "signal as viewer", method: "POST", path: "/api/v1/jobs/avail-1/signals/approved", token: tokViewer, key: "sig-7", want: 403},
		{name: "signal without key", method: "POST", path: "/api/v1/jobs/avail-1/signals/approved", token: tokOperator, key: "-", want: 400},
		// POST /jobs/{id}/release
		{name: "release a job that is not quarantined", method: "POST", path: "/api/v1/jobs/dead-3/release", token: tokOperator, key: "release-1", want: 409},
		{name: "release unknown", method: "POST", path: "/api/v1/jobs/nope/release", token: tokOperator, key: "release-2", want: 404},
		{name: "release as viewer", method: "POST", path: "/api/v1/jobs/pill/release", token: tokViewer, key: "release-3", want: 403},
		{name: "release", method: "POST", path: "/api/v1/jobs/pill/release", token: tokOperator, key: "release-5", want: 200},
		// POST /jobs/{id}/retry-with-input
		{name: "retry with input", method: "POST", path: "/api/v1/jobs/dead-3/retry-with-input", token: tokOperator, key: "rwi-1", body: `{"payload":{"fixed":true}}`, want: 201},
		{name: "retry with input without payload", method: "POST", path: "/api/v1/jobs/dead-4/retry-with-input", token: tokOperator, key: "rwi-2", body: `{}`, want: 400},
		{name: "retry with input of a live job", method: "POST", path: "/api/v1/jobs/avail-1/retry-with-input", token: tokOperator, key: "rwi-3", body: `{"payload":{}}`, want: 409},
		{name: "retry with input unknown", method: "POST", path: "/api/v1/jobs/nope/retry-with-input", token: tokOperator, key: "rwi-4", body: `{"payload":{}}`, want: 404},
		{name: "retry with input an existing new id", method: "POST", path: "/api/v1/jobs/dead-4/retry-with-input", token: tokOperator, key: "rwi-5", body: `{"id":"avail-1","payload":{}}`, want: 409},
		// GET and POST /jobs/{id}/replay: dead-4 has no steps, so a replay
		// from step 1 is the only one.
		{name: "replay preview", method: "GET", path: "/api/v1/jobs/dead-4/replay?step=1", token: tokViewer, want: 200},
		{name: "replay preview past the steps", method: "GET", path: "/api/v1/jobs/dead-4/replay?step=5", token: tokViewer, want: 400},
		{name: "replay from step", method: "POST", path: "/api/v1/jobs/dead-4/replay", token: tokOperator, key: "rep-1", body: `{"step":1,"id":"dead-4-replay"}`, want: 201},
		{name: "replay without a step", method: "POST", path: "/api/v1/jobs/dead-4/replay", token: tokOperator, key: "rep-2", body: `{}`, want: 400},
		{name: "replay of a live job", method: "POST", path: "/api/v1/jobs/avail-1/replay", token: tokOperator, key: "rep-3", body: `{"step":1}`, want: 409},
		// PUT /jobs/{id}/payload
		{name: "edit payload", method: "PUT", path: "/api/v1/jobs/edit/payload", token: tokOperator, key: "pay-1", header: map[string]string{"If-Match": f.etag}, body: `{"to":"c@example.com"}`, want: 200},
		{name: "edit payload stale", method: "PUT", path: "/api/v1/jobs/edit/payload", token: tokOperator, key: "pay-2", header: map[string]string{"If-Match": f.etag}, body: `{"to":"d@example.com"}`, want: 412},
		{name: "edit payload without If-Match", method: "PUT", path: "/api/v1/jobs/edit/payload", token: tokOperator, key: "pay-3", body: `{"to":"d@example.com"}`, want: 428},
		{name: "edit payload unknown", method: "PUT", path: "/api/v1/jobs/nope/payload", token: tokOperator, key: "pay-4", header: map[string]string{"If-Match": `"1"`}, body: `{}`, want: 404},
		{name: "edit payload malformed", method: "PUT", path: "/api/v1/jobs/avail-1/payload", token: tokOperator, key: "pay-5", header: map[string]string{"If-Match": `"1"`}, body: `{"to":`, want: 400},
		{name: "edit payload over the limit", method: "PUT", path: "/api/v1/jobs/avail-1/payload", token: tokOperator, key: "pay-6", header: map[string]string{"If-Match": `"1"`}, body: big, want: 413},
		{name: "edit payload as viewer", method: "PUT", path: "/api/v1/jobs/avail-1/payload", token: tokViewer, key: "pay-7", header: map[string]string{"If-Match": `"1"`}, body: `{}`, want: 403},
		// POST /jobs/actions
		{name: "actions", method: "POST", path: "/api/v1/jobs/actions", token: tokOperator, key: "act-1", body: j(map[string]any{"action": "retry", "ids": []string{"dead-4", "nope", "avail-1"}}), want: 200},
		{name: "actions without ids", method: "POST", path: "/api/v1/jobs/actions", token: tokOperator, key: "act-2", body: `{"action":"retry","ids":[]}`, want: 400},
		{name: "actions with an unknown action", method: "POST", path: "/api/v1/jobs/actions", token: tokOperator, key: "act-3", body: `{"action":"explode","ids":["dead-5"]}`, want: 400},
		{name: "actions delete as operator", method: "POST", path: "/api/v1/jobs/actions", token: tokOperator, key: "act-4", body: `{"action":"delete","ids":["dead-5"]}`, want: 403},
		// POST /jobs/bulk
		{name: "bulk dry run", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-1", body: `{"action":"retry","selector":{"state":"archived","queue":"billing"},"dry_run":true}`, want: 200},
		{name: "bulk run", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-2", body: `{"action":"retry","selector":{"states":["archived"],"queues":["billing"]}}`, want: 202},
		{name: "bulk run replayed", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-2", body: `{"action":"retry","selector":{"states":["archived"],"queues":["billing"]}}`, want: 202},
		{name: "bulk with a plan", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-3", body: `{"plan":{"action":"retry","selector":{"states":["archived"],"queues":["billing"]},"cutoff":"2026-01-01T00:00:00Z"}}`, want: 202},
		{name: "bulk scheduled from a plan", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-3s", body: `{"plan":{"action":"retry","selector":{"states":["archived"],"queues":["billing"]},"cutoff":"2026-01-01T00:00:00Z"},"start_at":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`, want: 202},
		{name: "bulk scheduled in the past", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-3p", body: `{"plan":{"action":"retry","selector":{"states":["archived"],"queues":["billing"]},"cutoff":"2026-01-01T00:00:00Z"},"start_at":"2026-01-01T00:00:00Z"}`, want: 400},
		{name: "bulk with a plan for another selection", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-4", body: `{"action":"retry","selector":{"queue":"email"},"plan":{"action":"retry","selector":{"states":["archived"]},"cutoff":"2026-01-01T00:00:00Z"}}`, want: 400},
		{name: "bulk with an empty selector", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-5", body: `{"action":"retry","selector":{}}`, want: 400},
		{name: "bulk with a misspelt filter", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-6", body: `{"action":"retry","selector":{"queus":["billing"]}}`, want: 400},
		{name: "bulk delete as operator", method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, key: "bulk-7", body: `{"action":"delete","selector":{"queue":"billing"}}`, want: 403},
		{name: "bulk as viewer", method: "POST", path: "/api/v1/jobs/bulk", token: tokViewer, key: "bulk-8", body: `{"action":"retry","selector":{"queue":"billing"},"dry_run":true}`, want: 403},
		// GET /error-groups
		{name: "error groups", method: "GET", path: "/api/v1/error-groups", token: tokViewer, want: 200},
		{name: "error groups of a queue", method: "GET", path: "/api/v1/error-groups?queue=billing", token: tokViewer, want: 200},
		{name: "error groups with a bad q", method: "GET", path: "/api/v1/error-groups?q=state%3A", token: tokViewer, want: 400},
		{name: "error groups with the ignored", method: "GET", path: "/api/v1/error-groups?ignored=true", token: tokViewer, want: 200},
		{name: "error groups with a bad ignored", method: "GET", path: "/api/v1/error-groups?ignored=maybe", token: tokViewer, want: 400},
		// POST /error-groups/{id}/resolve|ignore|unignore
		{name: "resolve error group", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/resolve", token: tokOperator, key: "g-1", body: `{"note":"fixed in 42"}`, want: 200},
		{name: "resolve error group replayed", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/resolve", token: tokOperator, key: "g-1", body: `{"note":"fixed in 42"}`, want: 200},
		{name: "resolve error group as viewer", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/resolve", token: tokViewer, key: "g-2", want: 403},
		{name: "resolve unknown error group", method: "POST", path: "/api/v1/error-groups/0123456789abcdef/resolve", token: tokOperator, key: "g-3", want: 404},
		{name: "resolve error group with an unknown field", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/resolve", token: tokOperator, key: "g-4", body: `{"why":"x"}`, want: 400},
		{name: "ignore error group", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/ignore", token: tokOperator, key: "g-5", body: `{"note":"sandbox"}`, want: 200},
		{name: "ignore error group without a body", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/ignore", token: tokOperator, key: "g-6", want: 200},
		{name: "ignore error group with a long note", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/ignore", token: tokOperator, key: "g-7", body: `{"note":"` + strings.Repeat("x", 1001) + `"}`, want: 400},
		{name: "unignore error group", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/unignore", token: tokOperator, key: "g-8", want: 200},
		{name: "unignore error group with a body", method: "POST", path: "/api/v1/error-groups/" + contractGroup + "/unignore", token: tokOperator, key: "g-9", body: `{"note":"x"}`, want: 400},
		// GET /audit
		{name: "audit as viewer", method: "GET", path: "/api/v1/audit?limit=5", token: tokViewer, want: 200},
		{name: "audit filtered as inspector", method: "GET", path: "/api/v1/audit?action=retry&since=2020-01-01T00:00:00Z", token: tokInspector, want: 200},
		{name: "audit with a bad time", method: "GET", path: "/api/v1/audit?since=yesterday", token: tokAdmin, want: 400},
		{name: "audit without a token", method: "GET", path: "/api/v1/audit", want: 401},
		// GET /operations, /operations/{id}, POST /operations/{id}/cancel|resume
		{name: "operations", method: "GET", path: "/api/v1/operations?limit=1", token: tokViewer, want: 200},
		{name: "operations with a bad cursor", method: "GET", path: "/api/v1/operations?cursor=zz", token: tokViewer, want: 400},
		{name: "operations with limit 1000", method: "GET", path: "/api/v1/operations?limit=1000", token: tokViewer, want: 400},
		{name: "operation", method: "GET", path: "/api/v1/operations/" + f.opID, token: tokViewer, want: 200},
		{name: "operation unknown", method: "GET", path: "/api/v1/operations/nope", token: tokViewer, want: 404},
		{name: "operation cancel", method: "POST", path: "/api/v1/operations/" + f.opID + "/cancel", token: tokOperator, key: "opc-1", want: 200},
		{name: "operation cancel again", method: "POST", path: "/api/v1/operations/" + f.opID + "/cancel", token: tokOperator, key: "opc-2", want: 409},
		{name: "operation cancel unknown", method: "POST", path: "/api/v1/operations/nope/cancel", token: tokOperator, key: "opc-3", want: 404},
		{name: "operation cancel as viewer", method: "POST", path: "/api/v1/operations/" + f.opID + "/cancel", token: tokViewer, key: "opc-4", want: 403},
		{name: "operation resume", method: "POST", path: "/api/v1/operations/" + f.haltedID + "/resume", token: tokOperator, key: "opr-0", want: 200},
		{name: "operation resume, not halted", method: "POST", path: "/api/v1/operations/" + f.opID + "/resume", token: tokOperator, key: "opr-1", want: 409},
		{name: "operation resume unknown", method: "POST", path: "/api/v1/operations/nope/resume", token: tokOperator, key: "opr-2", want: 404},
		{name: "operation resume as viewer", method: "POST", path: "/api/v1/operations/" + f.opID + "/resume", token: tokViewer, key: "opr-3", want: 403},
		// GET /quarantine, DELETE /quarantine/{fingerprint}
		{name: "quarantine", method: "GET", path: "/api/v1/quarantine", token: tokViewer, want: 200},
		{name: "quarantine without token", method: "GET", path: "/api/v1/quarantine", want: 401},
		{name: "release a fingerprint as viewer", method: "DELETE", path: "/api/v1/quarantine/" + f.fp, token: tokViewer, key: "fp-1", want: 403},
		{name: "release a fingerprint", method: "DELETE", path: "/api/v1/quarantine/" + f.fp, token: tokOperator, key: "fp-2", want: 200},
		{name: "release an unknown fingerprint", method: "DELETE", path: "/api/v1/quarantine/" + strings.Repeat("ab", 32), token: tokOperator, key: "fp-3", want: 404},
		{name: "release a malformed fingerprint", method: "DELETE", path: "/api/v1/quarantine/xyz", token: tokOperator, key: "fp-4", want: 404},
		// DELETE /jobs/{id}
		{name: "delete as operator", method: "DELETE", path: "/api/v1/jobs/dead-5", token: tokOperator, key: "del-1", want: 403},
		{name: "delete", method: "DELETE", path: "/api/v1/jobs/dead-5", token: tokAdmin, key: "del-2", want: 200},
		{name: "delete unknown", method: "DELETE", path: "/api/v1/jobs/dead-5", token: tokAdmin, key: "del-3", want: 404},
		{name: "delete without key", method: "DELETE", path: "/api/v1/jobs/dead-5", token: tokAdmin, key: "-", want: 400},
		// GET /queues, POST /queues/{queue}/pause|resume
		{name: "queues", method: "GET", path: "/api/v1/queues", token: tokViewer, want: 200},
		{name: "queues with unknown token", method: "GET", path: "/api/v1/queues", token: tokUnknown, want: 401},
		{name: "pause", method: "POST", path: "/api/v1/queues/billing/pause", token: tokAdmin, key: "q-1", want: 200},
		{name: "pause as operator", method: "POST", path: "/api/v1/queues/billing/pause", token: tokOperator, key: "q-2", want: 403},
		{name: "pause a bad name", method: "POST", path: "/api/v1/queues/b%20d/pause", token: tokAdmin, key: "q-3", want: 400},
		{name: "resume", method: "POST", path: "/api/v1/queues/billing/resume", token: tokAdmin, key: "q-4", want: 200},
		{name: "resume read-only", method: "POST", path: "/api/v1/queues/billing/resume", token: tokAdmin, key: "q-5", want: 403, readOnly: true},
		{name: "resume without token", method: "POST", path: "/api/v1/queues/billing/resume", key: "q-6", want: 401},
		// GET /limits, PUT /limits
		{name: "set limit", method: "PUT", path: "/api/v1/limits", token: tokAdmin, key: "l-1", body: `{"scope":"kind","name":"charge","concurrency":5}`, want: 200},
		{name: "limits", method: "GET", path: "/api/v1/limits", token: tokViewer, want: 200},
		{name: "limits with unknown token", method: "GET", path: "/api/v1/limits", token: tokUnknown, want: 401},
		{name: "set limit of sync", method: "PUT", path: "/api/v1/limits", token: tokAdmin, key: "l-6", body: `{"scope":"kind","name":"sync","concurrency":1}`, want: 200},
		{name: "list a held job", method: "GET", path: "/api/v1/jobs?q=state:available%20queue:ledger", token: tokViewer, want: 200, contains: `"held_by":"limit kind sync 1/1"`},
		{name: "set limit as operator", method: "PUT", path: "/api/v1/limits", token: tokOperator, key: "l-2", body: `{"scope":"kind","name":"charge","concurrency":1}`, want: 403},
		{name: "set limit of an unknown scope", method: "PUT", path: "/api/v1/limits", token: tokAdmin, key: "l-3", body: `{"scope":"tenant","name":"x","concurrency":1}`, want: 400},
		{name: "set limit without concurrency", method: "PUT", path: "/api/v1/limits", token: tokAdmin, key: "l-4", body: `{"scope":"kind","name":"charge"}`, want: 400},
		{name: "remove limit", method: "PUT", path: "/api/v1/limits", token: tokAdmin, key: "l-5", body: `{"scope":"kind","name":"charge","concurrency":0}`, want: 200},
		// GET /schedules, POST /schedules/{name}/pause|resume|trigger
		{name: "schedules", method: "GET", path: "/api/v1/schedules", token: tokViewer, want: 200},
		{name: "schedules paged", method: "GET", path: "/api/v1/schedules?limit=1&cursor=a", token: tokViewer, want: 200},
		{name: "schedules with limit 500", method: "GET", path: "/api/v1/schedules?limit=500", token: tokViewer, want: 400},
		{name: "schedules with an unknown parameter", method: "GET", path: "/api/v1/schedules?colour=red", token: tokViewer, want: 400},
		{name: "schedules without token", method: "GET", path: "/api/v1/schedules", want: 401},
		{name: "pause schedule", method: "POST", path: "/api/v1/schedules/nightly/pause", token: tokAdmin, key: "s-1", want: 200},
		{name: "pause schedule as operator", method: "POST", path: "/api/v1/schedules/nightly/pause", token: tokOperator, key: "s-2", want: 403},
		{name: "pause unknown schedule", method: "POST", path: "/api/v1/schedules/nope/pause", token: tokAdmin, key: "s-3", want: 404},
		{name: "pause schedule with a bad name", method: "POST", path: "/api/v1/schedules/b%20d/pause", token: tokAdmin, key: "s-4", want: 400},
		{name: "resume schedule", method: "POST", path: "/api/v1/schedules/nightly/resume", token: tokAdmin, key: "s-5", want: 200},
		{name: "resume schedule read-only", method: "POST", path: "/api/v1/schedules/nightly/resume", token: tokAdmin, key: "s-6", want: 403, readOnly: true},
		{name: "trigger schedule", method: "POST", path: "/api/v1/schedules/reports/trigger", token: tokOperator, key: "s-7", want: 200},
		{name: "trigger schedule replayed", method: "POST", path: "/api/v1/schedules/reports/trigger", token: tokOperator, key: "s-7", want: 200},
		{name: "trigger schedule as viewer", method: "POST", path: "/api/v1/schedules/reports/trigger", token: tokViewer, key: "s-8", want: 403},
		{name: "trigger schedule with a body", method: "POST", path: "/api/v1/schedules/reports/trigger", token: tokOperator, key: "s-9", body: `{"now":true}`, want: 400},
		// GET /events
		{name: "events", method: "GET", path: "/api/v1/events", token: tokViewer, want: 200, stream: true},
		{name: "events without token", method: "GET", path: "/api/v1/events", want: 401},
		// GET /healthz, /readyz, /meta, /metrics
		{name: "healthz", method: "GET", path: "/api/v1/healthz", want: 200},
		{name: "readyz", method: "GET", path: "/api/v1/readyz", want: 200},
		{name: "meta", method: "GET", path: "/api/v1/meta", token: tokInspector, want: 200},
		{name: "meta read-only", method: "GET", path: "/api/v1/meta", token: tokViewer, want: 200, readOnly: true},
		{name: "meta with unknown token", method: "GET", path: "/api/v1/meta", token: tokUnknown, want: 401},
		{name: "metrics", method: "GET", path: "/metrics", token: tokViewer, want: 200},
		{name: "metrics without token", method: "GET", path: "/metrics", want: 401},
	}

	good, bad := map[string]bool{}, map[string]bool{}
	for _, c := range cases {
		base := hs.URL
		if c.readOnly {
			base = ro.URL
		}
		route, status, err := sendContractCase(t, router, base, c)
		if err != nil {
			t.Errorf("%s: %s %s: %v", c.name, c.method, c.path, err)
		}
		if status != c.want {
			t.Errorf("%s: %s %s answered %d, want %d", c.name, c.method, c.path, status, c.want)
		}
		if route != "" && status < 300 {
			good[route] = true
		} else if route != "" {
			bad[route] = true
		}
	}
	for r := range specRoutes {
		if !good[r] {
			t.Errorf("%s: no request of the contract test succeeded", r)
		}
		if !bad[r] && r != "GET /api/v1/healthz" && r != "GET /api/v1/readyz" {
			// healthz and readyz take no input and no token: nothing to get wrong.
			t.Errorf("%s: no bad request of the contract test", r)
		}
	}
}

// sendContractCase sends c, reads the answer and validates both against
// the spec: the request (when the server took it) must be one the spec
// accepts, and the answer's status, headers and body must be declared.
// It returns the spec route ("METHOD /path/{param}") and the status.
func sendContractCase(t *testing.T, router routers.Router, base string, c contractCase) (string, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, body)
	if err != nil {
		return "", 0, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.key != "-" && c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	if c.body != "" {
		ct := c.ctype
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var respBody []byte
	if !c.stream {
		if respBody, err = io.ReadAll(resp.Body); err != nil {
			return "", 0, err
		}
	}

	// The same request, as the spec's router sees it.
	vreq, err := http.NewRequest(c.method, "http://contract.test"+c.path, strings.NewReader(c.body))
	if err != nil {
		return "", 0, err
	}
	vreq.Header = req.Header.Clone()
	route, params, err := router.FindRoute(vreq)
	if err != nil {
		return "", resp.StatusCode, fmt.Errorf("the spec has no route for it: %w", err)
	}
	name := route.Method + " " + route.Path
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if resp.StatusCode < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return name, resp.StatusCode, fmt.Errorf("the server took a request the spec refuses: %w", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: c.stream},
	}
	if c.contains != "" && !strings.Contains(string(respBody), c.contains) {
		return name, resp.StatusCode, fmt.Errorf("answer %d %s does not hold %s", resp.StatusCode, short(respBody), c.contains)
	}
	out.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return name, resp.StatusCode, fmt.Errorf("answer %d %s does not match the spec: %w", resp.StatusCode, short(respBody), err)
	}
	if resp.StatusCode >= 400 && !c.stream {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(respBody, &e) != nil || e.Error == "" {
			return name, resp.StatusCode, fmt.Errorf("error answer without an error text: %s", short(respBody))
		}
	}
	return name, resp.StatusCode, nil
}

func short(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
