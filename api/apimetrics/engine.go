package apimetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/engine"
)

// EngineMetrics is an engine.Observer that keeps what an engine's workers
// do as Prometheus series:
//
//	sluice_job_transitions_total{queue,kind,from,to}
//	sluice_handler_duration_seconds{queue,kind,outcome} (histogram)
//
// Set it as engine.Config.Observer of the engine that runs the workers and
// register it where it is scraped, for instance with the server's
// registry:
//
//	obs := apimetrics.NewEngineMetrics()
//	e, _ := engine.New(store, engine.Config{Observer: obs, ...})
//	m := apimetrics.New(e, log)
//	m.Registry().MustRegister(obs)
//	srv := api.NewServer(e, api.ServerOptions{Metrics: m})
//
// The series of one (queue, kind, ...) are looked up once and kept, so a
// job costs two map reads under a read lock and no allocation.
type EngineMetrics struct {
	transitions *prometheus.CounterVec
	durations   *prometheus.HistogramVec

	mu       sync.RWMutex
	counters map[transitionKey]prometheus.Counter
	timers   map[handlerKey]prometheus.Observer
}

type transitionKey struct {
	queue, kind string
	from, to    engine.State
}

type handlerKey struct{ queue, kind, outcome string }

var _ engine.Observer = (*EngineMetrics)(nil)
var _ prometheus.Collector = (*EngineMetrics)(nil)

// HandlerBuckets are the bounds of sluice_handler_duration_seconds: from
// a millisecond to ten minutes.
var HandlerBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// NewEngineMetrics returns an observer with no series yet.
func NewEngineMetrics() *EngineMetrics {
	return &EngineMetrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_job_transitions_total",
			Help: "Job state transitions written by this process's workers and reaper, by queue, kind and states.",
		}, []string{"queue", "kind", "from", "to"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_handler_duration_seconds",
			Help:    "Time a handler ran in this process, by queue, kind and outcome (success, error, crash, skip, snooze, revoke, deadline, undecodable, abandoned).",
			Buckets: HandlerBuckets,
		}, []string{"queue", "kind", "outcome"}),
		counters: map[transitionKey]prometheus.Counter{},
		timers:   map[handlerKey]prometheus.Observer{},
	}
}

// JobTransition counts one transition.
func (m *EngineMetrics) JobTransition(queue, kind string, from, to engine.State) {
	k := transitionKey{queue, kind, from, to}
	m.mu.RLock()
	c, ok := m.counters[k]
	m.mu.RUnlock()
	if !ok {
		c = m.transitions.WithLabelValues(queue, kind, string(from), string(to))
		m.mu.Lock()
		m.counters[k] = c
		m.mu.Unlock()
	}
	c.Inc()
}

// HandlerDone observes one handler run.
func (m *EngineMetrics) HandlerDone(queue, kind, outcome string, d time.Duration) {
	k := handlerKey{queue, kind, outcome}
	m.mu.RLock()
	o, ok := m.timers[k]
	m.mu.RUnlock()
	if !ok {
		o = m.durations.WithLabelValues(queue, kind, outcome)
		m.mu.Lock()
		m.timers[k] = o
		m.mu.Unlock()
	}
	o.Observe(d.Seconds())
}

// Describe implements prometheus.Collector.
func (m *EngineMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.transitions.Describe(ch)
	m.durations.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *EngineMetrics) Collect(ch chan<- prometheus.Metric) {
	m.transitions.Collect(ch)
	m.durations.Collect(ch)
}
