package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/api/apimetrics"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestSeedRequestsOnEngine sends the API's first documented requests (the
// curl command lines in the comments below), as curl sends them, to a server over a real engine on SQLite whose billing jobs
// have died.
func TestSeedRequestsOnEngine(t *testing.T) {
	e := workingEngine(t, "billing", "charge", func(context.Context, *engine.Job) error {
		return errors.New("card declined")
	})
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{Metrics: apimetrics.New(e, nil)}))
	t.Cleanup(hs.Close)
	base := hs.URL + "/api/v1"

	const n = 30
	var ps []engine.EnqueueParams
	for i := range n {
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("JOB_%02d", i), Queue: "billing", Kind: "charge", MaxAttempts: 1, Args: map[string]int{"customer": i}})
	}
	if _, err := e.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		status int
		header http.Header
		body   string
	}
	do := func(method, url, key, body string) answer {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		r, err := http.NewRequest(method, url, rd)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		resp, err := hs.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b)}
	}
	must := func(a answer, status int) answer {
		t.Helper()
		if a.status != status {
			t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
		}
		return a
	}
	unmarshal := func(a answer, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(a.body), v); err != nil {
			t.Fatalf("%s: %v", a.body, err)
		}
	}

	// curl 'http://127.0.0.1:8080/api/v1/jobs?state=archived&limit=50'
	var page engine.JobPage
	deadline := time.Now().Add(30 * time.Second)
	for len(page.Jobs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs archived", len(page.Jobs), n)
		}
		time.Sleep(20 * time.Millisecond)
		unmarshal(must(do("GET", base+"/jobs?state=archived&limit=50", "", ""), 200), &page)
	}
	// Retried jobs stay put from here on.
	must(do("POST", base+"/queues/billing/pause", "pause-billing", ""), 200)
	for _, j := range page.Jobs {
		if j.Payload != nil || j.State != engine.StateArchived {
			t.Fatalf("list row %s: %s payload %s", j.ID, j.State, j.Payload)
		}
	}

	// curl 'http://127.0.0.1:8080/api/v1/jobs/JOB_ID?include_payload=true'
	a := must(do("GET", base+"/jobs/JOB_00?include_payload=true", "", ""), 200)
	var d engine.JobDetail
	unmarshal(a, &d)
	if string(d.Job.Payload) != `{"customer":0}` || len(d.Job.Errors) != 1 || d.Job.Errors[0].Message != "card declined" {
		t.Fatalf("detail: payload %s errors %+v", d.Job.Payload, d.Job.Errors)
	}
	if a.header.Get("ETag") != fmt.Sprintf(`"%d"`, d.Job.Version) {
		t.Fatalf("ETag %q for version %d", a.header.Get("ETag"), d.Job.Version)
	}

	// Bad input is repaired with the version seen; a stale one gets 412.
	etag := a.header.Get("ETag")
	put := func(key, body, ifMatch string) answer {
		r, _ := http.NewRequest("PUT", base+"/jobs/JOB_00/payload", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		r.Header.Set("If-Match", ifMatch)
		resp, err := hs.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b)}
	}
	must(put("edit-1", `{"customer":100}`, etag), 200)
	must(put("edit-2", `{"customer":101}`, etag), 412)

	// curl --request POST --header 'Idempotency-Key: redrive-JOB_ID-1' .../jobs/JOB_ID/retry
	first := must(do("POST", base+"/jobs/JOB_00/retry", "redrive-JOB_00-1", ""), 200)
	if !strings.Contains(first.body, `"state":"available"`) {
		t.Fatalf("retry: %s", first.body)
	}
	again := must(do("POST", base+"/jobs/JOB_00/retry", "redrive-JOB_00-1", ""), 200)
	if again.header.Get("Idempotent-Replayed") != "true" || again.body != first.body {
		t.Fatalf("repeat: %q %s", again.header.Get("Idempotent-Replayed"), again.body)
	}
	must(do("POST", base+"/jobs/JOB_00/retry", "redrive-JOB_00-2", ""), 409)

	// POST /api/v1/jobs/actions {"action":"retry","ids":["JOB_1","JOB_2"]}
	var ar struct {
		Results []engine.ActionResult `json:"results"`
	}
	unmarshal(must(do("POST", base+"/jobs/actions", "billing-redrive-2026-08-31", `{"action":"retry","ids":["JOB_01","JOB_02","NOPE"]}`), 200), &ar)
	if len(ar.Results) != 3 || !ar.Results[0].OK || !ar.Results[1].OK || ar.Results[2].Reason != "not_found" {
		t.Fatalf("actions: %+v", ar.Results)
	}

	// The bulk dry run, then the real run with a new key.
	bulk := func(key string, dry bool) answer {
		return do("POST", base+"/jobs/bulk", key, fmt.Sprintf(`{
    "action":"retry",
    "selector":{"state":"archived","queue":"billing"},
    "dry_run":%v
  }`, dry))
	}
	var preview engine.BulkResult
	unmarshal(must(bulk("billing-redrive-preview-1", true), 200), &preview)
	if preview.Matched != n-3 || preview.Operation != nil || len(preview.Sample) == 0 {
		t.Fatalf("dry run: matched %d sample %d op %v", preview.Matched, len(preview.Sample), preview.Operation)
	}
	var started engine.BulkResult
	a = must(bulk("billing-redrive-1", false), 202)
	unmarshal(a, &started)
	if started.Operation == nil || a.header.Get("Location") != "/api/v1/operations/"+started.Operation.ID {
		t.Fatalf("real run: %s (Location %q)", a.body, a.header.Get("Location"))
	}

	// GET /api/v1/operations/{id} until completed.
	var op engine.Operation
	for op.Status != engine.OperationCompleted {
		if time.Now().After(deadline) {
			t.Fatalf("operation: %+v", op)
		}
		time.Sleep(20 * time.Millisecond)
		unmarshal(must(do("GET", base+"/operations/"+started.Operation.ID, "", ""), 200), &op)
	}
	if op.Succeeded != n-3 || op.Failed != 0 || op.CreatedBy != "local" {
		t.Fatalf("operation: %+v", op)
	}
	unmarshal(must(do("GET", base+"/jobs?state=archived&queue=billing", "", ""), 200), &page)
	if len(page.Jobs) != 0 {
		t.Fatalf("%d billing jobs still archived", len(page.Jobs))
	}
	var counts engine.Counts
	unmarshal(must(do("GET", base+"/jobs/counts?queue=billing", "", ""), 200), &counts)
	must(do("GET", base+"/readyz", "", ""), 200)
	if m := must(do("GET", hs.URL+"/metrics", "", ""), 200); !strings.Contains(m.body, `sluice_http_requests_total{code="202",route="POST /api/v1/jobs/bulk"} 1`) {
		t.Fatalf("metrics lack the bulk request:\n%s", m.body)
	}
}

// workingEngine is a started engine over a new SQLite file whose workers
// run kind on queue with h, stopped when the test ends.
func workingEngine(t *testing.T, queue, kind string, h engine.Handler) *engine.Engine {
	t.Helper()
	e, err := engine.New(sqlitetest.New(t), engine.Config{
		Queues:              map[string]engine.QueueConfig{queue: {Concurrency: 4}},
		PollInterval:        20 * time.Millisecond,
		MaintenanceInterval: 25 * time.Millisecond,
		HeartbeatInterval:   100 * time.Millisecond,
		ShutdownTimeout:     3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: kind, Handler: h}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	return e
}
