package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestFaultServeSeedRequests runs the real `sluice serve` over a store
// whose billing jobs died and sends it the API's first documented requests
// (the curl command lines in the comments below) as curl sends them (no body and no Content-Type on the retry; the
// Idempotency-Key headers as written); then stops it with SIGTERM while an
// event stream is open. It builds the binary, so it runs in the fault
// stage (SLUICE_FAULT_TESTS=1), not under -race.
func TestFaultServeSeedRequests(t *testing.T) {
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("builds the sluice binary: set SLUICE_FAULT_TESTS=1 to run (scripts/test does)")
	}
	bin := sluiceBinary(t)
	dbPath := sqlitetest.Path(t)
	const n = 25
	killBillingJobs(t, dbPath, n)

	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--store", "sqlite://"+dbPath, "--listen", "127.0.0.1:0", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "SLUICE_TOKENS=")
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("---- serve log ----\n%s", tail(string(b), 80))
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed no address: %v", err)
	}
	m := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)/api/v1`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve said %q", line)
	}
	base := m[1]

	type answer struct {
		status int
		header http.Header
		body   []byte
	}
	// curl is the request curl sends for such a command line: its
	// User-Agent and Accept, a Content-Type only where the line gives one.
	curl := func(method, url string, headers map[string]string, data string) answer {
		t.Helper()
		var body io.Reader
		if data != "" {
			body = strings.NewReader(data)
		}
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("User-Agent", "curl/8.5.0")
		req.Header.Set("Accept", "*/*")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, b}
	}
	decode := func(a answer, status int, v any) {
		t.Helper()
		if a.status != status {
			t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
		}
		if v != nil {
			if err := json.Unmarshal(a.body, v); err != nil {
				t.Fatalf("%s: %v", a.body, err)
			}
		}
	}

	// curl 'http://127.0.0.1:8080/api/v1/jobs?state=archived&limit=50'
	var page engine.JobPage
	decode(curl("GET", base+"/api/v1/jobs?state=archived&limit=50", nil, ""), 200, &page)
	if len(page.Jobs) != n {
		t.Fatalf("%d archived jobs listed, want %d", len(page.Jobs), n)
	}
	for _, j := range page.Jobs {
		if j.Payload != nil {
			t.Fatalf("list row %s carries its payload", j.ID)
		}
	}
	jobID := page.Jobs[0].ID

	// curl 'http://127.0.0.1:8080/api/v1/jobs/JOB_ID?include_payload=true'
	var d engine.JobDetail
	decode(curl("GET", base+"/api/v1/jobs/"+jobID+"?include_payload=true", nil, ""), 200, &d)
	if len(d.Job.Payload) == 0 || len(d.Job.Errors) == 0 {
		t.Fatalf("detail of %s: payload %s errors %v", jobID, d.Job.Payload, d.Job.Errors)
	}

	// curl --request POST --header 'Idempotency-Key: redrive-JOB_ID-1' '.../jobs/JOB_ID/retry'
	retry := func() answer {
		return curl("POST", base+"/api/v1/jobs/"+jobID+"/retry", map[string]string{"Idempotency-Key": "redrive-" + jobID + "-1"}, "")
	}
	var jr struct{ Job engine.Job }
	decode(retry(), 200, &jr)
	if jr.Job.State != engine.StateAvailable {
		t.Fatalf("retried job is %s", jr.Job.State)
	}
	if again := retry(); again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat of the retry: %d %q", again.status, again.header.Get("Idempotent-Replayed"))
	}

	// curl --request POST --header 'Content-Type: application/json'
	//   --header 'Idempotency-Key: billing-redrive-2026-08-31'
	//   --data '{"action":"retry","ids":["JOB_1","JOB_2"]}' '.../jobs/actions'
	ids := []string{page.Jobs[1].ID, page.Jobs[2].ID}
	var ar struct{ Results []engine.ActionResult }
	decode(curl("POST", base+"/api/v1/jobs/actions", map[string]string{
		"Content-Type": "application/json", "Idempotency-Key": "billing-redrive-2026-08-31",
	}, fmt.Sprintf(`{"action":"retry","ids":[%q,%q]}`, ids[0], ids[1])), 200, &ar)
	if len(ar.Results) != 2 || !ar.Results[0].OK || !ar.Results[1].OK {
		t.Fatalf("actions: %+v", ar.Results)
	}

	// The bulk dry run, then the same selector with a new key.
	bulk := func(key string, dry bool) answer {
		return curl("POST", base+"/api/v1/jobs/bulk", map[string]string{
			"Content-Type": "application/json", "Idempotency-Key": key,
		}, fmt.Sprintf(`{
    "action":"retry",
    "selector":{"state":"archived","queue":"billing"},
    "dry_run":%v
  }`, dry))
	}
	var preview engine.BulkResult
	decode(bulk("billing-redrive-preview-1", true), 200, &preview)
	if preview.Matched != n-3 {
		t.Fatalf("dry run matched %d, want %d", preview.Matched, n-3)
	}
	var started engine.BulkResult
	decode(bulk("billing-redrive-1", false), 202, &started)
	if started.Operation == nil {
		t.Fatal("no operation")
	}

	// GET /api/v1/operations/{id} until completed: the server's own
	// maintenance runs it.
	var op engine.Operation
	deadline := time.Now().Add(60 * time.Second)
	for op.Status != engine.OperationCompleted {
		if time.Now().After(deadline) {
			t.Fatalf("operation did not complete: %+v", op)
		}
		time.Sleep(50 * time.Millisecond)
		decode(curl("GET", base+"/api/v1/operations/"+started.Operation.ID, nil, ""), 200, &op)
	}
	if op.Succeeded != n-3 || op.Failed != 0 {
		t.Fatalf("operation: %+v", op)
	}
	decode(curl("GET", base+"/api/v1/jobs?state=archived&limit=50", nil, ""), 200, &page)
	if len(page.Jobs) != 0 {
		t.Fatalf("%d jobs still archived", len(page.Jobs))
	}

	// curl 'http://127.0.0.1:8080/metrics': the server's traffic and the
	// store's jobs, through apimetrics.
	metrics := curl("GET", base+"/metrics", nil, "")
	if metrics.status != 200 {
		t.Fatalf("GET /metrics: %d %s", metrics.status, metrics.body)
	}
	for _, want := range []string{
		`sluice_http_requests_total{code="202",route="POST /api/v1/jobs/bulk"} 1`,
		`sluice_store_up 1`,
		`sluice_jobs{queue="billing",state="available"}`,
	} {
		if !strings.Contains(string(metrics.body), want) {
			t.Errorf("GET /metrics has no %s", want)
		}
	}

	// A graceful stop, even with an event stream open.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of SIGTERM")
	}
}

// killBillingJobs fills the store with n billing jobs that died after
// one failed attempt.
func killBillingJobs(t *testing.T, dbPath string, n int) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{
		Queues:       map[string]engine.QueueConfig{"billing": {Concurrency: 4}},
		PollInterval: 10 * time.Millisecond, NoMaintenance: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "charge", Handler: func(context.Context, *engine.Job) error {
		return errors.New("card declined")
	}}); err != nil {
		t.Fatal(err)
	}
	var ps []engine.EnqueueParams
	for i := range n {
		ps = append(ps, engine.EnqueueParams{Queue: "billing", Kind: "charge", MaxAttempts: 1, Args: map[string]int{"customer": i}})
	}
	if _, err := e.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "billing jobs die", 30*time.Second, func() bool {
		c, err := e.Counts(context.Background(), "billing")
		return err == nil && c.Total[engine.StateArchived] == int64(n)
	})
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
