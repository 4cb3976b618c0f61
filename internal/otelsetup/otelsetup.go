// Package otelsetup gives the sluice command's serve and worker
// OpenTelemetry export, configured as the OpenTelemetry SDKs are: by the
// standard OTEL_* environment variables. It sets up a TracerProvider and a
// MeterProvider with OTLP/HTTP exporters and hands back the sluiceotel
// Interceptor over them, the queue-depth and limit gauges, the slog
// wrapper, and the flush at exit.
//
// It is apart from package sluiceotel so that a program embedding the
// engine picks its own exporters and links none of these, and apart from
// cli so that the commands stay a few calls: the engine still imports no
// OpenTelemetry (TestNoOpenTelemetryInEngine).
package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/sluiceotel"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME (or
// service.name in OTEL_RESOURCE_ATTRIBUTES) gives none.
const DefaultServiceName = "sluice"

// Config says how a command asks for export.
type Config struct {
	// Force exports even when no OTEL_EXPORTER_OTLP_*ENDPOINT variable is
	// set (the command's --otel): to the exporters' default,
	// http://localhost:4318.
	Force bool
	// ServiceVersion is service.version.
	ServiceVersion string
	// Logger receives the exporters' errors (a collector that is down)
	// and the line saying where telemetry goes.
	Logger *slog.Logger
	// LookupEnv reads the environment; os.LookupEnv when nil. The
	// exporters themselves read the process's environment.
	LookupEnv func(string) (string, bool)
}

// Telemetry is the export a command set up. Its methods accept a nil
// Telemetry, the answer of Start when nothing asks for export, and then
// do nothing, so a command calls them whether or not it exports.
type Telemetry struct {
	interceptor *sluiceotel.Interceptor
	tp          *sdktrace.TracerProvider // nil when traces are not exported
	mp          *sdkmetric.MeterProvider // nil when metrics are not exported
	regs        []metric.Registration
}

// signal is what the environment asks of one signal (traces, metrics).
type signal struct {
	on       bool
	endpoint string // where it goes, for the log line
	// fallback: no variable names an endpoint (--otel alone), so it goes
	// to the specification's default, http://localhost:4318, which the
	// Go exporters would otherwise reach over https.
	fallback bool
}

// wanted reads which signals the environment (or force) asks to export.
// A signal is exported when --otel is given or an endpoint variable names
// a collector for it (OTEL_EXPORTER_OTLP_ENDPOINT, or the signal's own),
// unless its OTEL_<SIGNAL>_EXPORTER is none; OTEL_SDK_DISABLED=true turns
// both off. Only OTLP over HTTP with protobuf is built in: another
// exporter or protocol is refused rather than sent to a collector that
// would not understand it.
func wanted(force bool, env func(string) (string, bool)) (traces, metrics signal, err error) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return signal{}, signal{}, nil
	}
	base := get("OTEL_EXPORTER_OTLP_ENDPOINT")
	one := func(name, path string) (signal, error) {
		upper := strings.ToUpper(name)
		switch exp := strings.ToLower(get("OTEL_" + upper + "_EXPORTER")); exp {
		case "", "otlp":
		case "none":
			return signal{}, nil
		default:
			return signal{}, fmt.Errorf("OTEL_%s_EXPORTER=%s: sluice exports %s over OTLP only (otlp or none)", upper, exp, name)
		}
		proto := get("OTEL_EXPORTER_OTLP_" + upper + "_PROTOCOL")
		protoVar := "OTEL_EXPORTER_OTLP_" + upper + "_PROTOCOL"
		if proto == "" {
			proto, protoVar = get("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
		}
		if proto != "" && proto != "http/protobuf" {
			return signal{}, fmt.Errorf("%s=%s: sluice sends OTLP over HTTP with protobuf only (http/protobuf, port 4318)", protoVar, proto)
		}
		own := get("OTEL_EXPORTER_OTLP_" + upper + "_ENDPOINT")
		switch {
		case own != "":
			return signal{on: true, endpoint: own}, nil
		case base != "":
			return signal{on: true, endpoint: strings.TrimRight(base, "/") + path}, nil
		case force:
			return signal{on: true, endpoint: "http://localhost:4318" + path, fallback: true}, nil
		}
		return signal{}, nil
	}
	if traces, err = one("traces", "/v1/traces"); err != nil {
		return signal{}, signal{}, err
	}
	if metrics, err = one("metrics", "/v1/metrics"); err != nil {
		return signal{}, signal{}, err
	}
	return traces, metrics, nil
}

