package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/otlptest"
	"github.com/sluicehq/sluice/sluiceotel"
)

// The OpenTelemetry export of `sluice worker` and `sluice serve`: the
// real binary, its environment as a user sets it, and a collector that
// decodes what the real OTLP/HTTP exporters send. They build the binary,
// so they run in the fault stage (SLUICE_FAULT_TESTS=1).

// otelEnv is the test's environment without OTEL_ variables (so the
// machine's do not leak in), SLUICE_TOKENS emptied, plus extra.
func otelEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "SLUICE_TOKENS=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "SLUICE_TOKENS="), extra...)
}

// demoJobs seeds a store with demo jobs that succeed (an invoice, a
// receipt, an order's three-step workflow) and a receipt that dies at
// its first attempt (an unknown template), and a limit on receipts so
// that the limits' gauges have one to report. It returns the ids that
// succeed.
func demoJobs(t *testing.T, dbPath string) (ok []string, dies string) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.EnqueueMany(ctx, []engine.EnqueueParams{
		{ID: "INV-1", Queue: demo.QueueBilling, Kind: demo.KindInvoiceGenerate, Args: demo.Invoice{Invoice: "INV-1", Customer: 7, AmountCents: 900, Currency: "EUR"}},
		{ID: "RCP-1", Queue: demo.QueueEmail, Kind: demo.KindReceiptSend, Args: demo.Receipt{Invoice: "INV-1", To: "a@example.com", Template: "receipt-v2"}},
		{ID: "ORD-1", Queue: demo.QueueBilling, Kind: demo.KindOrderFulfil, Args: demo.Order{Order: "ORD-1", Customer: 7, AmountCents: 900}},
		{ID: "RCP-BAD", Queue: demo.QueueEmail, Kind: demo.KindReceiptSend, MaxAttempts: 1, Args: demo.Receipt{Invoice: "INV-1", To: "a@example.com", Template: "nope"}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetLimit(ctx, engine.Limit{Scope: engine.LimitKind, Name: demo.KindReceiptSend, Concurrency: 5}); err != nil {
		t.Fatal(err)
	}
	return []string{"INV-1", "RCP-1", "ORD-1"}, "RCP-BAD"
}

// waitDone waits until the demo jobs have finished: three completed, one
// archived. It fails at once if w, which works them, exits.
func waitDone(t *testing.T, dbPath string, w *child) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the demo jobs finish", 60*time.Second, func() bool {
		if w.exited() {
			t.Fatalf("%s exited: %v", w.name, w.err)
		}
		var done, dead int64
		for _, q := range []string{demo.QueueBilling, demo.QueueEmail} {
			c, err := e.Counts(context.Background(), q)
			if err != nil {
				return false
			}
			done += c.Total[engine.StateCompleted]
			dead += c.Total[engine.StateArchived]
		}
		return done == 3 && dead == 1
	})
}

// spanOf is the span named name for job id, and whether there is one.
func spanOf(spans []otlptest.Span, name, id string) (otlptest.Span, bool) {
	i := slices.IndexFunc(spans, func(s otlptest.Span) bool {
		return s.Name == name && s.Attrs["messaging.message.id"] == id
	})
	if i < 0 {
		return otlptest.Span{}, false
	}
	return spans[i], true
}

