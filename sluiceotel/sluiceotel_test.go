package sluiceotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluiceotel"
)

// rig is an engine on a real SQLite store, traced by a real SDK into an
// in-memory exporter and measured through a manual reader.
type rig struct {
	e      *engine.Engine
	ic     *sluiceotel.Interceptor
	tp     *sdktrace.TracerProvider
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
}

func newRig(t *testing.T, kinds ...engine.Kind) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	// A syncer exports each span as it ends, so a test waits on what
	// the exporter holds.
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	var err error
	if r.ic, err = sluiceotel.New(sluiceotel.Config{TracerProvider: r.tp, MeterProvider: mp}); err != nil {
		t.Fatal(err)
	}
	r.e, err = engine.New(sqlitetest.New(t), engine.Config{
		Queues:        map[string]engine.QueueConfig{"q": {Concurrency: 1}},
		PollInterval:  10 * time.Millisecond,
		NoMaintenance: true,
		Interceptor:   r.ic,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		if err := r.e.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.e.Stop(ctx)
		_ = mp.Shutdown(ctx)
		_ = r.tp.Shutdown(ctx)
	})
	return r
}

// waitSpans waits until n spans named name have ended and returns them
// in the order they ended.
func (r *rig) waitSpans(t *testing.T, name string, n int) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := r.named(name)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans %q ended, want %d; all: %v", len(got), name, n, names(r.spans.GetSpans()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *rig) named(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range r.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func names(ss tracetest.SpanStubs) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func attr(kvs []attribute.KeyValue, k attribute.Key) attribute.Value {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func hasEvent(s tracetest.SpanStub, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// linkTo returns the span context s links to with AttrLink why.
func linkTo(s tracetest.SpanStub, why string) trace.SpanContext {
	for _, l := range s.Links {
		if attr(l.Attributes, sluiceotel.AttrLink).AsString() == why {
			return l.SpanContext
		}
	}
	return trace.SpanContext{}
}

