package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/otelsetup"
)

// otelFlagUsage is --otel's usage, on serve and worker.
const otelFlagUsage = "export traces and metrics over OTLP/HTTP even without OTEL_EXPORTER_OTLP_ENDPOINT (to http://localhost:4318)"

// otelHelp is the part of serve's and worker's help on OpenTelemetry.
const otelHelp = `OpenTelemetry: with OTEL_EXPORTER_OTLP_ENDPOINT set (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _METRICS_ENDPOINT for one signal), or
with --otel, the process exports over OTLP/HTTP (protobuf, port 4318): a
span for each enqueue, attempt (with the job's id, kind, queue, attempt and
outcome), workflow step and operator action (with its actor); counters, an
attempt-duration histogram, queue depth and limits as metrics; and log
lines written within a span carry trace_id and span_id. service.name is sluice unless OTEL_SERVICE_NAME says otherwise;
the SDK's other variables apply (OTEL_EXPORTER_OTLP_HEADERS,
OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_METRIC_EXPORT_INTERVAL,
OTEL_TRACES_EXPORTER=none, OTEL_SDK_DISABLED=true, ...). What is buffered is
sent when the process stops. Without them nothing is exported.`

// startTelemetry sets up OpenTelemetry export as the environment or
// --otel asks (nil when neither does) and returns the logger to use from
// then on, which adds trace and span ids when it exports.
func startTelemetry(ctx context.Context, force bool, log *slog.Logger) (*otelsetup.Telemetry, *slog.Logger, error) {
	tel, err := otelsetup.Start(ctx, otelsetup.Config{Force: force, ServiceVersion: currentVersion().Version, Logger: log})
	if err != nil {
		return nil, log, err
	}
	return tel, tel.Logger(log), nil
}

// stopTelemetry sends what tel buffered, with a bound of its own: the
// command's context is cancelled by then.
func stopTelemetry(ctx context.Context, tel *otelsetup.Telemetry, log *slog.Logger) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := tel.Shutdown(sctx); err != nil {
		log.Warn("opentelemetry shutdown", "err", err)
	}
}
