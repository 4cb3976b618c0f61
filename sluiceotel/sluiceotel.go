// Package sluiceotel traces and measures a Sluice engine with
// OpenTelemetry, as otelriver does for River. It is opt-in: the engine
// itself imports no OpenTelemetry package; a program that wants traces
// sets
//
//	engine.Config{Interceptor: sluiceotel.New(sluiceotel.Config{})}
//
// and gets, on the TracerProvider it gives (the global one when nil):
//
//   - a producer span ("send <queue>") for each enqueued job, whose W3C
//     trace context is carried with the job, in its metadata under
//     MetadataKey ({"sluice.trace":{"traceparent":...}});
//   - a consumer span ("process <queue>") for each attempt, linked to the
//     producer span, and to the attempt before it that failed or died
//     (kept with that attempt's error entry), so a job retried or replayed
//     after its death points at the attempt that died; errors are recorded
//     on it with status Error, and a death is marked (attribute
//     sluice.job.dead, event "sluice.job.dead");
//   - a span for each workflow step ("step <name>"), a child of its
//     attempt's, marked sluice.step.replayed when its stored result was
//     returned;
//   - a span for each operator action ("sluice.<action>") with its actor.
//
// The consumer span starts a trace of its own, linked to the producer's
// rather than its child, as OpenTelemetry's messaging conventions advise
// for work that may run long after it was sent and more than once.
//
// Metrics go to the MeterProvider (RegisterQueueDepth adds the queues'
// depth, RegisterLimits the limits' running jobs and waits), beside the Prometheus endpoint of package api/apimetrics, and
// LogHandler adds trace_id and span_id to the log records a handler
// writes with its context.
package sluiceotel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/engine"
)

// name is the instrumentation scope, the package's import path as
// OpenTelemetry asks.
const name = "github.com/sluicehq/sluice/sluiceotel"

// MetadataKey is the key of a job's metadata under which the W3C trace
// context of its enqueue is carried: an object of "traceparent" and, when
// there is one, "tracestate". The console reads it to show a job's trace
// id.
const MetadataKey = "sluice.trace"

// Attribute keys this package sets beside OpenTelemetry's messaging ones.
const (
	AttrKind        = attribute.Key("sluice.job.kind")
	AttrAttempt     = attribute.Key("sluice.job.attempt")
	AttrRun         = attribute.Key("sluice.job.run")
	AttrOutcome     = attribute.Key("sluice.job.outcome")
	AttrState       = attribute.Key("sluice.job.state")
	AttrDead        = attribute.Key("sluice.job.dead")
	AttrExisting    = attribute.Key("sluice.job.existing")
	AttrStepName    = attribute.Key("sluice.step.name")
	AttrStepPos     = attribute.Key("sluice.step.position")
	AttrStepReplay  = attribute.Key("sluice.step.replayed")
	AttrAction      = attribute.Key("sluice.action")
	AttrActor       = attribute.Key("sluice.actor")
	AttrFingerprint = attribute.Key("sluice.fingerprint")
	AttrSelector    = attribute.Key("sluice.selector")
	AttrDryRun      = attribute.Key("sluice.dry_run")
	AttrIDs         = attribute.Key("sluice.ids")
	AttrOperation   = attribute.Key("sluice.operation")
	AttrErrorGroup  = attribute.Key("sluice.error_group")
	// AttrLink says what a consumer span's link points at: LinkEnqueue
	// (the producer span) or LinkPreviousAttempt (the attempt before,
	// which failed or died).
	AttrLink = attribute.Key("sluice.link")
)

// The values of AttrLink.
const (
	LinkEnqueue         = "enqueue"
	LinkPreviousAttempt = "previous_attempt"
)

// EventDead is the span event of an attempt that killed its job.
const EventDead = "sluice.job.dead"

// Config sets up an Interceptor; the zero value uses the global providers.
type Config struct {
	// TracerProvider makes the spans; otel.GetTracerProvider() when nil.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics; otel.GetMeterProvider() when nil.
	MeterProvider metric.MeterProvider
}

// Interceptor is an engine.Interceptor that traces and measures.
type Interceptor struct {
	tracer  trace.Tracer
	meter   metric.Meter
	metrics instruments
}

