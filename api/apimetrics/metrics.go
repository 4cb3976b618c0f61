// Package apimetrics is the Prometheus side of the control API: the
// server's own traffic, the jobs per queue and state, the progress of
// unfinished bulk operations read through engine.Control at each scrape,
// and the dead jobs of the error groups by triage status read at most
// every 30s (Metrics, set as api.ServerOptions.Metrics), and the transitions and
// handler times of an engine's workers (EngineMetrics, an engine.Observer).
// It is a package of its own so that a program that only wants api.Client
// or api.Server builds without Prometheus.
package apimetrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/outage"
)

// Metrics is an api.Metrics on a Prometheus registry of its own: the
// server's HTTP traffic, the Go runtime and process, and the engine's jobs
// and operations read through ctl on each scrape.
//
//	m := apimetrics.New(ctl, log)
//	srv := api.NewServer(ctl, api.ServerOptions{Metrics: m})
//	m.Registry().MustRegister(apimetrics.NewEngineMetrics()) // and set it as the engine's Observer
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	handler  http.Handler
}

var _ api.Metrics = (*Metrics)(nil)

// New returns the metrics of a server over ctl; log (nil: discarded)
// takes the scrape's store errors.
func New(ctl engine.Control, log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_requests_total",
			Help: "HTTP requests answered by the control API, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_http_request_duration_seconds",
			Help:    "Time to answer a control API request, by route (event streams left out).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
	}
	m.reg.MustRegister(m.requests, m.duration,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&engineCollector{ctl: ctl, log: log, out: outage.New(log, "metrics", outage.Options{})},
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
	return m
}

// Request counts one answered request; a negative took leaves its
// duration out.
func (m *Metrics) Request(route string, code int, took time.Duration) {
	if code == 0 {
		code = http.StatusNotFound
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	if took >= 0 {
		m.duration.WithLabelValues(route).Observe(took.Seconds())
	}
}

// ServeHTTP answers a scrape in Prometheus's text format.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.handler.ServeHTTP(w, r)
}

// Registry returns the Prometheus registry, to add collectors to.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// engineCollector reads the jobs per queue and state (from the maintained
// counters), the progress of unfinished operations and the dead jobs of
// the error groups by status at scrape time.
type engineCollector struct {
	ctl engine.Control
	log *slog.Logger
	// out logs a store outage once, not at every scrape (the backoff it
	// gives is unused: the scraper sets the pace).
	out *outage.Outage

	// groups is the last read of the error groups, kept groupsEvery: a
	// read groups every dead job (a second for a million on PostgreSQL),
	// which a scrape every few seconds would repeat for nothing.
	mu     sync.Mutex
	groups *groupTally
}

// groupsEvery is how long a read of the error groups serves scrapes.
const groupsEvery = 30 * time.Second

// groupTally is the dead jobs and the groups of each triage status, and
// the expiring jobs of each state.
type groupTally struct {
	at           time.Time
	jobs, groups map[engine.GroupStatus]int64
	expiring     map[engine.State]int64
}

// expiringMax bounds the count of expiring jobs of a state.
const expiringMax = 100_000

// fail logs a scrape's store error: once per outage when the store did
// not answer, at every scrape otherwise.
func (c *engineCollector) fail(what string, err error) {
	if outage.StoreUnavailable(err) {
		c.out.Fail(err, "what", what)
		return
	}
	c.log.Warn("metrics: "+what, "err", err)
}