// Start sets up export as the environment asks, or returns nil when it
// asks for none: then no exporter, provider or goroutine is made.
func Start(ctx context.Context, cfg Config) (*Telemetry, error) {
	env := cfg.LookupEnv
	if env == nil {
		env = os.LookupEnv
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	traces, metrics, err := wanted(cfg.Force, env)
	if err != nil {
		return nil, fmt.Errorf("opentelemetry: %w", err)
	}
	if !traces.on && !metrics.on {
		return nil, nil
	}
	// service.name defaults to sluice; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, read after, win.
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil {
		return nil, fmt.Errorf("opentelemetry: resource: %w", err)
	}
	// The exporters report failures (a collector down) here, not on the
	// process's stderr through OpenTelemetry's own logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("opentelemetry export", "err", err) }))

	t := &Telemetry{}
	var tp trace.TracerProvider = tracenoop.NewTracerProvider()
	var mp metric.MeterProvider = metricnoop.NewMeterProvider()
	if traces.on {
		var opts []otlptracehttp.Option
		if traces.fallback {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("opentelemetry: trace exporter: %w", err)
		}
		// The batcher, sampler and limits read OTEL_BSP_*,
		// OTEL_TRACES_SAMPLER and OTEL_SPAN_* themselves.
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		tp = t.tp
	}
	if metrics.on {
		var opts []otlpmetrichttp.Option
		if metrics.fallback {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			_ = t.Shutdown(ctx)
			return nil, fmt.Errorf("opentelemetry: metric exporter: %w", err)
		}
		// The reader reads OTEL_METRIC_EXPORT_INTERVAL itself.
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		mp = t.mp
	}
	// Global too, for libraries that take the global providers.
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	t.interceptor, err = sluiceotel.New(sluiceotel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		_ = t.Shutdown(ctx)
		return nil, fmt.Errorf("opentelemetry: %w", err)
	}
	off := "off"
	log.Info("opentelemetry: exporting over OTLP/HTTP",
		"traces", cond(traces.on, redact.URL(traces.endpoint), off),
		"metrics", cond(metrics.on, redact.URL(metrics.endpoint), off),
		"service", serviceName(res))
	return t, nil
}

// serviceName is the service.name res carries.
func serviceName(res *resource.Resource) string {
	v, _ := res.Set().Value("service.name")
	return v.AsString()
}

func cond(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// Interceptor is the engine.Interceptor to set as engine.Config's; nil
// (no interceptor) when t is.
func (t *Telemetry) Interceptor() engine.Interceptor {
	if t == nil {
		return nil
	}
	return t.interceptor
}

// Logger wraps log's handler so that what is logged with a span's context
// carries its trace_id and span_id; log itself when t is nil.
func (t *Telemetry) Logger(log *slog.Logger) *slog.Logger {
	if t == nil {
		return log
	}
	return slog.New(sluiceotel.LogHandler(log.Handler()))
}

// Register reports ctl's queue depth and limits as gauges
// (sluice.queue.depth, sluice.limit.*), read when metrics are collected.
// Unregister them before ctl stops.
func (t *Telemetry) Register(ctl engine.Control) error {
	if t == nil || t.mp == nil {
		return nil
	}
	depth, err := t.interceptor.RegisterQueueDepth(ctl)
	if err != nil {
		return err
	}
	t.regs = append(t.regs, depth)
	limits, err := t.interceptor.RegisterLimits(ctl)
	if err != nil {
		return err
	}
	t.regs = append(t.regs, limits)
	return nil
}

// Unregister stops reading the engine Register was given, so that no
// collection reads an engine or a store that is gone.
func (t *Telemetry) Unregister() error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, r := range t.regs {
		errs = append(errs, r.Unregister())
	}
	t.regs = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("opentelemetry: unregister: %w", err)
	}
	return nil
}

// Shutdown exports what is buffered and stops the providers. Call it
// after the engine stopped, so that the spans of the jobs it drained go
// too.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	errs := []error{t.Unregister()}
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("opentelemetry: shutdown: %w", err)
	}
	return nil
}