// TestFaultWorkerExportsOTLP: `sluice worker --demo` with
// OTEL_EXPORTER_OTLP_ENDPOINT set sends a consumer span for each attempt
// of the demo's jobs with the job's attributes (a death marked and in
// error), a span for each step of a workflow, and the metrics (attempts,
// queue depth, limits) to the collector, under service.name sluice; the
// spans of jobs still buffered at SIGTERM go before the process exits.
func TestFaultWorkerExportsOTLP(t *testing.T) {
	skipUnlessFault(t)
	bin := sluiceBinary(t)
	dbPath := sqlitetest.Path(t)
	ok, dies := demoJobs(t, dbPath)
	col := otlptest.New(t)
	// Spans wait in the batch until the exit, which must send them; the
	// gauges are collected every 200 ms.
	w := startChildEnv(t, bin, "worker", otelEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+col.URL,
		"OTEL_BSP_SCHEDULE_DELAY=600000", "OTEL_METRIC_EXPORT_INTERVAL=200"),
		"worker", "--demo", "--store", "sqlite://"+dbPath, "--poll", "50ms", "--log-level", "debug")
	waitDone(t, dbPath, w)
	waitFor(t, "the queue depth and limit gauges", 60*time.Second, func() bool {
		m := col.Metrics()
		return slices.Contains(m, sluiceotel.MetricQueueDepth) && slices.Contains(m, sluiceotel.MetricLimitRunning)
	})
	w.stop(t)

	spans := col.Spans()
	queue := map[string]string{"INV-1": demo.QueueBilling, "RCP-1": demo.QueueEmail, "ORD-1": demo.QueueBilling, "RCP-BAD": demo.QueueEmail}
	kind := map[string]string{"INV-1": demo.KindInvoiceGenerate, "RCP-1": demo.KindReceiptSend, "ORD-1": demo.KindOrderFulfil, "RCP-BAD": demo.KindReceiptSend}
	for _, id := range append(slices.Clone(ok), dies) {
		s, found := spanOf(spans, "process "+queue[id], id)
		if !found {
			t.Errorf("no consumer span for %s among %d spans", id, len(spans))
			continue
		}
		want := map[string]string{
			"messaging.system": "sluice", "messaging.destination.name": queue[id],
			string(sluiceotel.AttrKind): kind[id], string(sluiceotel.AttrAttempt): "1",
			string(sluiceotel.AttrOutcome): "success",
		}
		status := "STATUS_CODE_UNSET"
		if id == dies {
			want[string(sluiceotel.AttrOutcome)] = "error"
			want[string(sluiceotel.AttrDead)] = "true"
			status = "STATUS_CODE_ERROR"
		}
		for k, v := range want {
			if s.Attrs[k] != v {
				t.Errorf("%s's span: %s=%q, want %q (%+v)", id, k, s.Attrs[k], v, s)
			}
		}
		if s.Kind != "SPAN_KIND_CONSUMER" || s.Status != status || s.Resource["service.name"] != "sluice" {
			t.Errorf("%s's span: kind %s, status %s, service %q; want consumer, %s, sluice", id, s.Kind, s.Status, s.Resource["service.name"], status)
		}
	}
	for _, step := range []string{"reserve", "charge", "confirm"} {
		if _, found := spanOf(spans, "step "+step, "ORD-1"); !found {
			t.Errorf("no span for ORD-1's step %s", step)
		}
	}
	for _, m := range []string{sluiceotel.MetricCompleted, sluiceotel.MetricFailed, sluiceotel.MetricAttemptDuration} {
		if !slices.Contains(col.Metrics(), m) {
			t.Errorf("no %s among the metrics %v", m, col.Metrics())
		}
	}
	b, _ := os.ReadFile(w.logPath)
	if !strings.Contains(string(b), "opentelemetry: exporting over OTLP/HTTP") {
		t.Errorf("the worker's log does not say where telemetry goes:\n%s", tail(string(b), 20))
	}
}

