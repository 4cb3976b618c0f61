package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// Tokens of the role tests, one per role.
var testTokens = map[string]Identity{
	"viewer-token-0000000001":     {Name: "vera", Role: engine.RoleViewer},
	"inspector-token-000000001":   {Name: "ines", Role: engine.RoleInspector},
	"operator-token-0000000001":   {Name: "otto", Role: engine.RoleOperator},
	"admin-token-000000000000001": {Name: "ada", Role: engine.RoleAdmin},
}

func tokenOf(role engine.Role) string {
	for tok, id := range testTokens {
		if id.Role == role {
			return tok
		}
	}
	return ""
}

// req describes one request of a test.
type req struct {
	method, path, body string
	token              string
	key                string // Idempotency-Key; "-" for none
	header             map[string]string
}

// send runs r against h and returns the recorded answer.
func send(t *testing.T, h http.Handler, r req) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	// As a client on this machine sends it (httptest's default is
	// example.com, which a server without tokens refuses).
	hr.Host = "127.0.0.1:8080"
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.method != http.MethodGet && r.key != "-" {
		k := r.key
		if k == "" {
			k = "key-" + r.method + r.path + r.body
			if len(k) > 200 {
				k = k[:200]
			}
			k = strings.Map(func(c rune) rune {
				if c < 0x20 || c > 0x7e {
					return '_'
				}
				return c
			}, k)
		}
		hr.Header.Set(IdempotencyHeader, k)
	}
	for k, v := range r.header {
		if k == "Host" {
			hr.Host = v
			continue
		}
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, hr)
	return w
}

// decode reads a JSON answer into a T.
func decode[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("answer %d %q: %v", w.Code, w.Body.String(), err)
	}
	return v
}

func wantStatus(t *testing.T, w *httptest.ResponseRecorder, status int) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d: %s", w.Code, status, w.Body.String())
	}
}

func TestSeedRequestsAsWritten(t *testing.T) {
	fx, srv := setup(t, ServerOptions{})

	// curl 'http://127.0.0.1:8080/api/v1/jobs?state=archived&limit=50'
	w := send(t, srv, req{method: "GET", path: "/api/v1/jobs?state=archived&limit=50"})
	wantStatus(t, w, 200)
	page := decode[engine.JobPage](t, w)
	if len(page.Jobs) != 7 {
		t.Fatalf("%d archived jobs, want 7", len(page.Jobs))
	}
	for _, j := range page.Jobs {
		if j.State != engine.StateArchived || j.Payload != nil {
			t.Fatalf("list row %s: state %s payload %s", j.ID, j.State, j.Payload)
		}
	}

	// curl 'http://127.0.0.1:8080/api/v1/jobs/JOB_ID?include_payload=true'
	w = send(t, srv, req{method: "GET", path: "/api/v1/jobs/JOB_1?include_payload=true"})
	wantStatus(t, w, 200)
	d := decode[engine.JobDetail](t, w)
	if !strings.Contains(string(d.Job.Payload), `"customer":42`) || w.Header().Get("ETag") != fmt.Sprintf(`"%d"`, d.Job.Version) {
		t.Fatalf("detail payload %s etag %q for version %d", d.Job.Payload, w.Header().Get("ETag"), d.Job.Version)
	}

	// curl --request POST --header 'Idempotency-Key: redrive-JOB_ID-1' .../jobs/JOB_ID/retry
	// (curl sends no body and no Content-Type.)
	retry := req{method: "POST", path: "/api/v1/jobs/JOB_1/retry", key: "redrive-JOB_1-1"}
	w = send(t, srv, retry)
	wantStatus(t, w, 200)
	if st := fx.state(t, "JOB_1"); st != engine.StateAvailable {
		t.Fatalf("JOB_1 is %s after retry", st)
	}
	again := send(t, srv, retry)
	wantStatus(t, again, 200)
	if again.Header().Get(ReplayedHeader) != "true" || again.Body.String() != w.Body.String() {
		t.Fatalf("repeat of the retry: replayed %q body %s", again.Header().Get(ReplayedHeader), again.Body.String())
	}

	// POST /api/v1/jobs/actions with {"action":"retry","ids":["JOB_1","JOB_2"]}
	w = send(t, srv, req{method: "POST", path: "/api/v1/jobs/actions", key: "billing-redrive-2026-08-31",
		body: `{"action":"retry","ids":["JOB_1","JOB_2"]}`})
	wantStatus(t, w, 200)
	ar := decode[actionsResponse](t, w)
	if len(ar.Results) != 2 || ar.Results[0].OK || ar.Results[0].Reason != "wrong_state" || !ar.Results[1].OK || ar.Succeeded != 1 || ar.Failed != 1 {
		t.Fatalf("per-id results: %+v", ar)
	}

	// The bulk dry run, then the real run with a new key.
	bulk := func(key string, dry bool) *httptest.ResponseRecorder {
		return send(t, srv, req{method: "POST", path: "/api/v1/jobs/bulk", key: key, body: `{
    "action":"retry",
    "selector":{"state":"archived","queue":"billing"},
    "dry_run":` + map[bool]string{true: "true", false: "false"}[dry] + `
  }`})
	}
	w = bulk("billing-redrive-preview-1", true)
	wantStatus(t, w, 200)
	preview := decode[engine.BulkResult](t, w)
	if preview.Matched != 4 || len(preview.Sample) != 4 || preview.Operation != nil {
		t.Fatalf("dry run: %+v", preview)
	}
	if fx.state(t, "JOB_3") != engine.StateArchived {
		t.Fatal("the dry run changed a job")
	}
	w = bulk("billing-redrive-1", false)
	wantStatus(t, w, 202)
	started := decode[engine.BulkResult](t, w)
	if started.Operation == nil || started.Operation.CreatedBy != "local" || w.Header().Get("Location") != "/api/v1/operations/"+started.Operation.ID {
		t.Fatalf("real run: %+v location %q", started.Operation, w.Header().Get("Location"))
	}

	// GET /api/v1/operations/{id} until completed. No engine here runs
	// operations: the test runs it, as a started engine's loop would.
	path := "/api/v1/operations/" + started.Operation.ID
	w = send(t, srv, req{method: "GET", path: path})
	wantStatus(t, w, 200)
	if op := decode[engine.Operation](t, w); op.Status != engine.OperationPending {
		t.Fatalf("operation before it ran: %+v", op)
	}
	if ran, err := fx.eng.RunOperation(context.Background()); !ran || err != nil {
		t.Fatalf("run the operation: %v %v", ran, err)
	}
	w = send(t, srv, req{method: "GET", path: path})
	wantStatus(t, w, 200)
	// Of the four it matched, PILL_1 is refused: its fingerprint is
	// quarantined.
	if op := decode[engine.Operation](t, w); op.Status != engine.OperationCompleted || op.Succeeded != 3 || op.Failed != 1 {
		t.Fatalf("operation: %+v", op)
	}
	for id, want := range map[string]engine.State{"JOB_3": engine.StateAvailable, "JOB_5": engine.StateAvailable, "PILL_1": engine.StateArchived} {
		if st := fx.state(t, id); st != want {
			t.Fatalf("%s is %s after the operation, want %s", id, st, want)
		}
	}
}

