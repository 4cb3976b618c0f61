package api

import (
	"context"
	"encoding/json"
	"errors"
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

// setup returns a fake engine and a server over it.
func setup(t *testing.T, opts ServerOptions) (*fakeCtl, *Server) {
	t.Helper()
	f := newFake()
	return f, NewServer(f, opts)
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
	f, srv := setup(t, ServerOptions{})

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
	if !strings.Contains(string(d.Job.Payload), `"customer":42`) || w.Header().Get("ETag") != `"1"` {
		t.Fatalf("detail payload %s etag %q", d.Job.Payload, w.Header().Get("ETag"))
	}

	// curl --request POST --header 'Idempotency-Key: redrive-JOB_ID-1' .../jobs/JOB_ID/retry
	// (curl sends no body and no Content-Type.)
	retry := req{method: "POST", path: "/api/v1/jobs/JOB_1/retry", key: "redrive-JOB_1-1"}
	w = send(t, srv, retry)
	wantStatus(t, w, 200)
	if f.state("JOB_1") != engine.StateAvailable {
		t.Fatalf("JOB_1 is %s after retry", f.state("JOB_1"))
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
	if f.state("JOB_3") != engine.StateArchived {
		t.Fatal("the dry run changed a job")
	}
	w = bulk("billing-redrive-1", false)
	wantStatus(t, w, 202)
	started := decode[engine.BulkResult](t, w)
	if started.Operation == nil || started.Operation.CreatedBy != "local" || w.Header().Get("Location") != "/api/v1/operations/"+started.Operation.ID {
		t.Fatalf("real run: %+v location %q", started.Operation, w.Header().Get("Location"))
	}

	// GET /api/v1/operations/{id} until completed.
	var op engine.Operation
	for range 10 {
		w = send(t, srv, req{method: "GET", path: "/api/v1/operations/" + started.Operation.ID})
		wantStatus(t, w, 200)
		op = decode[engine.Operation](t, w)
		if op.Status == engine.OperationCompleted {
			break
		}
	}
	if op.Status != engine.OperationCompleted || op.Succeeded != 4 {
		t.Fatalf("operation: %+v", op)
	}
	if f.state("JOB_5") != engine.StateAvailable {
		t.Fatalf("JOB_5 is %s after the operation", f.state("JOB_5"))
	}
}

func TestRoutesHappyPath(t *testing.T) {
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
		{"enqueue existing", req{method: "POST", path: "/api/v1/jobs", body: `{"id":"JOB_1","kind":"charge"}`}, 200, `"existing":true`},
		{"enqueue batch", req{method: "POST", path: "/api/v1/jobs", body: `[{"kind":"send"},{"kind":""}]`}, 200, `"reason":"invalid"`},
		{"retry with body", req{method: "POST", path: "/api/v1/jobs/JOB_2/retry", body: `{"force":true}`}, 200, `"state":"available"`},
		{"cancel", req{method: "POST", path: "/api/v1/jobs/WAIT_1/cancel"}, 200, `"state":"cancelled"`},
		{"cancel with empty object", req{method: "POST", path: "/api/v1/jobs/WAIT_1/cancel", body: `{}`}, 200, `"state":"cancelled"`},
		{"release", req{method: "POST", path: "/api/v1/jobs/HELD_1/release"}, 200, `"state":"available"`},
		{"retry with input", req{method: "POST", path: "/api/v1/jobs/JOB_3/retry-with-input", body: `{"id":"JOB_3b","payload":{"customer":43}}`}, 201, `"retry_of":"JOB_3"`},
		{"delete", req{method: "DELETE", path: "/api/v1/jobs/JOB_4"}, 200, `"deleted":true`},
		{"edit payload", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"customer":7}`, header: map[string]string{"If-Match": `"1"`}}, 200, `"version":2`},
		{"operations", req{method: "GET", path: "/api/v1/operations?limit=10"}, 200, `"operations":[]`},
		{"quarantine", req{method: "GET", path: "/api/v1/quarantine"}, 200, `"fingerprint":"fp-pill"`},
		{"release fingerprint", req{method: "DELETE", path: "/api/v1/quarantine/fp-pill"}, 200, `{"released":1}`},
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
			_, srv := setup(t, ServerOptions{})
			w := send(t, srv, tc.r)
			wantStatus(t, w, tc.status)
			if !strings.Contains(w.Body.String(), tc.want) {
				t.Fatalf("body lacks %s:\n%s", tc.want, w.Body.String())
			}
		})
	}
}

func TestErrorAnswers(t *testing.T) {
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
		{"payload over the engine's limit", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":"` + strings.Repeat("x", 1<<20) + `"}`, header: map[string]string{"If-Match": `"1"`}}, 413, "payload_too_large"},
		{"not JSON", req{method: "POST", path: "/api/v1/jobs/actions", body: `action=retry`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "unsupported_media_type"},
		{"no content type", req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"retry","ids":["a"]}`, header: map[string]string{"Content-Type": ""}}, 415, "unsupported_media_type"},
		{"missing job", req{method: "GET", path: "/api/v1/jobs/nope"}, 404, "not_found"},
		{"missing operation", req{method: "GET", path: "/api/v1/operations/nope"}, 404, "not_found"},
		{"retry of a missing job", req{method: "POST", path: "/api/v1/jobs/nope/retry"}, 404, "not_found"},
		{"wrong state", req{method: "POST", path: "/api/v1/jobs/WAIT_1/retry"}, 409, "wrong_state"},
		{"stale If-Match", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":1}`, header: map[string]string{"If-Match": `"0"`}}, 412, "conflict"},
		{"no If-Match", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":1}`}, 428, "precondition_required"},
		{"bad If-Match", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":1}`, header: map[string]string{"If-Match": `*`}}, 400, "invalid"},
		{"payload not an object", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `[1]`, header: map[string]string{"If-Match": `"1"`}}, 400, "invalid"},
		{"quarantined", req{method: "POST", path: "/api/v1/jobs/PILL_1/retry"}, 423, "quarantined"},
		{"quarantined enqueue", req{method: "POST", path: "/api/v1/jobs", body: `{"kind":"pill"}`}, 423, "quarantined"},
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
			f, srv := setup(t, ServerOptions{})
			before := f.mutationCount()
			w := send(t, srv, tc.r)
			wantStatus(t, w, tc.status)
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			b := decode[errorBody](t, w)
			if b.Error == "" || b.Reason != tc.reason {
				t.Fatalf("body %+v, want reason %s", b, tc.reason)
			}
			if tc.status == 400 || tc.status == 413 || tc.status == 415 || tc.status == 428 {
				if f.mutationCount() != before {
					t.Fatal("a refused request changed something")
				}
			}
		})
	}
}