var (
	descJobs = prometheus.NewDesc("sluice_jobs",
		"Jobs per queue and state, from the engine's maintained counters.", []string{"queue", "state"}, nil)
	descUp = prometheus.NewDesc("sluice_store_up",
		"1 when the store answered this scrape, else 0.", nil, nil)
	descOpMatched = prometheus.NewDesc("sluice_operation_matched_jobs",
		"Jobs an unfinished bulk operation matched when it was created.", []string{"operation", "action", "status"}, nil)
	descOpProcessed = prometheus.NewDesc("sluice_operation_processed_jobs",
		"Jobs an unfinished bulk operation has processed so far.", []string{"operation", "action", "status"}, nil)
	descOpFailed = prometheus.NewDesc("sluice_operation_failed_jobs",
		"Jobs an unfinished bulk operation could not change.", []string{"operation", "action", "status"}, nil)
	descGroupJobs = prometheus.NewDesc("sluice_error_group_dead_jobs",
		"Archived jobs in the error groups of each triage status (open, reopened, resolved, ignored), "+
			"the 200 largest groups, read at most every 30s: page on open and reopened.", []string{"status"}, nil)
	descGroups = prometheus.NewDesc("sluice_error_groups",
		"Error groups of archived jobs in each triage status, the 200 largest, read at most every 30s.", []string{"status"}, nil)
	descExpiring = prometheus.NewDesc("sluice_jobs_expiring",
		"Dead (archived), quarantined and undecodable jobs that retention deletes within the engine's warning window "+
			"(24h by default; expires<24h lists them), counted up to 100,000 a state, read at most every 30s.", []string{"state"}, nil)
)

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descUp, descOpMatched, descOpProcessed, descOpFailed, descGroupJobs, descGroups, descExpiring} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.ctl.Counts(ctx, "")
	if err != nil {
		c.fail("counts", err)
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	c.out.Succeed()
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	for q, states := range counts.Queues {
		for st, n := range states {
			ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n), q, string(st))
		}
	}
	page, err := c.ctl.Operations(ctx, engine.MaxListLimit, "")
	if err != nil {
		c.fail("operations", err)
		return
	}
	for _, op := range page.Operations {
		// A halted canary run is not over: it waits for an operator.
		if op.Status != engine.OperationPending && op.Status != engine.OperationRunning && op.Status != engine.OperationHalted {
			continue
		}
		labels := []string{op.ID, string(op.Action), string(op.Status)}
		ch <- prometheus.MustNewConstMetric(descOpMatched, prometheus.GaugeValue, float64(op.Matched), labels...)
		ch <- prometheus.MustNewConstMetric(descOpProcessed, prometheus.GaugeValue, float64(op.Processed), labels...)
		ch <- prometheus.MustNewConstMetric(descOpFailed, prometheus.GaugeValue, float64(op.Failed), labels...)
	}
	g, err := c.groupTally(ctx)
	if err != nil {
		c.fail("error groups", err)
		return
	}
	// Every status has its series, zero too, so that an alert on open
	// groups sees 0, not nothing, once they are resolved.
	for _, st := range engine.GroupStatuses {
		ch <- prometheus.MustNewConstMetric(descGroupJobs, prometheus.GaugeValue, float64(g.jobs[st]), string(st))
		ch <- prometheus.MustNewConstMetric(descGroups, prometheus.GaugeValue, float64(g.groups[st]), string(st))
	}
	for _, st := range engine.ExpiringStates {
		ch <- prometheus.MustNewConstMetric(descExpiring, prometheus.GaugeValue, float64(g.expiring[st]), string(st))
	}
}

// groupTally reads the error groups, the ignored ones too, and sums them
// by status; a read younger than groupsEvery serves again.
func (c *engineCollector) groupTally(ctx context.Context) (*groupTally, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups != nil && time.Since(c.groups.at) < groupsEvery {
		return c.groups, nil
	}
	gs, err := c.ctl.ListErrorGroups(ctx, engine.ListErrorGroupsParams{Ignored: true})
	if err != nil {
		return nil, err
	}
	g := &groupTally{at: time.Now(), jobs: map[engine.GroupStatus]int64{}, groups: map[engine.GroupStatus]int64{}}
	for _, eg := range gs {
		g.jobs[eg.Status] += eg.Count
		g.groups[eg.Status]++
	}
	// The jobs retention deletes within the engine's warning window.
	window := engine.DefaultExpiryWarning
	if m, err := c.ctl.Meta(ctx); err == nil && m.Retention != nil && m.Retention.Warning > 0 {
		window = m.Retention.Warning
	}
	counts, err := c.ctl.CountJobs(ctx, engine.CountJobsParams{
		Filter: engine.Filter{States: engine.ExpiringStates, ExpiresWithin: &window}, Max: expiringMax})
	if err != nil {
		return nil, fmt.Errorf("expiring jobs: %w", err)
	}
	g.expiring = counts.States
	c.groups = g
	return g, nil
}