var _ engine.Interceptor = (*Interceptor)(nil)

// New makes an Interceptor; set it as engine.Config.Interceptor.
func New(cfg Config) (*Interceptor, error) {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(name)
	ins, err := newInstruments(meter)
	if err != nil {
		return nil, err
	}
	return &Interceptor{tracer: tp.Tracer(name), meter: meter, metrics: ins}, nil
}

// messaging are the attributes every span of a job carries, after
// OpenTelemetry's messaging conventions.
func messaging(op, queue string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "sluice"),
		attribute.String("messaging.operation.name", op),
		attribute.String("messaging.operation.type", op),
		attribute.String("messaging.destination.name", queue),
	}
}

// InterceptEnqueue starts a producer span per job, carries its context in
// the job's metadata, and ends the spans with each job's result.
func (i *Interceptor) InterceptEnqueue(ctx context.Context, jobs []engine.EnqueueParams, next engine.EnqueueFunc) ([]engine.EnqueueResult, error) {
	// The caller's slice stays as it was given.
	jobs = slices.Clone(jobs)
	spans := make([]trace.Span, len(jobs))
	for k := range jobs {
		p := &jobs[k]
		queue := cmp.Or(p.Queue, "default")
		attrs := append(messaging("send", queue), AttrKind.String(p.Kind))
		if p.ID != "" {
			attrs = append(attrs, attribute.String("messaging.message.id", p.ID))
		}
		sctx, span := i.tracer.Start(ctx, "send "+queue, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		spans[k] = span
		if meta, ok := injectTrace(sctx, p.Metadata); ok {
			p.Metadata = meta
		}
	}
	res, err := next(ctx, jobs)
	for k, span := range spans {
		switch {
		case err != nil:
			fail(span, err)
		case k < len(res) && res[k].Err != nil:
			fail(span, res[k].Err)
		case k < len(res) && res[k].Job != nil:
			span.SetAttributes(attribute.String("messaging.message.id", res[k].Job.ID), AttrExisting.Bool(res[k].Existing))
		}
		span.End()
	}
	return res, err
}

// InterceptAttempt starts the attempt's consumer span, linked to its
// enqueue and to the attempt before it that failed or died.
func (i *Interceptor) InterceptAttempt(ctx context.Context, a engine.AttemptInfo) (context.Context, engine.AttemptHook) {
	j := a.Job
	var links []trace.Link
	if sc := extractTrace(j.Metadata); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrLink.String(LinkEnqueue)}})
	}
	if sc := parseRef(a.Previous); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrLink.String(LinkPreviousAttempt)}})
	}
	attrs := append(messaging("process", j.Queue),
		attribute.String("messaging.message.id", j.ID),
		AttrKind.String(j.Kind),
		AttrAttempt.Int(j.Attempt+1),
		AttrRun.Int64(a.Run),
	)
	ctx, span := i.tracer.Start(ctx, "process "+j.Queue, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
	done := func(res engine.AttemptResult) {
		i.attemptEnded(ctx, span, j, res)
	}
	return ctx, engine.AttemptHook{Ref: ref(span.SpanContext()), Done: done}
}

// failedOutcomes are the outcomes that fail an attempt.
var failedOutcomes = map[string]bool{"error": true, "crash": true, "deadline": true, "undecodable": true}

func (i *Interceptor) attemptEnded(ctx context.Context, span trace.Span, j *engine.Job, res engine.AttemptResult) {
	span.SetAttributes(AttrOutcome.String(res.Outcome))
	if res.State != "" {
		span.SetAttributes(AttrState.String(string(res.State)))
	}
	if failedOutcomes[res.Outcome] {
		err := res.Err
		if err == nil {
			err = errors.New(res.Message)
		}
		fail(span, err)
	}
	if res.Dead {
		span.SetAttributes(AttrDead.Bool(true))
		span.AddEvent(EventDead, trace.WithAttributes(AttrState.String(string(res.State)), attribute.String("message", res.Message)))
		// A death is a failure whatever led to it (a skip archives too).
		span.SetStatus(codes.Error, cmp.Or(res.Message, "job died"))
	}
	span.End()
	i.metrics.attempt(ctx, j, res)
}