func TestUnsupportedAndStoreDown(t *testing.T) {
	t.Parallel()
	// A Control without Enqueuer: POST /jobs is 501.
	srv := NewServer(struct{ engine.Control }{newFake()}, ServerOptions{})
	w := send(t, srv, req{method: "POST", path: "/api/v1/jobs", body: `{"kind":"x"}`})
	wantStatus(t, w, 501)

	f, srv := setup(t, ServerOptions{})
	f.down = errors.New("database is locked")
	w = send(t, srv, req{method: "GET", path: "/api/v1/jobs"})
	wantStatus(t, w, 503)
	if w.Header().Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	w = send(t, srv, req{method: "GET", path: "/api/v1/readyz"})
	wantStatus(t, w, 503)
	w = send(t, srv, req{method: "GET", path: "/api/v1/healthz"})
	wantStatus(t, w, 200)

	f.down = engine.ErrUnsupported
	w = send(t, srv, req{method: "GET", path: "/api/v1/queues"})
	wantStatus(t, w, 501)
}

func TestRecoversFromPanic(t *testing.T) {
	t.Parallel()
	srv := NewServer(panicky{newFake()}, ServerOptions{})
	w := send(t, srv, req{method: "GET", path: "/api/v1/queues"})
	wantStatus(t, w, 500)
	w = send(t, srv, req{method: "POST", path: "/api/v1/queues/billing/pause", key: "p1"})
	wantStatus(t, w, 500)
	// The key was freed: the same request runs again (and panics again).
	w = send(t, srv, req{method: "POST", path: "/api/v1/queues/billing/pause", key: "p1"})
	wantStatus(t, w, 500)
}

type panicky struct{ *fakeCtl }

func (panicky) Queues(context.Context) ([]engine.QueueInfo, error) { panic("boom") }
func (panicky) PauseQueue(context.Context, string) error           { panic("boom") }
