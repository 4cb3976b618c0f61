package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
)

// auditRequest is one request of the audit test: a mutating route's
// success, or a refusal.
type auditRequest struct {
	method, path, token, body string
	header                    map[string]string
	want                      int
	// result is the record's result where the route cannot succeed on
	// the fixture (AuditOK when empty).
	result string
}

// send sends req to hs under a fresh idempotency key and checks its
// status.
func (req auditRequest) send(t *testing.T, hs *httptest.Server, key string) {
	t.Helper()
	r, err := http.NewRequest(req.method, hs.URL+req.path, bytes.NewReader([]byte(req.body)))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+req.token)
	r.Header.Set(api.IdempotencyHeader, key)
	r.Header.Set(api.SurfaceHeader, "cli")
	if req.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	resp, err := hs.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	body.ReadFrom(resp.Body) //nolint:errcheck // for the message only
	if resp.StatusCode != req.want {
		t.Fatalf("%s %s: %d %s, want %d", req.method, req.path, resp.StatusCode, body.String(), req.want)
	}
}

// trail reads the whole trail, newest first.
func trail(t *testing.T, e *engine.Engine) []*engine.AuditRecord {
	t.Helper()
	p, err := e.Audit(context.Background(), engine.AuditQuery{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return p.Records
}

// TestAuditEveryMutatingRoute is derived from the router's route list:
// every mutating route, sent once with success, leaves exactly one audit
// record, naming its action, the caller (actor, role, the surface its
// client named, its address) and the result; a route missing from the
// table below fails the test, so a new route cannot go unaudited. A
// refused action leaves its own record, with the reason: a role short of
// the route (403), a job in the wrong state (409), a stale version
// (412), and a read-only server (403). A dry run and a replayed request
// change nothing and record nothing.
func TestAuditEveryMutatingRoute(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t)
	tokens := map[string]api.Identity{
		tokViewer: {Name: "vera", Role: engine.RoleViewer}, tokOperator: {Name: "otto", Role: engine.RoleOperator},
		tokAdmin: {Name: "ada", Role: engine.RoleAdmin},
	}
	srv := api.NewServer(f.eng, api.ServerOptions{Tokens: tokens})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ro := httptest.NewServer(api.NewServer(f.eng, api.ServerOptions{Tokens: tokens, ReadOnly: true}))
	t.Cleanup(ro.Close)

	good := map[string]auditRequest{
		"POST /api/v1/jobs":                       {body: `{"id":"new-1","queue":"email","kind":"send","payload":{"to":"b@example.com"}}`, want: 201},
		"DELETE /api/v1/jobs/{id}":                {path: "/api/v1/jobs/dead-5", want: 200},
		"POST /api/v1/jobs/{id}/retry":            {path: "/api/v1/jobs/dead-1/retry", want: 200},
		"POST /api/v1/jobs/{id}/cancel":           {path: "/api/v1/jobs/avail-2/cancel", want: 200},
		"POST /api/v1/jobs/{id}/release":          {path: "/api/v1/jobs/pill/release", want: 200},
		"POST /api/v1/jobs/{id}/retry-with-input": {path: "/api/v1/jobs/dead-3/retry-with-input", body: `{"payload":{"fixed":true}}`, want: 201},
		"POST /api/v1/jobs/{id}/replay":           {path: "/api/v1/jobs/dead-4/replay", body: `{"step":1,"id":"dead-4-replay"}`, want: 201},
		"PUT /api/v1/jobs/{id}/payload":           {path: "/api/v1/jobs/edit/payload", header: map[string]string{"If-Match": f.etag}, body: `{"to":"c@example.com","cc":"d"}`, want: 200},
		"POST /api/v1/jobs/{id}/signals/{name}":   {path: "/api/v1/jobs/avail-1/signals/approved", body: `{"by":"ops"}`, want: 200},
		"POST /api/v1/jobs/actions":               {body: `{"action":"retry","ids":["dead-2","nope"]}`, want: 200},
		"POST /api/v1/jobs/bulk":                  {body: `{"action":"retry","selector":{"states":["archived"],"queues":["billing"]}}`, want: 202},
		"POST /api/v1/error-groups/{id}/resolve":  {path: "/api/v1/error-groups/" + contractGroup + "/resolve", body: `{"note":"fixed"}`, want: 200},
		"POST /api/v1/error-groups/{id}/ignore":   {path: "/api/v1/error-groups/" + contractGroup + "/ignore", want: 200},
		"POST /api/v1/error-groups/{id}/unignore": {path: "/api/v1/error-groups/" + contractGroup + "/unignore", want: 200},
		"POST /api/v1/operations/{id}/cancel":     {path: "/api/v1/operations/" + f.opID + "/cancel", want: 200},
		// No canary run halts in this fixture: a resume of a run that is
		// not halted is refused, and that refusal is its record.
		"POST /api/v1/operations/{id}/resume":     {path: "/api/v1/operations/" + f.opID + "/resume", want: 409, result: "wrong_state"},
		"DELETE /api/v1/quarantine/{fingerprint}": {path: "/api/v1/quarantine/" + f.fp, want: 200},
		"POST /api/v1/queues/{queue}/pause":       {path: "/api/v1/queues/billing/pause", want: 200},
		"POST /api/v1/queues/{queue}/resume":      {path: "/api/v1/queues/billing/resume", want: 200},
		"PUT /api/v1/limits":                      {body: `{"scope":"kind","name":"charge","concurrency":5}`, want: 200},
		"POST /api/v1/schedules/{name}/pause":     {path: "/api/v1/schedules/nightly/pause", want: 200},
		"POST /api/v1/schedules/{name}/resume":    {path: "/api/v1/schedules/nightly/resume", want: 200},
		"POST /api/v1/schedules/{name}/trigger":   {path: "/api/v1/schedules/reports/trigger", want: 200},
	}
	var mutating []string
	for _, pattern := range srv.Routes() {
		if !strings.HasPrefix(pattern, "GET ") {
			mutating = append(mutating, pattern)
			// Append-only: the trail is read, never written, by a route.
			if strings.Contains(pattern, "/audit") {
				t.Errorf("%s changes the audit trail; records are append-only", pattern)
			}
		}
	}
	if len(mutating) == 0 {
		t.Fatal("the router lists no mutating route")
	}
	for _, pattern := range mutating {
		req, ok := good[pattern]
		if !ok {
			t.Errorf("%s mutates but has no request in this test: add one, so that its audit record is checked", pattern)
			continue
		}
		method, path, _ := strings.Cut(pattern, " ")
		req.method, req.token = method, tokAdmin
		if req.path == "" {
			req.path = path
		}
		before := trail(t, f.eng)
		req.send(t, hs, "good "+pattern)
		after := trail(t, f.eng)
		if len(after) != len(before)+1 {
			t.Errorf("%s left %d records, want 1", pattern, len(after)-len(before))
			continue
		}
		r := after[0]
		result := req.result
		if result == "" {
			result = engine.AuditOK
		}
		if r.Result != result || r.Actor != "ada" || r.Role != engine.RoleAdmin || r.Surface != engine.SurfaceCLI ||
			!strings.HasPrefix(r.Source, "127.0.0.1:") || r.Action == "" || r.At.IsZero() {
			t.Errorf("%s recorded %+v", pattern, r)
		}
		if req.result != "" {
			continue // a refusal is not kept for replay
		}
		// A replay of the same request changes nothing and records nothing.
		req.send(t, hs, "good "+pattern)
		if n := len(trail(t, f.eng)); n != len(after) {
			t.Errorf("%s replayed left %d more records", pattern, n-len(after))
		}
	}
	if got := trail(t, f.eng); len(got) > 0 {
		byAction := map[string]*engine.AuditRecord{}
		for _, r := range got {
			byAction[r.Action] = r
		}
		if r := byAction["patch"]; r == nil || r.JobID != "edit" || !slices.Equal(r.Paths, []string{"cc", "to"}) {
			t.Errorf("the payload edit's record: %+v, want job edit and paths [cc to], no values", r)
		}
		if r := byAction["apply"]; r == nil || r.Count != 2 || r.Applied != engine.ActionRetry || r.Detail != "1 of 2 refused" ||
			!slices.Equal(r.IDs, []string{"dead-2", "nope"}) {
			t.Errorf("the apply's record: %+v", r)
		}
		if r := byAction["bulk"]; r == nil || r.Operation == "" || r.Selector == "" || r.Applied != engine.ActionRetry {
			t.Errorf("the bulk run's record: %+v", r)
		}
	}

	refusals := []struct {
		name   string
		req    auditRequest
		srv    *httptest.Server
		action string
		result string
	}{
		{"a viewer's retry", auditRequest{method: "POST", path: "/api/v1/jobs/dead-6/retry", token: tokViewer, want: 403}, hs, "retry", "forbidden"},
		{"an operator's delete", auditRequest{method: "POST", path: "/api/v1/jobs/actions", token: tokOperator, body: `{"action":"delete","ids":["dead-6"]}`, want: 403}, hs, "apply", "forbidden"},
		{"a retry of a live job", auditRequest{method: "POST", path: "/api/v1/jobs/avail-1/retry", token: tokOperator, want: 409}, hs, "retry", "wrong_state"},
		{"an edit of a stale version", auditRequest{method: "PUT", path: "/api/v1/jobs/edit/payload", token: tokOperator,
			header: map[string]string{"If-Match": f.etag}, body: `{"to":"e@example.com"}`, want: 412}, hs, "patch", "conflict"},
		{"a pause on a read-only server", auditRequest{method: "POST", path: "/api/v1/queues/email/pause", token: tokAdmin, want: 403}, ro, "pause", "read_only"},
	}
	for _, rf := range refusals {
		before := trail(t, f.eng)
		rf.req.send(t, rf.srv, "refused "+rf.name)
		after := trail(t, f.eng)
		if len(after) != len(before)+1 {
			t.Errorf("%s left %d records, want 1", rf.name, len(after)-len(before))
			continue
		}
		if r := after[0]; r.Action != rf.action || r.Result != rf.result || r.Detail == "" {
			t.Errorf("%s recorded %+v, want action %s result %s", rf.name, r, rf.action, rf.result)
		}
	}

	before := trail(t, f.eng)
	auditRequest{method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, want: 200,
		body: `{"action":"retry","selector":{"states":["archived"]},"dry_run":true}`}.send(t, hs, "dry run")
	if n := len(trail(t, f.eng)); n != len(before) {
		t.Errorf("a dry run left %d records", n-len(before))
	}
}

// TestAuditReadAsViewer: a viewer reads who did what and when, never a
// value; an inspector reads the record whole.
func TestAuditReadAsViewer(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t)
	tokens := map[string]api.Identity{tokViewer: {Name: "vera", Role: engine.RoleViewer}, tokInspector: {Name: "ines", Role: engine.RoleInspector},
		tokOperator: {Name: "otto", Role: engine.RoleOperator}}
	hs := httptest.NewServer(api.NewServer(f.eng, api.ServerOptions{Tokens: tokens}))
	t.Cleanup(hs.Close)
	auditRequest{method: "POST", path: "/api/v1/jobs/bulk", token: tokOperator, want: 202,
		body: `{"action":"retry","selector":{"states":["archived"],"payload":[{"path":"customer","value":"c-42"}]}}`}.send(t, hs, "bulk")
	auditRequest{method: "POST", path: "/api/v1/jobs/avail-1/retry", token: tokOperator, want: 409}.send(t, hs, "refused")
	read := func(token string) []*engine.AuditRecord {
		c := api.NewClient(hs.URL, token, api.ClientOptions{})
		p, err := c.Audit(context.Background(), engine.AuditQuery{Actor: "otto"})
		if err != nil {
			t.Fatal(err)
		}
		return p.Records
	}
	whole, seen := read(tokInspector), read(tokViewer)
	if len(whole) != 2 || len(seen) != 2 {
		t.Fatalf("inspector read %d records, viewer %d; want 2", len(whole), len(seen))
	}
	if !strings.Contains(whole[1].Selector, "c-42") || whole[0].Detail == "" || whole[0].Source == "" {
		t.Fatalf("the inspector's records are not whole: %+v %+v", whole[0], whole[1])
	}
	raw, _ := json.Marshal(seen)
	if strings.Contains(string(raw), "c-42") || seen[0].Detail != "" || seen[0].Source != "" ||
		!strings.Contains(seen[1].Selector, engine.HiddenValue) || seen[1].Action != "bulk" || seen[0].Result != "wrong_state" {
		t.Fatalf("the viewer reads values: %s", raw)
	}
}
