package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// mutatingRequests is one request per mutating route (and per action with
// its own rule), each of which succeeds for a caller allowed to send it
// on the fixture's engine. OP_ID in a path stands for an operation the
// test starts first.
var mutatingRequests = []struct {
	pattern string
	r       req
	need    engine.Role
}{
	{"POST /api/v1/jobs", req{method: "POST", path: "/api/v1/jobs", body: `{"kind":"send"}`}, engine.RoleOperator},
	{"DELETE /api/v1/jobs/{id}", req{method: "DELETE", path: "/api/v1/jobs/JOB_4"}, engine.RoleAdmin},
	{"POST /api/v1/jobs/{id}/retry", req{method: "POST", path: "/api/v1/jobs/JOB_2/retry"}, engine.RoleOperator},
	{"POST /api/v1/jobs/{id}/cancel", req{method: "POST", path: "/api/v1/jobs/WAIT_1/cancel"}, engine.RoleOperator},
	{"POST /api/v1/jobs/{id}/signals/{name}", req{method: "POST", path: "/api/v1/jobs/WAIT_1/signals/approved", body: `{"ok":true}`}, engine.RoleOperator},
	{"POST /api/v1/jobs/{id}/release", req{method: "POST", path: "/api/v1/jobs/HELD_1/release"}, engine.RoleOperator},
	{"POST /api/v1/jobs/{id}/retry-with-input", req{method: "POST", path: "/api/v1/jobs/JOB_3/retry-with-input", body: `{"payload":{"a":1}}`}, engine.RoleOperator},
	{"POST /api/v1/jobs/{id}/replay", req{method: "POST", path: "/api/v1/jobs/JOB_2/replay", body: `{"step":1}`}, engine.RoleOperator},
	{"PUT /api/v1/jobs/{id}/payload", req{method: "PUT", path: "/api/v1/jobs/JOB_1/payload", body: `{"a":1}`, header: ifMatch(deadVersion)}, engine.RoleOperator},
	{"POST /api/v1/jobs/actions", req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"retry","ids":["JOB_1"]}`}, engine.RoleOperator},
	{"POST /api/v1/jobs/actions", req{method: "POST", path: "/api/v1/jobs/actions", body: `{"action":"delete","ids":["JOB_1"]}`}, engine.RoleAdmin},
	{"POST /api/v1/jobs/bulk", req{method: "POST", path: "/api/v1/jobs/bulk", body: `{"action":"retry","selector":{"queue":"billing"}}`}, engine.RoleOperator},
	{"POST /api/v1/jobs/bulk", req{method: "POST", path: "/api/v1/jobs/bulk", body: `{"action":"delete","selector":{"queue":"billing"},"dry_run":true}`}, engine.RoleAdmin},
	{"POST /api/v1/operations/{id}/cancel", req{method: "POST", path: "/api/v1/operations/OP_ID/cancel"}, engine.RoleOperator},
	{"POST /api/v1/operations/{id}/resume", req{method: "POST", path: "/api/v1/operations/OP_ID/resume"}, engine.RoleOperator},
	{"DELETE /api/v1/quarantine/{fingerprint}", req{method: "DELETE", path: "/api/v1/quarantine/" + pillFingerprint}, engine.RoleOperator},
	{"POST /api/v1/queues/{queue}/pause", req{method: "POST", path: "/api/v1/queues/billing/pause"}, engine.RoleAdmin},
	{"POST /api/v1/queues/{queue}/resume", req{method: "POST", path: "/api/v1/queues/billing/resume"}, engine.RoleAdmin},
	{"PUT /api/v1/limits", req{method: "PUT", path: "/api/v1/limits", body: `{"scope":"kind","name":"charge","concurrency":5}`}, engine.RoleAdmin},
	{"POST /api/v1/error-groups/{id}/resolve", req{method: "POST", path: "/api/v1/error-groups/" + billingGroup + "/resolve", body: `{"note":"fixed"}`}, engine.RoleOperator},
	{"POST /api/v1/error-groups/{id}/ignore", req{method: "POST", path: "/api/v1/error-groups/" + billingGroup + "/ignore"}, engine.RoleOperator},
	{"POST /api/v1/error-groups/{id}/unignore", req{method: "POST", path: "/api/v1/error-groups/" + billingGroup + "/unignore"}, engine.RoleOperator},
	{"POST /api/v1/schedules/{name}/pause", req{method: "POST", path: "/api/v1/schedules/nightly/pause"}, engine.RoleAdmin},
	{"POST /api/v1/schedules/{name}/resume", req{method: "POST", path: "/api/v1/schedules/nightly/resume"}, engine.RoleAdmin},
	{"POST /api/v1/schedules/{name}/trigger", req{method: "POST", path: "/api/v1/schedules/nightly/trigger"}, engine.RoleOperator},
}

func TestMutatingRequestsCoverEveryMutatingRoute(t *testing.T) {
	_, srv := setup(t, ServerOptions{})
	for _, rt := range srv.routes {
		if rt.mutate == nil {
			continue
		}
		if !slices.ContainsFunc(mutatingRequests, func(m struct {
			pattern string
			r       req
			need    engine.Role
		}) bool {
			return m.pattern == rt.pattern()
		}) {
			t.Errorf("mutating route %s has no row in mutatingRequests", rt.pattern())
		}
	}
}

// TestRolesAndReadOnly sends every mutating request as every role, and as
// an admin of a read-only server: a refused request gets 403 and changes
// nothing; an allowed one succeeds.
func TestRolesAndReadOnly(t *testing.T) {
	roles := []engine.Role{engine.RoleViewer, engine.RoleInspector, engine.RoleOperator, engine.RoleAdmin}
	file := newFixtureFile(t)
	// Each allowed request changes a fixture of its own; the refused ones
	// change nothing, so they share one, whose every snapshot stays the
	// same while they run.
	shared := file.open(t)
	refusing := map[bool]*Server{}
	for _, readOnly := range []bool{false, true} {
		refusing[readOnly] = NewServer(shared.eng, ServerOptions{Tokens: testTokens, ReadOnly: readOnly})
	}
	sharedOp := startOperation(t, shared)
	for _, m := range mutatingRequests {
		for _, role := range roles {
			for _, readOnly := range []bool{false, true} {
				name := m.r.method + " " + m.r.path + " " + m.r.body + " as " + string(role)
				if readOnly {
					name += " read-only"
				}
				allowed := !readOnly && RoleAtLeast(role, m.need)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					fx, srv, op := shared, refusing[readOnly], sharedOp
					if allowed {
						fx, srv = file.setup(t, ServerOptions{Tokens: testTokens})
						if strings.Contains(m.r.path, "OP_ID/resume") {
							op = haltedOperation(t, fx.eng, fx.store)
						} else if strings.Contains(m.r.path, "OP_ID") {
							op = startOperation(t, fx)
						}
					}
					before := fx.snapshot(t)
					r := m.r
					r.path = strings.Replace(r.path, "OP_ID", op, 1)
					r.token = tokenOf(role)
					w := send(t, srv, r)
					if !allowed {
						wantStatus(t, w, http.StatusForbidden)
						b := decode[errorBody](t, w)
						if readOnly && b.Reason != reasonReadOnly || !readOnly && (b.Reason != reasonForbidden || RoleAtLeast(role, b.Needs) || !RoleAtLeast(m.need, b.Needs)) {
							t.Fatalf("refusal %+v", b)
						}
						if after := fx.snapshot(t); after != before {
							t.Fatalf("a refused request changed something:\n%s\nafter:\n%s", before, after)
						}
						return
					}
					if w.Code >= 300 {
						t.Fatalf("allowed request answered %d: %s", w.Code, w.Body.String())
					}
					// What it changed shows, so the refusals above would see
					// it; a dry run and a resume of a queue not paused change
					// nothing, and neither does an unignore of a group nobody
					// ignored.
					noop := strings.Contains(r.body, `"dry_run":true`) || strings.HasSuffix(r.path, "/resume") ||
						strings.HasSuffix(r.path, "/unignore")
					if after := fx.snapshot(t); after == before && !noop {
						t.Fatal("an allowed request changed nothing the snapshot sees")
					}
				})
			}
		}
	}
}

// startOperation starts a bulk retry of the email queue on fx's engine,
// which nothing runs, and returns its id.
func startOperation(t *testing.T, fx *fixture) string {
	t.Helper()
	res, err := fx.eng.Bulk(context.Background(), engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{Queues: []string{"email"}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Operation.ID
}

// haltedOperation is a canary retry of the email queue that halted (as
// if its sample failed), for the routes that act on one. It is claimed
// and halted through the store, with no runner of the engine's.
func haltedOperation(t *testing.T, e *engine.Engine, s backend.Store) string {
	t.Helper()
	ctx := context.Background()
	res, err := e.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{Queues: []string{"email"}},
		Canary: &engine.CanaryParams{Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Operation.ID
	for {
		l, err := s.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "test", TTL: time.Hour})
		if err != nil || l == nil {
			t.Fatalf("claim %s: %v %v", id, l, err)
		}
		if l.Operation.ID != id {
			continue
		}
		c := *l.Operation.Canary
		c.Stage, c.Reason = engine.CanaryHalted, "halted: canary sample 1: 0 ok, 1 failed, 0 running (90% needed)"
		if _, err := s.OperationCanarySet(ctx, &backend.OperationCanarySetParams{ID: id, Holder: l.Holder, Fence: l.Fence,
			Canary: &c, Halt: true, Error: c.Reason}); err != nil {
			t.Fatal(err)
		}
		return id
	}
}

// HaltedOperation hands haltedOperation to the package's external tests
// (the contract test).
var HaltedOperation = haltedOperation

func TestAuthentication(t *testing.T) {
	t.Parallel()
	fx, srv := setup(t, ServerOptions{Tokens: testTokens})
	before := fx.snapshot(t)
	for _, tc := range []struct {
		name, auth string
	}{
		{"no header", ""},
		{"unknown token", "Bearer not-a-known-token-at-all"},
		{"other scheme", "Basic " + tokenOf(engine.RoleAdmin)},
		{"empty bearer", "Bearer "},
	} {
		w := send(t, srv, req{method: "POST", path: "/api/v1/jobs/JOB_1/retry", header: map[string]string{"Authorization": tc.auth}})
		wantStatus(t, w, 401)
		if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: no WWW-Authenticate", tc.name)
		}
		if strings.Contains(w.Body.String(), "not-a-known-token") {
			t.Fatal("the token is echoed")
		}
	}
	if after := fx.snapshot(t); after != before {
		t.Fatalf("an unauthenticated request changed something:\n%s\nafter:\n%s", before, after)
	}
	for _, path := range []string{"/api/v1/jobs", "/api/v1/meta", "/api/v1/events", "/metrics"} {
		if w := send(t, srv, req{method: "GET", path: path}); w.Code != 401 {
			t.Fatalf("GET %s without a token: %d", path, w.Code)
		}
	}
	for _, path := range []string{"/api/v1/healthz", "/api/v1/readyz"} {
		wantStatus(t, send(t, srv, req{method: "GET", path: path}), 200)
	}

	// The token's name is the actor; a named person acting through it is
	// recorded after it.
	w := send(t, srv, req{method: "POST", path: "/api/v1/jobs/JOB_1/retry", token: tokenOf(engine.RoleOperator)})
	wantStatus(t, w, 200)
	if a := fx.actors(t, "JOB_1", engine.EventRetried); !slices.Equal(a, []string{"otto"}) {
		t.Fatalf("JOB_1 retried by %q, want otto", a)
	}
	w = send(t, srv, req{method: "POST", path: "/api/v1/jobs/JOB_2/retry", token: tokenOf(engine.RoleOperator), header: map[string]string{ActorHeader: "maya"}})
	wantStatus(t, w, 200)
	if a := fx.actors(t, "JOB_2", engine.EventRetried); !slices.Equal(a, []string{"otto/maya"}) {
		t.Fatalf("JOB_2 retried by %q, want otto/maya", a)
	}
	w = send(t, srv, req{method: "GET", path: "/api/v1/meta", token: tokenOf(engine.RoleInspector)})
	wantStatus(t, w, 200)
	if m := decode[engine.Meta](t, w); m.Role != engine.RoleInspector || m.Actor != "ines" || m.ReadOnly {
		t.Fatalf("meta %+v", m)
	}

	// Without tokens everyone is the local admin, or the person named.
	srv = NewServer(fx.eng, ServerOptions{ReadOnly: true})
	w = send(t, srv, req{method: "GET", path: "/api/v1/meta", header: map[string]string{ActorHeader: "maya"}})
	if m := decode[engine.Meta](t, w); m.Role != engine.RoleAdmin || m.Actor != "maya" || !m.ReadOnly {
		t.Fatalf("meta without tokens %+v", m)
	}
}

func TestViewerSeesNoPayloadOrMetadata(t *testing.T) {
	t.Parallel()
	_, srv := setup(t, ServerOptions{Tokens: testTokens})
	viewer, inspector := tokenOf(engine.RoleViewer), tokenOf(engine.RoleInspector)

	w := send(t, srv, req{method: "GET", path: "/api/v1/jobs?state=archived", token: viewer})
	wantStatus(t, w, 200)
	if strings.Contains(w.Body.String(), "tenant") || strings.Contains(w.Body.String(), "s3cr3t") {
		t.Fatalf("viewer's list shows metadata or payload: %s", w.Body.String())
	}
	w = send(t, srv, req{method: "GET", path: "/api/v1/jobs/JOB_1", token: viewer})
	wantStatus(t, w, 200)
	if strings.Contains(w.Body.String(), "tenant") {
		t.Fatalf("viewer's detail shows metadata: %s", w.Body.String())
	}
	for _, path := range []string{
		"/api/v1/jobs/JOB_1?include_payload=true",
		"/api/v1/jobs?q=payload.customer:42",
		"/api/v1/jobs?q=meta.tenant:acme",
		"/api/v1/error-groups?q=meta.tenant:acme",
	} {
		w := send(t, srv, req{method: "GET", path: path, token: viewer})
		wantStatus(t, w, 403)
	}

	w = send(t, srv, req{method: "GET", path: "/api/v1/jobs/JOB_1?include_payload=true", token: inspector})
	wantStatus(t, w, 200)
	if !strings.Contains(w.Body.String(), "s3cr3t") || !strings.Contains(w.Body.String(), "tenant") {
		t.Fatalf("inspector's detail lacks payload or metadata: %s", w.Body.String())
	}
	wantStatus(t, send(t, srv, req{method: "GET", path: "/api/v1/jobs?q=payload.customer:42", token: inspector}), 200)

	// An operation's payload and meta conditions are hidden from viewers.
	w = send(t, srv, req{method: "POST", path: "/api/v1/jobs/bulk", token: tokenOf(engine.RoleOperator),
		body: `{"action":"retry","selector":{"q":"queue:billing meta.tenant:acme"}}`})
	wantStatus(t, w, 202)
	id := decode[engine.BulkResult](t, w).Operation.ID
	for _, path := range []string{"/api/v1/operations", "/api/v1/operations/" + id} {
		w = send(t, srv, req{method: "GET", path: path, token: viewer})
		wantStatus(t, w, 200)
		// The condition stays, its value hidden: without it the
		// operation read as a retry of all of billing.
		if strings.Contains(w.Body.String(), "acme") || !strings.Contains(w.Body.String(), "billing") ||
			!strings.Contains(w.Body.String(), `"path":"tenant","value":"\u003chidden\u003e"`) && !strings.Contains(w.Body.String(), `"path":"tenant","value":"<hidden>"`) {
			t.Fatalf("viewer's %s: %s", path, w.Body.String())
		}
		w = send(t, srv, req{method: "GET", path: path, token: inspector})
		if !strings.Contains(w.Body.String(), "acme") {
			t.Fatalf("inspector's %s lacks the meta condition: %s", path, w.Body.String())
		}
	}
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	good := `
# operators of the billing team
ci:viewer:0123456789abcdef
maya:admin:abc:def:0123456789abcdef
`
	toks, err := ParseTokens(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if toks["0123456789abcdef"] != (Identity{Name: "ci", Role: engine.RoleViewer}) || toks["abc:def:0123456789abcdef"].Name != "maya" {
		t.Fatalf("tokens %+v", toks)
	}
	for name, bad := range map[string]string{
		"two fields":     "ci:viewer",
		"unknown role":   "ci:root:0123456789abcdef",
		"short token":    "ci:viewer:short",
		"empty name":     ":viewer:0123456789abcdef",
		"duplicate name": "ci:viewer:0123456789abcdef\nci:admin:fedcba9876543210",
		"same token":     "ci:viewer:0123456789abcdef\ncd:admin:0123456789abcdef",
	} {
		_, err := ParseTokens(strings.NewReader(bad))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("%s: error shows the token: %v", name, err)
		}
	}
}