// InterceptStep starts a step's span, a child of its attempt's.
func (i *Interceptor) InterceptStep(ctx context.Context, s engine.StepInfo) (context.Context, func(error)) {
	ctx, span := i.tracer.Start(ctx, "step "+s.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("messaging.message.id", s.JobID),
		AttrKind.String(s.Kind),
		AttrStepName.String(s.Name),
		AttrStepPos.Int(s.Position),
		AttrStepReplay.Bool(s.Replayed),
	))
	return ctx, func(err error) {
		if err != nil {
			fail(span, err)
		}
		span.End()
	}
}

// InterceptAction starts an operator action's span, with its actor.
func (i *Interceptor) InterceptAction(ctx context.Context, a engine.ActionInfo) (context.Context, func(error)) {
	attrs := []attribute.KeyValue{AttrAction.String(a.Name), AttrActor.String(a.Actor)}
	if a.Action != "" {
		attrs = append(attrs, attribute.String("sluice.action.applied", string(a.Action)))
	}
	if a.JobID != "" {
		attrs = append(attrs, attribute.String("messaging.message.id", a.JobID))
	}
	if a.Fingerprint != "" {
		attrs = append(attrs, AttrFingerprint.String(a.Fingerprint))
	}
	if a.Queue != "" {
		attrs = append(attrs, attribute.String("messaging.destination.name", a.Queue))
	}
	if a.Operation != "" {
		attrs = append(attrs, AttrOperation.String(a.Operation))
	}
	if a.ErrorGroup != "" {
		attrs = append(attrs, AttrErrorGroup.String(a.ErrorGroup))
	}
	if a.IDs > 0 {
		attrs = append(attrs, AttrIDs.Int(a.IDs))
	}
	if a.Selector != "" {
		attrs = append(attrs, AttrSelector.String(a.Selector), AttrDryRun.Bool(a.DryRun))
	}
	ctx, span := i.tracer.Start(ctx, "sluice."+a.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		if err != nil {
			fail(span, err)
		}
		span.End()
	}
}

// fail records err on span and marks it an error.
func fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// tc is the propagator of the context carried with jobs: W3C trace
// context, whatever the program's global propagator is, so any worker
// reads what any producer wrote.
var tc = propagation.TraceContext{}

// injectTrace returns meta with ctx's trace context under MetadataKey. It
// reports false, and leaves meta alone, when ctx has no span to carry or
// meta is not a JSON object (the engine refuses it then).
func injectTrace(ctx context.Context, meta json.RawMessage) (json.RawMessage, bool) {
	carrier := propagation.MapCarrier{}
	tc.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return meta, false
	}
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(meta)) > 0 {
		if err := json.Unmarshal(meta, &m); err != nil || m == nil {
			return meta, false
		}
	}
	v, err := json.Marshal(map[string]string(carrier))
	if err != nil {
		return meta, false
	}
	m[MetadataKey] = v
	out, err := json.Marshal(m)
	if err != nil {
		return meta, false
	}
	return out, true
}

// extractTrace reads the span context a job's metadata carries; invalid
// when it carries none.
func extractTrace(meta json.RawMessage) trace.SpanContext {
	if len(meta) == 0 {
		return trace.SpanContext{}
	}
	var m struct {
		Trace map[string]string `json:"sluice.trace"`
	}
	if err := json.Unmarshal(meta, &m); err != nil || m.Trace == nil {
		return trace.SpanContext{}
	}
	// From a fresh context: a missing carrier must not hand back the
	// caller's own span.
	return trace.SpanContextFromContext(tc.Extract(context.Background(), propagation.MapCarrier(m.Trace)))
}

// TraceID is the id of the trace a job was enqueued in, from its
// metadata; empty when it carries none.
func TraceID(j *engine.Job) string {
	if sc := extractTrace(j.Metadata); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// ref is an attempt's reference kept with its error entry: its span's
// traceparent.
func ref(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// parseRef reads a reference ref wrote; invalid when it is not one.
func parseRef(s string) trace.SpanContext {
	if s == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(tc.Extract(context.Background(), propagation.MapCarrier{"traceparent": s}))
}