// TestFaultServeExportsOperatorActions: `sluice serve` with
// OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME set sends a span for
// an operator's retry through the HTTP API, with the actor the request
// named and the job, under that service name, when it stops.
func TestFaultServeExportsOperatorActions(t *testing.T) {
	skipUnlessFault(t)
	bin := sluiceBinary(t)
	dbPath := sqlitetest.Path(t)
	killBillingJobs(t, dbPath, 2)
	col := otlptest.New(t)
	s := startChildEnv(t, bin, "serve", otelEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+col.URL,
		"OTEL_SERVICE_NAME=billing-ops", "OTEL_BSP_SCHEDULE_DELAY=600000"),
		"serve", "--store", "sqlite://"+dbPath, "--listen", "127.0.0.1:0")
	var base string
	waitFor(t, "serve's address", 60*time.Second, func() bool {
		b, _ := os.ReadFile(s.logPath)
		m := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)/api/v1`).FindStringSubmatch(string(b))
		if m != nil {
			base = m[1]
		}
		return m != nil
	})

	var id string
	{
		st, err := sqlite.Open(context.Background(), dbPath, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(st, engine.Config{NoMaintenance: true})
		if err != nil {
			t.Fatal(err)
		}
		page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Limit: 1})
		st.Close()
		if err != nil || len(page.Jobs) != 1 {
			t.Fatalf("list: %v %v", page, err)
		}
		id = page.Jobs[0].ID
	}
	req, err := http.NewRequest("POST", base+"/api/v1/jobs/"+id+"/retry", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Sluice-Actor", "maya")
	req.Header.Set("Idempotency-Key", "otel-retry-"+id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("retry %s: %s %s", id, resp.Status, body)
	}
	s.stop(t)

	spans := col.Spans()
	sp, found := spanOf(spans, "sluice.retry", id)
	if !found {
		var names []string
		for _, s := range spans {
			names = append(names, fmt.Sprintf("%s(%s)", s.Name, s.Attrs["messaging.message.id"]))
		}
		t.Fatalf("no sluice.retry span for %s among %v", id, names)
	}
	if sp.Attrs[string(sluiceotel.AttrActor)] != "maya" || sp.Attrs[string(sluiceotel.AttrAction)] != "retry" || sp.Resource["service.name"] != "billing-ops" {
		t.Errorf("the retry's span: %+v", sp)
	}
}

// TestFaultWorkerExportsOnlyWhenAsked: a collector listens where the
// exporters go by default (127.0.0.1:4318). Without an endpoint variable
// and without --otel, though other OTEL_ variables are set, the worker
// sends it nothing and says nothing of OpenTelemetry; with --otel alone
// it sends its spans there.
func TestFaultWorkerExportsOnlyWhenAsked(t *testing.T) {
	skipUnlessFault(t)
	bin := sluiceBinary(t)
	col, err := otlptest.Listen(t, "127.0.0.1:4318")
	if err != nil {
		t.Skipf("the default OTLP port is taken: %v", err)
	}
	for _, c := range []struct {
		name   string
		flags  []string
		export bool
	}{
		{"no endpoint, no --otel", nil, false},
		{"--otel", []string{"--otel"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbPath := sqlitetest.Path(t)
			demoJobs(t, dbPath)
			before := col.Requests()
			w := startChildEnv(t, bin, "worker", otelEnv("OTEL_SERVICE_NAME=quiet", "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_METRIC_EXPORT_INTERVAL=100"),
				append([]string{"worker", "--demo", "--store", "sqlite://" + dbPath, "--poll", "50ms"}, c.flags...)...)
			waitDone(t, dbPath, w)
			w.stop(t)
			b, _ := os.ReadFile(w.logPath)
			said := strings.Contains(strings.ToLower(string(b)), "opentelemetry")
			sent := col.Requests() - before
			if !c.export {
				if sent != 0 || said {
					t.Fatalf("the worker sent %d requests to the default endpoint (its log speaks of OpenTelemetry: %v):\n%s", sent, said, tail(string(b), 20))
				}
				return
			}
			if sent == 0 || !said {
				t.Fatalf("with --otel the worker sent %d requests to the default endpoint:\n%s", sent, tail(string(b), 20))
			}
			if sp, found := spanOf(col.Spans(), "process email", "RCP-1"); !found || sp.Resource["service.name"] != "quiet" {
				t.Errorf("no consumer span of RCP-1 from service quiet at the default endpoint: %+v", sp)
			}
		})
	}
}
