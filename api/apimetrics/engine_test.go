package apimetrics_test

import (
	"context"
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

// TestEngineMetricsOnEngine runs jobs that succeed, fail and crash through
// an engine on a real SQLite file with the Prometheus observer, and reads
// the transitions and handler histograms back from GET /metrics.
func TestEngineMetricsOnEngine(t *testing.T) {
	store := sqlitetest.New(t)
	obs := apimetrics.NewEngineMetrics()
	e, err := engine.New(store, engine.Config{
		Queues:              map[string]engine.QueueConfig{"billing": {Concurrency: 4}},
		PollInterval:        20 * time.Millisecond,
		MaintenanceInterval: 25 * time.Millisecond,
		HeartbeatInterval:   100 * time.Millisecond,
		ShutdownTimeout:     3 * time.Second,
		// A crashed job waits an hour, so it runs once in this test.
		CrashBackoff: func(int) time.Duration { return time.Hour },
		Observer:     obs,
	})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]engine.Handler{
		"ok":   func(context.Context, *engine.Job) error { return nil },
		"fail": func(context.Context, *engine.Job) error { return errors.New("card declined") },
		"boom": func(context.Context, *engine.Job) error { panic("out of memory") },
	}
	for name, h := range kinds {
		if err := e.Register(engine.Kind{Name: name, Handler: h}); err != nil {
			t.Fatal(err)
		}
	}
	var ps []engine.EnqueueParams
	add := func(kind string, n int) {
		for i := range n {
			ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("%s-%d", kind, i), Queue: "billing", Kind: kind, MaxAttempts: 1})
		}
	}
	add("ok", 5)
	add("fail", 3)
	add("boom", 1)
	if _, err := e.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	m := apimetrics.New(e, nil)
	m.Registry().MustRegister(obs)
	srv := api.NewServer(e, api.ServerOptions{Metrics: m})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	want := []string{
		`sluice_job_transitions_total{from="available",kind="ok",queue="billing",to="running"} 5`,
		`sluice_job_transitions_total{from="running",kind="ok",queue="billing",to="completed"} 5`,
		`sluice_job_transitions_total{from="available",kind="fail",queue="billing",to="running"} 3`,
		`sluice_job_transitions_total{from="running",kind="fail",queue="billing",to="archived"} 3`,
		`sluice_job_transitions_total{from="running",kind="boom",queue="billing",to="retryable"} 1`,
		`sluice_handler_duration_seconds_count{kind="ok",outcome="success",queue="billing"} 5`,
		`sluice_handler_duration_seconds_count{kind="fail",outcome="error",queue="billing"} 3`,
		`sluice_handler_duration_seconds_count{kind="boom",outcome="crash",queue="billing"} 1`,
		`sluice_handler_duration_seconds_bucket{kind="ok",outcome="success",queue="billing",le="+Inf"} 5`,
		// The scrape-time series are still there.
		`sluice_jobs{queue="billing",state="archived"} 3`,
	}
	var body string
	deadline := time.Now().Add(60 * time.Second)
	for {
		body = scrape(t, hs.URL+"/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed %s:\n%s", missing, metricLines(body, "sluice_"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// metricLines keeps the lines of a scrape that start with prefix.
func metricLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestEngineMetricsAllocations: once a series exists, counting a
// transition or timing a handler allocates nothing.
func TestEngineMetricsAllocations(t *testing.T) {
	m := apimetrics.NewEngineMetrics()
	m.JobTransition("billing", "charge", engine.StateRunning, engine.StateCompleted)
	m.HandlerDone("billing", "charge", "success", time.Millisecond)
	if n := testing.AllocsPerRun(100, func() {
		m.JobTransition("billing", "charge", engine.StateRunning, engine.StateCompleted)
		m.HandlerDone("billing", "charge", "success", time.Millisecond)
	}); n != 0 {
		t.Fatalf("%v allocations per job, want 0", n)
	}
}

// TestErrorGroupMetricsByStatus: the dead jobs of the error groups are
// counted by triage status, every status with its series, so that an
// alert can page on open and reopened groups alone; an ignored group's
// jobs are still counted, under ignored.
func TestErrorGroupMetricsByStatus(t *testing.T) {
	store := sqlitetest.New(t)
	e, err := engine.New(store, engine.Config{
		Queues:       map[string]engine.QueueConfig{"billing": {Concurrency: 4}, "email": {Concurrency: 4}},
		PollInterval: 20 * time.Millisecond, NoMaintenance: true,
		// email's dead jobs go within the hour, inside a warning of two;
		// billing's keep the default fortnight.
		QueueRetention: map[string]map[engine.State]time.Duration{"email": {engine.StateArchived: time.Hour}},
		ExpiryWarning:  2 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, msg := range map[string]string{"charge": "card declined", "send": "template not found", "sync": "partner down"} {
		if err := e.Register(engine.Kind{Name: name, MaxAttempts: 1,
			Handler: func(context.Context, *engine.Job) error { return errors.New(msg) }}); err != nil {
			t.Fatal(err)
		}
	}
	var ps []engine.EnqueueParams
	for i, k := range []string{"charge", "charge", "charge", "send", "send", "sync"} {
		q := "billing"
		if k == "send" {
			q = "email"
		}
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("%s-%d", k, i), Queue: q, Kind: k})
	}
	if _, err := e.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	ctx := context.Background()
	var groups []engine.ErrorGroup
	deadline := time.Now().Add(60 * time.Second)
	for n := int64(0); n != 6; {
		if groups, err = e.ErrorGroups(ctx, engine.Filter{}); err != nil {
			t.Fatal(err)
		}
		n = 0
		for _, g := range groups {
			n += g.Count
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 6 jobs died", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, g := range groups {
		switch g.Kind {
		case "charge":
			_, err = e.ResolveErrorGroup(ctx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "fixed"})
		case "send":
			_, err = e.IgnoreErrorGroup(ctx, engine.ErrorGroupIgnoreParams{ID: g.ID})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{Metrics: apimetrics.New(e, nil)}))
	t.Cleanup(hs.Close)
	body := scrape(t, hs.URL+"/metrics")
	for _, w := range []string{
		`sluice_error_group_dead_jobs{status="open"} 1`,
		`sluice_error_group_dead_jobs{status="reopened"} 0`,
		`sluice_error_group_dead_jobs{status="resolved"} 3`,
		`sluice_error_group_dead_jobs{status="ignored"} 2`,
		`sluice_error_groups{status="open"} 1`,
		`sluice_error_groups{status="reopened"} 0`,
		`sluice_error_groups{status="resolved"} 1`,
		`sluice_error_groups{status="ignored"} 1`,
		`sluice_jobs_expiring{state="archived"} 2`,
		`sluice_jobs_expiring{state="quarantined"} 0`,
		`sluice_jobs_expiring{state="undecodable"} 0`,
	} {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("metrics lack %s:\n%s", w, metricLines(body, "sluice_"))
		}
	}
}