// syncBuffer is a log buffer the handler's goroutine writes and the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRetryAfterDeath: the span tree of an enqueue inside a request's
// span, a failing attempt that kills its job, an operator's retry and
// the attempt after it, which links to the one that died; the handler's
// log records carry its span; the metrics count it all.
func TestRetryAfterDeath(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	logger := slog.New(sluiceotel.LogHandler(slog.NewJSONHandler(&logs, nil)))
	var runs atomic.Int32
	r := newRig(t, engine.Kind{Name: "charge", MaxAttempts: 1, Handler: func(ctx context.Context, j *engine.Job) error {
		n := runs.Add(1)
		logger.InfoContext(ctx, "charging", "run", n)
		if n == 1 {
			return errors.New("card declined")
		}
		return nil
	}})
	ctx := context.Background()
	dep, err := r.ic.RegisterQueueDepth(r.e)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dep.Unregister() }()

	rctx, request := r.tp.Tracer("test").Start(ctx, "POST /checkout")
	j, err := r.e.Enqueue(rctx, engine.EnqueueParams{ID: "order-1", Queue: "q", Kind: "charge", Metadata: json.RawMessage(`{"tenant":"acme"}`)})
	request.End()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.e.Enqueue(ctx, engine.EnqueueParams{Queue: "idle", Kind: "charge"}); err != nil {
		t.Fatal(err)
	}

	// The enqueue: a producer span, the request's child, whose context
	// rides in the job's metadata beside the caller's own keys.
	send := r.waitSpans(t, "send q", 1)[0]
	rsc := request.SpanContext()
	if send.SpanKind != trace.SpanKindProducer || send.Parent.SpanID() != rsc.SpanID() || send.SpanContext.TraceID() != rsc.TraceID() {
		t.Fatalf("send span kind %v parent %v, want a producer child of the request %v", send.SpanKind, send.Parent, rsc)
	}
	if got := sluiceotel.TraceID(j); got != rsc.TraceID().String() {
		t.Errorf("TraceID(job) = %q, want the request's %s", got, rsc.TraceID())
	}
	var meta struct {
		Tenant string            `json:"tenant"`
		Trace  map[string]string `json:"sluice.trace"`
	}
	if err := json.Unmarshal(j.Metadata, &meta); err != nil || meta.Tenant != "acme" || meta.Trace["traceparent"] == "" {
		t.Errorf("metadata %s (%v), want the tenant kept and a traceparent", j.Metadata, err)
	}

	// The failing attempt: a consumer span of its own trace, linked to
	// the producer, an error recorded, the death marked.
	died := r.waitSpans(t, "process q", 1)[0]
	if died.SpanKind != trace.SpanKindConsumer || died.Parent.IsValid() {
		t.Errorf("attempt span kind %v parent %v, want a consumer root", died.SpanKind, died.Parent)
	}
	if got := linkTo(died, sluiceotel.LinkEnqueue); got.TraceID() != send.SpanContext.TraceID() || got.SpanID() != send.SpanContext.SpanID() {
		t.Errorf("attempt links to %v, want the producer %v", got, send.SpanContext)
	}
	if died.Status.Code != codes.Error || died.Status.Description != "card declined" || !hasEvent(died, "exception") {
		t.Errorf("attempt status %+v events %v, want the error recorded", died.Status, died.Events)
	}
	if !hasEvent(died, sluiceotel.EventDead) || !attr(died.Attributes, sluiceotel.AttrDead).AsBool() ||
		attr(died.Attributes, sluiceotel.AttrState).AsString() != "archived" {
		t.Errorf("attempt attributes %v events %v, want the death marked", died.Attributes, died.Events)
	}

	// The operator's retry is a span with its actor; the next attempt
	// links to the enqueue and to the attempt that died.
	if _, err := r.e.Retry(engine.WithActor(ctx, "alice"), "order-1", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	retry := r.waitSpans(t, "sluice.retry", 1)[0]
	if attr(retry.Attributes, sluiceotel.AttrActor).AsString() != "alice" || retry.Status.Code == codes.Error {
		t.Errorf("retry span attributes %v status %+v, want alice's and no error", retry.Attributes, retry.Status)
	}
	second := r.waitSpans(t, "process q", 2)[1]
	prev := linkTo(second, sluiceotel.LinkPreviousAttempt)
	if prev.TraceID() != died.SpanContext.TraceID() || prev.SpanID() != died.SpanContext.SpanID() {
		t.Errorf("retried attempt links to %v, want the attempt that died %v", prev, died.SpanContext)
	}
	if linkTo(second, sluiceotel.LinkEnqueue).SpanID() != send.SpanContext.SpanID() {
		t.Errorf("retried attempt links %v, want the producer too", second.Links)
	}
	if second.Status.Code == codes.Error || attr(second.Attributes, sluiceotel.AttrOutcome).AsString() != "success" {
		t.Errorf("retried attempt status %+v attributes %v, want a success", second.Status, second.Attributes)
	}

	// The handler's log records carry its attempt's ids.
	var recs []struct {
		Run     int    `json:"run"`
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(logs.String())), []byte("\n")) {
		var rec struct {
			Run     int    `json:"run"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 2 || recs[0].TraceID != died.SpanContext.TraceID().String() || recs[0].SpanID != died.SpanContext.SpanID().String() ||
		recs[1].SpanID != second.SpanContext.SpanID().String() {
		t.Errorf("log records %+v, want each attempt's trace and span ids", recs)
	}

	// The metrics: one completed, one failed, one dead, two durations,
	// and the idle queue's depth.
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if v, _ := p.Attributes.Value(sluiceotel.AttrKind); v.AsString() == "charge" {
						got[m.Name] += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] += int64(p.Count)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					q, _ := p.Attributes.Value("messaging.destination.name")
					s, _ := p.Attributes.Value(sluiceotel.AttrState)
					got[m.Name+" "+q.AsString()+" "+s.AsString()] = p.Value
				}
			}
		}
	}
	for name, want := range map[string]int64{
		sluiceotel.MetricCompleted: 1, sluiceotel.MetricFailed: 1, sluiceotel.MetricDead: 1,
		sluiceotel.MetricAttemptDuration: 2, sluiceotel.MetricQueueDepth + " idle available": 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %d, want %d (all: %v)", name, got[name], want, got)
		}
	}
}

// TestReplayedWorkflowStep: a workflow whose second step fails kills its
// job; replayed from that step, the new job's attempt links to the
// attempt that died, its first step's span says the stored result was
// returned, and each step's span is a child of its attempt's.
func TestReplayedWorkflowStep(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	r := newRig(t, engine.Kind{Name: "order", MaxAttempts: 1, Handler: func(ctx context.Context, j *engine.Job) error {
		n := runs.Add(1)
		if _, err := engine.Step(ctx, "reserve", func(context.Context) (string, error) { return "seat 12", nil }); err != nil {
			return err
		}
		_, err := engine.Step(ctx, "charge", func(context.Context) (int, error) {
			if n == 1 {
				return 0, errors.New("card declined")
			}
			return 42, nil
		})
		return err
	}})
	ctx := context.Background()
	if _, err := r.e.Enqueue(ctx, engine.EnqueueParams{ID: "order-2", Queue: "q", Kind: "order"}); err != nil {
		t.Fatal(err)
	}
	died := r.waitSpans(t, "process q", 1)[0]
	if _, err := r.e.ReplayFromStep(engine.WithActor(ctx, "bob"), "order-2", engine.ReplayParams{Step: 2}); err != nil {
		t.Fatal(err)
	}
	replay := r.waitSpans(t, "process q", 2)[1]
	if id := attr(replay.Attributes, "messaging.message.id").AsString(); id == "order-2" {
		t.Fatalf("second attempt is of %s, want the replay's new job", id)
	}
	if prev := linkTo(replay, sluiceotel.LinkPreviousAttempt); prev.SpanID() != died.SpanContext.SpanID() {
		t.Errorf("replay's attempt links %v, want the attempt that died %v", replay.Links, died.SpanContext)
	}
	action := r.waitSpans(t, "sluice.replay", 1)[0]
	if attr(action.Attributes, sluiceotel.AttrActor).AsString() != "bob" {
		t.Errorf("replay action attributes %v, want bob's", action.Attributes)
	}

	type step struct {
		name     string
		parent   trace.SpanID
		replayed bool
		failed   bool
	}
	var steps []step
	for _, s := range r.spans.GetSpans() {
		if s.Name == "step reserve" || s.Name == "step charge" {
			steps = append(steps, step{s.Name, s.Parent.SpanID(), attr(s.Attributes, sluiceotel.AttrStepReplay).AsBool(), s.Status.Code == codes.Error})
		}
	}
	want := []step{
		{"step reserve", died.SpanContext.SpanID(), false, false},
		{"step charge", died.SpanContext.SpanID(), false, true},
		{"step reserve", replay.SpanContext.SpanID(), true, false},
		{"step charge", replay.SpanContext.SpanID(), false, false},
	}
	if len(steps) != len(want) {
		t.Fatalf("step spans %+v, want %+v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step span %d = %+v, want %+v", i, steps[i], want[i])
		}
	}
}

// TestLogHandler: a record logged with a span's context carries its ids,
// one without a span passes as it was, and attributes and groups of the
// wrapped handler still apply.
func TestLogHandler(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	sctx, span := tp.Tracer("test").Start(context.Background(), "work")
	defer span.End()
	sc := span.SpanContext()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want map[string]any
	}{
		{"with a span", sctx, map[string]any{"msg": "hi", "app": "billing", "trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}},
		{"without", context.Background(), map[string]any{"msg": "hi", "app": "billing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(sluiceotel.LogHandler(slog.NewJSONHandler(&buf, nil))).With("app", "billing").InfoContext(tc.ctx, "hi")
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			delete(got, "time")
			delete(got, "level")
			if len(got) != len(tc.want) {
				t.Fatalf("record %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("record[%s] = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

// TestDeadLetterLinksToTheAttemptThatDied: a job routed to a dead-letter
// kind at its death is a new job; its attempt links to the attempt that
// killed the original.
func TestDeadLetterLinksToTheAttemptThatDied(t *testing.T) {
	t.Parallel()
	r := newRig(t,
		engine.Kind{Name: "charge", MaxAttempts: 1, DeadLetter: &engine.DeadLetterRule{Kind: "triage"},
			Handler: func(context.Context, *engine.Job) error { return errors.New("card declined") }},
		engine.Kind{Name: "triage", Handler: func(context.Context, *engine.Job) error { return nil }},
	)
	if _, err := r.e.Enqueue(context.Background(), engine.EnqueueParams{ID: "order-3", Queue: "q", Kind: "charge"}); err != nil {
		t.Fatal(err)
	}
	var died, triage tracetest.SpanStub
	for _, s := range r.waitSpans(t, "process q", 2) {
		switch attr(s.Attributes, sluiceotel.AttrKind).AsString() {
		case "charge":
			died = s
		case "triage":
			triage = s
		}
	}
	if !died.SpanContext.IsValid() || !triage.SpanContext.IsValid() {
		t.Fatalf("attempts of charge %v and triage %v, want one of each", died.SpanContext, triage.SpanContext)
	}
	if !attr(died.Attributes, sluiceotel.AttrDead).AsBool() {
		t.Errorf("the original's attempt %v is not marked dead", died.Attributes)
	}
	if prev := linkTo(triage, sluiceotel.LinkPreviousAttempt); prev.SpanID() != died.SpanContext.SpanID() {
		t.Errorf("the dead letter's attempt links %v, want the attempt that died %v", triage.Links, died.SpanContext)
	}
}

// TestCrashInAStep: a panic inside a step ends the step's span with an
// error, and the attempt's span records the crash.
func TestCrashInAStep(t *testing.T) {
	t.Parallel()
	r := newRig(t, engine.Kind{Name: "render", Handler: func(ctx context.Context, j *engine.Job) error {
		_, err := engine.Step(ctx, "draw", func(context.Context) (int, error) { panic("nil canvas") })
		return err
	}})
	if _, err := r.e.Enqueue(context.Background(), engine.EnqueueParams{ID: "pic-1", Queue: "q", Kind: "render"}); err != nil {
		t.Fatal(err)
	}
	attempt := r.waitSpans(t, "process q", 1)[0]
	if attr(attempt.Attributes, sluiceotel.AttrOutcome).AsString() != "crash" || attempt.Status.Code != codes.Error || !hasEvent(attempt, "exception") {
		t.Errorf("attempt attributes %v status %+v, want a crash recorded", attempt.Attributes, attempt.Status)
	}
	step := r.waitSpans(t, "step draw", 1)[0]
	if step.Parent.SpanID() != attempt.SpanContext.SpanID() || step.Status.Code != codes.Error || step.Status.Description != "panic: nil canvas" {
		t.Errorf("step span parent %v status %+v, want the attempt's child ended by the panic", step.Parent, step.Status)
	}
}

// TestLimitGauges: a kind limited to 1 with one job running and two held
// reports running 1 of 1 and a wait; an idle kind's limit reports no
// wait; a partitioned limit reports its running jobs and bound, no wait.
func TestLimitGauges(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var started atomic.Int32
	r := newRig(t, engine.Kind{Name: "slow", Handler: func(ctx context.Context, j *engine.Job) error {
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	defer close(release)
	ctx := context.Background()
	for _, l := range []engine.Limit{
		{Scope: engine.LimitKind, Name: "slow", Concurrency: 1},
		{Scope: engine.LimitKind, Name: "idle", Concurrency: 5},
		{Scope: engine.LimitKind, Name: "tenanted", Concurrency: 2, Key: "tenant"},
	} {
		if err := r.e.SetLimit(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := r.ic.RegisterLimits(r.e)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()
	for range 3 {
		if _, err := r.e.Enqueue(ctx, engine.EnqueueParams{Queue: "q", Kind: "slow"}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for started.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no job of slow started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Gauge[int64]); ok {
				for _, p := range d.DataPoints {
					if l, ok := p.Attributes.Value(sluiceotel.AttrLimit); ok {
						got[m.Name+" "+l.AsString()] = p.Value
					}
				}
			}
		}
	}
	want := map[string]int64{
		sluiceotel.MetricLimitRunning + " kind slow": 1, sluiceotel.MetricLimitMax + " kind slow": 1, sluiceotel.MetricLimitWaits + " kind slow": 1,
		sluiceotel.MetricLimitRunning + " kind idle": 0, sluiceotel.MetricLimitMax + " kind idle": 5, sluiceotel.MetricLimitWaits + " kind idle": 0,
		sluiceotel.MetricLimitRunning + " kind tenanted per tenant": 0, sluiceotel.MetricLimitMax + " kind tenanted per tenant": 2,
	}
	if len(got) != len(want) {
		t.Errorf("gauges %v, want %v", got, want)
	}
	for k, v := range want {
		if n, ok := got[k]; !ok || n != v {
			t.Errorf("%s = %d (reported %v), want %d", k, n, ok, v)
		}
	}
}
