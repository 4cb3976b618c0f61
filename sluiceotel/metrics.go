package sluiceotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/engine"
)

// The metrics' names.
const (
	MetricCompleted       = "sluice.jobs.completed"
	MetricFailed          = "sluice.jobs.failed"
	MetricDead            = "sluice.jobs.dead"
	MetricAttemptDuration = "sluice.attempt.duration"
	MetricQueueDepth      = "sluice.queue.depth"
	MetricLimitRunning    = "sluice.limit.running"
	MetricLimitMax        = "sluice.limit.concurrency"
	MetricLimitWaits      = "sluice.limit.waits"
)

// AttrLimit names a limit as the console does ("kind billing.charge",
// "kind billing.charge per customer").
const AttrLimit = attribute.Key("sluice.limit")

// instruments are the metrics an Interceptor records as attempts end.
type instruments struct {
	completed, failed, dead metric.Int64Counter
	duration                metric.Float64Histogram
}

func newInstruments(m metric.Meter) (instruments, error) {
	var ins instruments
	var err error
	if ins.completed, err = m.Int64Counter(MetricCompleted, metric.WithUnit("{job}"),
		metric.WithDescription("Attempts that completed their job")); err != nil {
		return ins, fmt.Errorf("sluiceotel: %s: %w", MetricCompleted, err)
	}
	if ins.failed, err = m.Int64Counter(MetricFailed, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts that failed: an error, a crash, a passed deadline, an undecodable payload")); err != nil {
		return ins, fmt.Errorf("sluiceotel: %s: %w", MetricFailed, err)
	}
	if ins.dead, err = m.Int64Counter(MetricDead, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs killed by an attempt: archived or quarantined")); err != nil {
		return ins, fmt.Errorf("sluiceotel: %s: %w", MetricDead, err)
	}
	if ins.duration, err = m.Float64Histogram(MetricAttemptDuration, metric.WithUnit("s"),
		metric.WithDescription("How long a handler ran")); err != nil {
		return ins, fmt.Errorf("sluiceotel: %s: %w", MetricAttemptDuration, err)
	}
	return ins, nil
}

// attempt records an ended attempt: by kind and queue, and the duration
// by outcome too.
func (ins instruments) attempt(ctx context.Context, j *engine.Job, res engine.AttemptResult) {
	by := metric.WithAttributes(AttrKind.String(j.Kind), attribute.String("messaging.destination.name", j.Queue))
	switch {
	case res.Outcome == "success":
		ins.completed.Add(ctx, 1, by)
	case failedOutcomes[res.Outcome]:
		ins.failed.Add(ctx, 1, by)
	}
	if res.Dead {
		ins.dead.Add(ctx, 1, by)
	}
	ins.duration.Record(ctx, res.Duration.Seconds(), metric.WithAttributes(
		AttrKind.String(j.Kind), attribute.String("messaging.destination.name", j.Queue), AttrOutcome.String(res.Outcome)))
}

// RegisterQueueDepth reports, as the observable gauge sluice.queue.depth,
// how many jobs each queue holds in each state (sluice.job.state), read
// from ctl's Queues when the metrics are collected: the store's
// maintained counters, so a collection costs one read. Unregister it
// before ctl goes away.
func (i *Interceptor) RegisterQueueDepth(ctl engine.Control) (metric.Registration, error) {
	gauge, err := i.meter.Int64ObservableGauge(MetricQueueDepth, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs in a queue, by state"))
	if err != nil {
		return nil, fmt.Errorf("sluiceotel: %s: %w", MetricQueueDepth, err)
	}
	return i.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		qs, err := ctl.Queues(ctx)
		if err != nil {
			return fmt.Errorf("sluiceotel: queue depth: %w", err)
		}
		for _, q := range qs {
			for state, n := range q.Counts {
				o.ObserveInt64(gauge, n, metric.WithAttributes(
					attribute.String("messaging.destination.name", q.Name), AttrState.String(string(state))))
			}
		}
		return nil
	}, gauge)
}

// RegisterLimits reports each limit across processes (ctl's ListLimits,
// one store read per collection) as three observable gauges, by limit
// (sluice.limit): sluice.limit.running, the jobs it counts running;
// sluice.limit.concurrency, its bound (a rate-only limit reports none);
// and sluice.limit.waits, 1 while it holds jobs back — its running count
// at its bound or its rate window's starts spent — so that an alert on
// a recovering downstream's limit needs no arithmetic. A partitioned
// limit bounds each partition, which the store does not count apart: it
// reports its running jobs and its bound per partition, no waits.
// Unregister it before ctl goes away.
func (i *Interceptor) RegisterLimits(ctl engine.Control) (metric.Registration, error) {
	running, err := i.meter.Int64ObservableGauge(MetricLimitRunning, metric.WithUnit("{job}"),
		metric.WithDescription("Running jobs a limit across processes counts"))
	if err != nil {
		return nil, fmt.Errorf("sluiceotel: %s: %w", MetricLimitRunning, err)
	}
	bound, err := i.meter.Int64ObservableGauge(MetricLimitMax, metric.WithUnit("{job}"),
		metric.WithDescription("A limit's concurrency across processes"))
	if err != nil {
		return nil, fmt.Errorf("sluiceotel: %s: %w", MetricLimitMax, err)
	}
	waits, err := i.meter.Int64ObservableGauge(MetricLimitWaits,
		metric.WithDescription("1 while a limit holds jobs back: at its concurrency or its rate spent"))
	if err != nil {
		return nil, fmt.Errorf("sluiceotel: %s: %w", MetricLimitWaits, err)
	}
	return i.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ls, err := ctl.ListLimits(ctx)
		if err != nil {
			return fmt.Errorf("sluiceotel: limits: %w", err)
		}
		for _, l := range ls {
			by := metric.WithAttributes(AttrLimit.String(l.String()))
			o.ObserveInt64(running, l.Running, by)
			if l.Concurrency > 0 {
				o.ObserveInt64(bound, int64(l.Concurrency), by)
			}
			if l.Key != "" {
				continue
			}
			full := l.Concurrency > 0 && l.Running >= int64(l.Concurrency) || l.Rate > 0 && l.Starts >= int64(l.Rate)
			var w int64
			if full {
				w = 1
			}
			o.ObserveInt64(waits, w, by)
		}
		return nil
	}, running, bound, waits)
}