func TestRoutesHappyPath(t *testing.T) {
	file := newFixtureFile(t)
	for _, tc := range []struct {
		name   string
		r      req
		status int
		want   string // a substring of the body
	}{
		{"list", req{method: "GET", path: "/api/v1/jobs"}, 200, `"id":"EMAIL_1"`},
		{"list q and simple params", req{method: "GET", path: "/api/v1/jobs?q=state:archived&queue=email"}, 200, `"id":"EMAIL_1"`},
		{"list by kind", req{method: "GET", path: "/api/v1/jobs?kind=charge,other&kind=x"}, 200, `"id":"JOB_1"`},
		{"counts", req{method: "GET", path: "/api/v1/jobs/counts"}, 200, `"archived":7`},
		{"counts of a queue", req{method: "GET", path: "/api/v1/jobs/counts?queue=email"}, 200, `"email":{"archived":1}`},
		{"detail", req{method: "GET", path: "/api/v1/jobs/JOB_2"}, 200, `"timeline"`},
		{"error groups", req{method: "GET", path: "/api/v1/error-groups?q=state:archived"}, 200, `"pattern":"card declined"`},
		{"enqueue one", req{method: "POST", path: "/api/v1/jobs", body: `{"id":"n1","queue":"email","kind":"send","payload":{"to":"a"},"timeout":"30s"}`}, 201, `"id":"n1"`},
		{"enqueue existing", req{method: "POST", path: "/api/v1/jobs", body: `{"id":"JOB_1","queue":"billing","kind":"charge","payload":` + okPayload + `}`}, 200, `"existing":true`},
		{"enqueue batch", req{method: "POST", path: "/api/v1/jobs", body: `[{"kind":"send"},{"kind":""}]`}, 200, `"reason":"invalid"`},
		{"retry with body", req{method: "POST", path: "/api/v1/jobs/JOB_2/retry", body: `{"force":true}`}, 200, `"state":"available"`},
		{"cancel", req{method: "POST", path: "/api/v1/jobs/WAIT_1/cancel"}, 200, `"state":"cancelled"`},
		{"cancel with empty object", req{method: "POST", path: "/api/v1/jobs/WAIT_1/cancel", body: `{}`}, 200, `"state":"cancelled"`},
		{"release", req{method: "POST", path: "/api/v1/jobs/HELD_1/release"}, 200, `"state":"available"`},
		{"retry with input", req{method: "POST", path: "/api/v1/jobs/JOB_3/retry-with-input", body: `{"id":"JOB_3b","payload":{"customer":43}}`}, 201, `"retry_of":"JOB_3"`},
		{"delete", req{method: "DELETE", path: "/api/v1/jobs/JOB_4"}, 200, `"deleted":true`},
		{"edit payload", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"customer":7}`, header: ifMatch(deadVersion)}, 200, fmt.Sprintf(`"version":%d`, deadVersion+1)},
		{"operations", req{method: "GET", path: "/api/v1/operations?limit=10"}, 200, `"operations":[]`},
		{"quarantine", req{method: "GET", path: "/api/v1/quarantine"}, 200, `"fingerprint":"` + pillFingerprint + `"`},
		{"release fingerprint", req{method: "DELETE", path: "/api/v1/quarantine/" + pillFingerprint}, 200, `{"released":1}`},
		{"queues", req{method: "GET", path: "/api/v1/queues"}, 200, `"name":"billing"`},
		{"pause", req{method: "POST", path: "/api/v1/queues/billing/pause"}, 200, `"paused":true`},
		{"resume", req{method: "POST", path: "/api/v1/queues/billing/resume"}, 200, `"paused":false`},
		{"healthz", req{method: "GET", path: "/api/v1/healthz"}, 200, `"ok"`},
		{"readyz", req{method: "GET", path: "/api/v1/readyz"}, 200, `"ready"`},
		{"meta", req{method: "GET", path: "/api/v1/meta"}, 200, `"role":"admin"`},
		{"metrics without ServerOptions.Metrics", req{method: "GET", path: "/metrics"}, 404, `"no metrics on this server"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, srv := file.setup(t, ServerOptions{})
			w := send(t, srv, tc.r)
			wantStatus(t, w, tc.status)
			if !strings.Contains(w.Body.String(), tc.want) {
				t.Fatalf("body lacks %s:\n%s", tc.want, w.Body.String())
			}
		})
	}
}

