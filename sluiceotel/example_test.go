package sluiceotel_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluiceotel"
)

// Tracing an engine: the Interceptor goes in the engine's Config, and
// every enqueue, attempt, step and operator action is a span on the
// TracerProvider given (a real exporter in a program; an in-memory one
// here, to print what was made). LogHandler puts the trace and span ids
// on what a handler logs with its context.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluiceotel-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "jobs.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(ctx) }()
	tracing, err := sluiceotel.New(sluiceotel.Config{TracerProvider: tp})
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(sluiceotel.LogHandler(slog.NewJSONHandler(os.Stderr, nil)))

	e, err := engine.New(store, engine.Config{
		Queues:      map[string]engine.QueueConfig{"billing": {Concurrency: 1}},
		Interceptor: tracing,
	})
	if err != nil {
		log.Fatal(err)
	}
	died := make(chan struct{})
	e.OnDead(func(context.Context, engine.DeathEvent) { close(died) })
	err = e.Register(engine.Kind{Name: "invoice.charge", MaxAttempts: 1, Handler: func(ctx context.Context, j *engine.Job) error {
		if _, err := engine.Step(ctx, "reserve", func(context.Context) (string, error) { return "ok", nil }); err != nil {
			return err
		}
		logger.InfoContext(ctx, "charging", "job", j.ID) // carries trace_id and span_id
		return errors.New("card declined")
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	job, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "inv-1", Queue: "billing", Kind: "invoice.charge"})
	if err != nil {
		log.Fatal(err)
	}
	<-died
	if err := e.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	fmt.Println("trace id carried with the job:", sluiceotel.TraceID(job) != "")
	var lines []string
	for _, s := range spans.GetSpans() {
		lines = append(lines, fmt.Sprintf("%s (%s) %s", s.Name, s.SpanKind, s.Status.Code))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// trace id carried with the job: true
	// process billing (consumer) Error
	// send billing (producer) Unset
	// step reserve (internal) Unset
}
