package otelsetup

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/otlptest"
	"github.com/sluicehq/sluice/sluiceotel"
)

// TestWanted: which signals the standard variables (and --otel) ask to
// export, and where to; what sluice cannot send is refused by name.
func TestWanted(t *testing.T) {
	for _, c := range []struct {
		name            string
		force           bool
		env             map[string]string
		traces, metrics string // endpoint; "" for off
		err             string
	}{
		{name: "nothing set", env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"},
			traces: "http://c:4318/v1/traces", metrics: "http://c:4318/v1/metrics"},
		{name: "traces only", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces"},
			traces: "http://t:4318/v1/traces"},
		{name: "metrics only", env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:4318/v1/metrics"},
			metrics: "http://m:4318/v1/metrics"},
		{name: "signal endpoint beats the base", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:9/x"},
			traces: "http://c:4318/v1/traces", metrics: "http://m:9/x"},
		{name: "--otel", force: true, traces: "http://localhost:4318/v1/traces", metrics: "http://localhost:4318/v1/metrics"},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"},
			traces: "http://c:4318/v1/traces"},
		{name: "sdk disabled", force: true, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "http/protobuf", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			traces: "http://c:4318/v1/traces", metrics: "http://c:4318/v1/metrics"},
		{name: "grpc refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{name: "signal protocol refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json"},
			err: "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=http/json"},
		{name: "zipkin refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"},
			err: "OTEL_TRACES_EXPORTER=zipkin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			traces, metrics, err := wanted(c.force, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if traces.on != (c.traces != "") || traces.endpoint != c.traces || traces.fallback != (c.force && c.env == nil) {
				t.Errorf("traces %+v, want %q", traces, c.traces)
			}
			if metrics.on != (c.metrics != "") || metrics.endpoint != c.metrics || metrics.fallback != (c.force && c.env == nil) {
				t.Errorf("metrics %+v, want %q", metrics, c.metrics)
			}
		})
	}
}

// TestStartWithoutEnvironment: nothing asked, nothing made; the nil
// Telemetry's methods do nothing.
func TestStartWithoutEnvironment(t *testing.T) {
	tel, err := Start(context.Background(), Config{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil || tel != nil {
		t.Fatalf("Start = %v, %v; want nil, nil", tel, err)
	}
	if tel.Interceptor() != nil {
		t.Error("a nil Telemetry gives an interceptor")
	}
	if err := tel.Register(nil); err != nil {
		t.Error(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestStartExportsToCollector: with OTEL_EXPORTER_OTLP_ENDPOINT naming a
// collector, an engine given the Interceptor sends it the enqueue's
// producer span and the attempt's consumer span (a real SDK and
// exporters, a real SQLite store), under service.name sluice, and the
// metrics with the queue's depth, by the time Shutdown returns.
func TestStartExportsToCollector(t *testing.T) {
	col := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	// Collections every 100 ms, so the gauges go before Unregister.
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
	ctx := context.Background()
	tel, err := Start(ctx, Config{ServiceVersion: "v9.9.9"})
	if err != nil || tel == nil {
		t.Fatalf("Start = %v, %v", tel, err)
	}
	e, err := engine.New(sqlitetest.New(t), engine.Config{
		Queues:       map[string]engine.QueueConfig{"mail": {Concurrency: 1}},
		PollInterval: 10 * time.Millisecond, Interceptor: tel.Interceptor(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "send", Handler: func(context.Context, *engine.Job) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	if err := tel.Register(e); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "send-1", Queue: "mail", Kind: "send"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := e.Counts(ctx, "mail")
		if err == nil && c.Total[engine.StateCompleted] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("send-1 did not complete: %+v %v", c, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for !slices.Contains(col.Metrics(), sluiceotel.MetricQueueDepth) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s among the metrics %v", sluiceotel.MetricQueueDepth, col.Metrics())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tel.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	kinds := map[string]otlptest.Span{}
	for _, s := range col.Spans() {
		if s.Attrs["messaging.message.id"] == "send-1" {
			kinds[s.Kind] = s
		}
	}
	for kind, name := range map[string]string{"SPAN_KIND_PRODUCER": "send mail", "SPAN_KIND_CONSUMER": "process mail"} {
		s, ok := kinds[kind]
		if !ok {
			t.Fatalf("no %s span for send-1 among %+v", kind, col.Spans())
		}
		if s.Name != name || s.Attrs[string(sluiceotel.AttrKind)] != "send" || s.Resource["service.name"] != DefaultServiceName || s.Resource["service.version"] != "v9.9.9" {
			t.Errorf("%s span: %+v", kind, s)
		}
	}
	if c := kinds["SPAN_KIND_CONSUMER"]; c.Attrs[string(sluiceotel.AttrOutcome)] != "success" || c.Links != 1 {
		t.Errorf("consumer span: %+v", c)
	}
	for _, m := range []string{sluiceotel.MetricCompleted, sluiceotel.MetricQueueDepth} {
		if !slices.Contains(col.Metrics(), m) {
			t.Errorf("no %s among the metrics %v", m, col.Metrics())
		}
	}
}