func TestErrorAnswers(t *testing.T) {
	// No error answer changes anything, so the rows share one fixture,
	// whose every snapshot stays the same while they run.
	fx, srv := setup(t, ServerOptions{})
	big := `{"action":"retry","ids":["` + strings.Repeat("x", DefaultMaxBody) + `"]}`
	for _, tc := range []struct {
		name   string
		r      req
		status int
		reason string
	}{
		{"malformed JSON", req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"retry","ids":[`}, 400, "invalid"},
		{"trailing data", req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"retry","ids":["a"]} {}`}, 400, "invalid"},
		{"unknown field", req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"retry","ids":["a"],"force":true}`}, 400, "invalid"},
		{"unknown selector field", req{method: "POST", path: "/api/v1/jobs/bulk", body: `{"action":"retry","selector":{"status":"archived"}}`}, 400, "invalid"},
		{"empty selector", req{method: "POST", path: "/api/v1/jobs/bulk", body: `{"action":"retry","selector":{}}`}, 400, "invalid"},
		{"no selector", req{method: "POST", path: "/api/v1/jobs/bulk", body: `{"action":"retry"}`}, 400, "invalid"},
		{"bad selector q", req{method: "POST", path: "/api/v1/jobs/bulk", body: `{"action":"retry","selector":{"q":"colour:red"}}`}, 400, "invalid"},
		{"unknown action", req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"explode","ids":["a"]}`}, 400, "invalid"},
		{"missing body", req{method: "POST", path: "/api/v1/jobs/actions"}, 400, "invalid"},
		{"body on a body-less route", req{method: "POST", path: "/api/v1/jobs/WAIT_1/cancel", body: `{"why":"x"}`}, 400, "invalid"},
		{"body over 2 MiB", req{method: "POST", path: "/api/v1/jobs/actions", body: big}, 413, "body_too_large"},
		{"payload over the engine's limit", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":"` + strings.Repeat("x", 1<<20) + `"}`, header: ifMatch(deadVersion)}, 413, "payload_too_large"},
		{"not JSON", req{method: "POST", path: "/api/v1/jobs/actions", body: `action=retry`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "unsupported_media_type"},
		{"no content type", req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"retry","ids":["a"]}`, header: map[string]string{"Content-Type": ""}}, 415, "unsupported_media_type"},
		{"missing job", req{method: "GET", path: "/api/v1/jobs/nope"}, 404, "not_found"},
		{"missing operation", req{method: "GET", path: "/api/v1/operations/nope"}, 404, "not_found"},
		{"retry of a missing job", req{method: "POST", path: "/api/v1/jobs/nope/retry"}, 404, "not_found"},
		{"wrong state", req{method: "POST", path: "/api/v1/jobs/WAIT_1/retry"}, 409, "wrong_state"},
		{"stale If-Match", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":1}`, header: map[string]string{"If-Match": `"0"`}}, 412, "conflict"},
		{"no If-Match", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":1}`}, 428, "precondition_required"},
		{"bad If-Match", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":1}`, header: map[string]string{"If-Match": `*`}}, 400, "invalid"},
		{"payload not an object", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `[1]`, header: ifMatch(deadVersion)}, 400, "invalid"},
		{"quarantined", req{method: "POST", path: "/api/v1/jobs/PILL_1/retry"}, 423, "quarantined"},
		{"quarantined enqueue", req{method: "POST", path: "/api/v1/jobs", body: `{"kind":"charge","payload":` + pillPayload + `}`}, 423, "quarantined"},
		{"no idempotency key", req{method: "POST", path: "/api/v1/jobs/JOB_1/retry", key: "-"}, 400, "idempotency_key_missing"},
		{"unknown query parameter", req{method: "GET", path: "/api/v1/jobs?status=archived"}, 400, "invalid"},
		{"bad limit", req{method: "GET", path: "/api/v1/jobs?limit=ten"}, 400, "invalid"},
		{"limit out of range", req{method: "GET", path: "/api/v1/jobs?limit=500"}, 400, "invalid"},
		{"bad state", req{method: "GET", path: "/api/v1/jobs?state=dead"}, 400, "invalid"},
		{"bad q", req{method: "GET", path: "/api/v1/jobs?q=state:"}, 400, "invalid"},
		{"bad cursor", req{method: "GET", path: "/api/v1/jobs?cursor=nope"}, 400, "invalid"},
		{"malformed query", req{method: "GET", path: "/api/v1/jobs?q=%zz"}, 400, "invalid"},
		{"bad include_payload", req{method: "GET", path: "/api/v1/jobs/JOB_1?include_payload=maybe"}, 400, "invalid"},
		{"no route", req{method: "GET", path: "/api/v1/nothing"}, 404, "not_found"},
		{"wrong method", req{method: "PATCH", path: "/api/v1/jobs/JOB_1"}, 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := fx.snapshot(t)
			w := send(t, srv, tc.r)
			wantStatus(t, w, tc.status)
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			b := decode[errorBody](t, w)
			if b.Error == "" || b.Reason != tc.reason {
				t.Fatalf("body %+v, want reason %s", b, tc.reason)
			}
			// Refused by the server, or by the engine before it wrote.
			if after := fx.snapshot(t); after != before {
				t.Fatalf("a refused request changed something:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestUnsupportedAndStoreDown(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	// A Control without Enqueuer: POST /jobs is 501.
	w := send(t, NewServer(struct{ engine.Control }{fx.eng}, ServerOptions{}), req{method: "POST", path: "/api/v1/jobs", body: `{"kind":"x"}`})
	wantStatus(t, w, 501)

	// A store that does not serve a route: 501.
	w = send(t, NewServer(queuesUnsupported{fx.eng}, ServerOptions{}), req{method: "GET", path: "/api/v1/queues"})
	wantStatus(t, w, 501)

	// The store is gone: 503, which a client may retry; the process is
	// still alive.
	srv := NewServer(fx.eng, ServerOptions{})
	if err := fx.store.Close(); err != nil {
		t.Fatal(err)
	}
	w = send(t, srv, req{method: "GET", path: "/api/v1/jobs"})
	wantStatus(t, w, 503)
	if w.Header().Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	w = send(t, srv, req{method: "GET", path: "/api/v1/readyz"})
	wantStatus(t, w, 503)
	w = send(t, srv, req{method: "GET", path: "/api/v1/healthz"})
	wantStatus(t, w, 200)
}

// TestRecoversFromPanic: a panic in the engine answers 500, and a
// mutation's key is freed: the same request runs again (and panics
// again).
func TestRecoversFromPanic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ctl  func(*engine.Engine) engine.Control
		r    req
	}{
		{"read", func(e *engine.Engine) engine.Control { return queuesPanics{e} }, req{method: "GET", path: "/api/v1/queues"}},
		{"mutation", func(e *engine.Engine) engine.Control { return pausePanics{e} }, req{method: "POST", path: "/api/v1/queues/billing/pause", key: "p1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			srv := NewServer(tc.ctl(fx.eng), ServerOptions{})
			wantStatus(t, send(t, srv, tc.r), 500)
			wantStatus(t, send(t, srv, tc.r), 500)
		})
	}
}

// ifMatch is the If-Match header of an edit of a job at version.
func ifMatch(version int64) map[string]string {
	return map[string]string{"If-Match": fmt.Sprintf(`"%d"`, version)}
}
