package main

// The pressure scenario: a PostgreSQL store at a fixed offered rate through
// the phases that hurt PostgreSQL queues most, composed as the independent
// benchmark hardbyte/postgresql-job-queue-benchmarking composes them
// (docs/method.md): clean, one idle transaction holding an XID, recovery,
// REPEATABLE READ readers scanning the jobs table, and 1.5x the rate.
//
// The producer is open loop: what is offered does not wait for the queue,
// so a store that falls behind shows a backlog instead of a slower
// producer. Pickup latency is handler start (this process's clock) minus
// the job's created_at, which the insert statement takes from the server's
// clock_timestamp(); both clocks are this machine's.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/storeurl"
)

type pressureOptions struct {
	store        string
	private      bool
	durable      bool
	rate         float64
	workers      int
	queue        string
	label        string
	scale        float64
	clean        time.Duration
	idle         time.Duration
	recovery     time.Duration
	readers      time.Duration
	high         time.Duration
	highMult     float64
	readerCount  int
	readerTx     time.Duration
	inserters    int
	sampleEvery  time.Duration
	explainEvery time.Duration
	explainLimit int
	explainOut   string
	explainPlan  string
	storeParams  string
	timeline     string
	drainMax     time.Duration
	keep         bool
	timeout      time.Duration
}

func newBenchPressureCmd(lo *cmdline.LogOptions) *cobra.Command {
	o := &pressureOptions{}
	cmd := &cobra.Command{
		Use:   "pressure",
		Short: "PostgreSQL at a fixed offered rate through an idle XID, readers and 1.5x load",
		Long: `Run an engine with --workers slots on a PostgreSQL store while a producer
enqueues no-op jobs at --rate jobs/s (open loop: it does not slow down when
the queue falls behind), through five phases: clean; idle_xid (one
connection runs BEGIN; SELECT txid_current(); and stays idle, so vacuum
cannot reclaim dead tuples); recovery; readers (--reader-count REPEATABLE
READ transactions, overlapping, each scanning the jobs table again and
again); high_load (--high-mult times the rate). After the last phase the
producer keeps the base rate until the backlog is back to its clean level.

--private starts a cluster of its own (internal/pgcluster) so that the idle
XID holds back no one else's vacuum; without it --store names the server
and the scenario works in a new schema of its own, dropped at the end.

Prints one key=value result line per phase on stdout; progress on stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchPressure(cmd.Context(), o, lo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "", "postgres:// URL of the server (not with --private); a new schema is made in it")
	f.BoolVar(&o.private, "private", false, "start a private PostgreSQL cluster and run there (the idle XID harms no one else)")
	f.BoolVar(&o.durable, "durable", true, "with --private: keep fsync and full_page_writes on (PostgreSQL's defaults)")
	f.Float64Var(&o.rate, "rate", 2000, "offered rate, jobs/s")
	f.IntVar(&o.workers, "workers", 50, "jobs run at once (the queue's concurrency)")
	f.StringVar(&o.queue, "queue", "pressure", "queue name")
	f.StringVar(&o.label, "label", "main", "free-form variant label echoed in the result lines")
	f.Float64Var(&o.scale, "scale", 1, "multiplies every phase duration (0.02: 6 s clean phases)")
	f.DurationVar(&o.clean, "clean", 5*time.Minute, "clean phase")
	f.DurationVar(&o.idle, "idle-xid", 10*time.Minute, "idle-transaction phase")
	f.DurationVar(&o.recovery, "recovery", 5*time.Minute, "recovery phase")
	f.DurationVar(&o.readers, "readers", 5*time.Minute, "REPEATABLE READ readers phase")
	f.DurationVar(&o.high, "high-load", 5*time.Minute, "high-load phase")
	f.Float64Var(&o.highMult, "high-mult", 1.5, "rate multiplier of the high-load phase")
	f.IntVar(&o.readerCount, "reader-count", 4, "REPEATABLE READ readers in the readers phase")
	f.DurationVar(&o.readerTx, "reader-tx", time.Minute, "how long each reader's transaction lasts before it starts another (scaled)")
	f.IntVar(&o.inserters, "inserters", 4, "producer goroutines sending EnqueueMany batches")
	f.DurationVar(&o.sampleEvery, "sample-every", 5*time.Second, "table statistics sampling period (timeline)")
	f.DurationVar(&o.explainEvery, "explain-every", 15*time.Second, "EXPLAIN (ANALYZE, BUFFERS) of the claim statement this often (0: never)")
	f.IntVar(&o.explainLimit, "explain-limit", 100, "the LIMIT of the sampled claim")
	f.StringVar(&o.explainPlan, "explain-plan", "generic", "the sampled claim's plan: generic (what the store's prepared statement ran, seen in this benchmark) or custom (planned for its parameters)")
	f.StringVar(&o.storeParams, "store-params", "", "more query parameters for the store URL, e.g. plan_cache_mode=force_custom_plan (a server setting of its connections)")
	f.StringVar(&o.explainOut, "explain-out", "", "write each sampled claim plan (JSON, one a line) to this file")
	f.StringVar(&o.timeline, "timeline", "", "write the samples (CSV) to this file")
	f.DurationVar(&o.drainMax, "drain-max", 5*time.Minute, "after the last phase, wait at most this long for the backlog to return to its clean level")
	f.BoolVar(&o.keep, "keep", false, "keep the schema (not with --private, whose cluster is removed)")
	f.DurationVar(&o.timeout, "timeout", 0, "overall timeout (0: the phases plus 20 minutes)")
	return cmd
}

// pressurePhase is one phase of the run.
type pressurePhase struct {
	name string
	dur  time.Duration
	mult float64 // of the offered rate
	// stress runs the phase's pressure until ctx ends.
	stress func(ctx context.Context) error

	offered, enqueued, handled int64
	start, end                 time.Time
	ownedEnd                   int64
	backlogEnd, backlogMax     int64
	catchup                    string
	stats                      tableStats
	xminAgeMax                 int64
	explains                   []claimExplain
	load1Start, load1End       float64
	lat                        []float32 // pickup latencies, ms
}

// pressureRun is the state the producer, the handler and the sampler share.
type pressureRun struct {
	o        *pressureOptions
	progress func(string, ...any)
	e        *engine.Engine // the workers'
	pe       *engine.Engine // the producer's
	admin    *pgxpool.Pool
	schema   string

	phases []*pressurePhase
	cur    atomic.Int32 // index into phases; len(phases) during the drain
	// cleanStart is the clean phase's start (unix ns, 0 before it), for
	// watch: the phases' own fields are written by run alone.
	cleanStart atomic.Int64

	// The producer: owed jobs are due and not yet sent.
	owed     atomic.Int64
	wake     chan struct{}
	offered  atomic.Int64
	enqueued atomic.Int64
	handled  atomic.Int64
	rateMult atomic.Uint64 // math.Float64bits

	latMu    sync.Mutex
	drainLat []float32

	claimSQL    string // the claim statement as the server saw it
	explainConn *pgx.Conn
	connURL     string

	tlMu     sync.Mutex
	timeline io.Writer
	explain  io.Writer
}

func runBenchPressure(ctx context.Context, o *pressureOptions, lo *cmdline.LogOptions, stdout, stderr io.Writer) error {
	// An interrupt ends the run through its defers, so the private
	// cluster is stopped and removed rather than left running.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &pressureRun{o: o, progress: benchProgress(stderr, "pressure"), wake: make(chan struct{}, 1)}
	err := r.run(ctx, lo, stderr)
	// One line per phase, the ones that ran (all of them when err is nil).
	for _, p := range r.phases {
		if p.end.IsZero() && err == nil {
			continue
		}
		res := r.header(p)
		if p.end.IsZero() {
			res.add("status", "error")
			res.add("error", strings.Join(strings.Fields(fmt.Sprint(err)), "_"))
			fmt.Fprintln(stdout, res.String())
			continue
		}
		r.phaseResult(p, &res)
		if err != nil {
			res.add("status", "error")
			res.add("error", strings.Join(strings.Fields(err.Error()), "_"))
		} else {
			res.add("status", "ok")
		}
		fmt.Fprintln(stdout, res.String())
	}
	if err != nil {
		if len(r.phases) == 0 {
			fmt.Fprintf(stdout, "system=sluice scenario=pressure status=error error=%s\n", strings.Join(strings.Fields(err.Error()), "_"))
		}
		return cmdline.ExitError{Code: 1}
	}
	return nil
}

func (r *pressureRun) header(p *pressurePhase) benchResult {
	var res benchResult
	res.add("system", "sluice")
	res.add("scenario", "pressure")
	res.add("label", r.o.label)
	res.add("phase", p.name)
	res.add("phase_seconds", p.dur)
	res.add("rate_offered", r.o.rate*p.mult)
	res.add("workers", r.o.workers)
	res.add("lib", libVersion())
	res.add("go", runtime.Version())
	res.add("gomaxprocs", runtime.GOMAXPROCS(0))
	res.add("store", "postgres")
	res.add("private", r.o.private)
	return res
}

func (r *pressureRun) phaseResult(p *pressurePhase, res *benchResult) {
	secs := p.end.Sub(p.start).Seconds()
	res.add("load1_start", p.load1Start)
	res.add("load1_end", p.load1End)
	res.add("offered", p.offered)
	res.add("enqueued", p.enqueued)
	res.add("enqueue_per_sec", float64(p.enqueued)/secs)
	res.add("producer_owed_end", p.ownedEnd)
	res.add("completed", p.handled)
	res.add("completed_per_sec", float64(p.handled)/secs)
	// Keeping up: completions within 1% of what was offered in the phase.
	res.add("keeps_up", p.offered > 0 && float64(p.handled) >= 0.99*float64(p.offered))
	res.add("backlog_end", p.backlogEnd)
	res.add("backlog_max", p.backlogMax)
	lat := append([]float32(nil), p.lat...)
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	res.add("pickup_p50_ms", quantile32(lat, 0.50))
	res.add("pickup_p99_ms", quantile32(lat, 0.99))
	res.add("pickup_max_ms", quantile32(lat, 1))
	res.add("catchup_seconds", p.catchup)
	s := p.stats
	res.add("jobs_live", s.jobs.live)
	res.add("jobs_dead", s.jobs.dead)
	res.add("jobs_autovacuum", s.jobs.autovacuum)
	res.add("jobs_heap_mb", float64(s.jobs.heap)/(1<<20))
	res.add("jobs_total_mb", float64(s.jobs.total)/(1<<20))
	res.add("jobs_indexes_mb", s.indexes)
	res.add("counts_dead", s.counts.dead)
	res.add("counts_total_mb", float64(s.counts.total)/(1<<20))
	res.add("other_dead", s.otherDead)
	res.add("xmin_age_max", p.xminAgeMax)
	res.add("claim_plan", r.o.explainPlan)
	res.add("claim_explains", len(p.explains))
	first, last, most, cLast, cMost, ms, msMost := "na", "na", "na", "na", "na", "na", "na"
	if n := len(p.explains); n > 0 {
		first, last = fmt.Sprint(p.explains[0].pickBuffers), fmt.Sprint(p.explains[n-1].pickBuffers)
		m, c, t := int64(0), int64(0), 0.0
		for _, x := range p.explains {
			m, c, t = max(m, x.pickBuffers), max(c, x.buffers), max(t, x.execMS)
		}
		most, cLast, cMost = fmt.Sprint(m), fmt.Sprint(p.explains[n-1].buffers), fmt.Sprint(c)
		ms, msMost = fmt.Sprintf("%.3f", p.explains[n-1].execMS), fmt.Sprintf("%.3f", t)
	}
	res.add("pick_buffers_first", first)
	res.add("pick_buffers_last", last)
	res.add("pick_buffers_max", most)
	res.add("claim_buffers_last", cLast)
	res.add("claim_buffers_max", cMost)
	res.add("claim_ms_last", ms)
	res.add("claim_ms_max", msMost)
}

// quantile32 is the q-quantile of sorted xs (nearest rank), 0 when empty.
func quantile32(xs []float32, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return float64(xs[min(max(i, 0), len(xs)-1)])
}

func (r *pressureRun) run(ctx context.Context, lo *cmdline.LogOptions, stderr io.Writer) error {
	o := r.o
	if o.rate <= 0 || o.workers <= 0 || o.scale <= 0 || o.inserters <= 0 || o.readerCount < 0 {
		return errors.New("--rate, --workers, --scale and --inserters must be positive")
	}
	if o.explainPlan != "generic" && o.explainPlan != "custom" {
		return errors.New("--explain-plan is generic or custom")
	}
	if o.private == (o.store != "") {
		return errors.New("give one of --store postgres://… and --private")
	}
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * o.scale) }
	r.phases = []*pressurePhase{
		{name: "clean", dur: scaled(o.clean), mult: 1},
		{name: "idle_xid", dur: scaled(o.idle), mult: 1, stress: r.idleXID},
		{name: "recovery", dur: scaled(o.recovery), mult: 1},
		{name: "readers", dur: scaled(o.readers), mult: 1, stress: r.readersPhase},
		{name: "high_load", dur: scaled(o.high), mult: o.highMult},
	}
	total := time.Duration(0)
	for _, p := range r.phases {
		total += p.dur
	}
	timeout := o.timeout
	if timeout <= 0 {
		timeout = total + scaled(o.drainMax) + 20*time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log, closeLog, err := lo.Logger(stderr)
	if err != nil {
		return err
	}
	defer closeLog()

	// The server: a private cluster, or a new schema on the one named.
	base := o.store
	r.schema = pgcluster.NewSchemaName("sluice_pressure")
	if o.private {
		r.progress("starting a private PostgreSQL cluster")
		c, err := pgcluster.Start(ctx, pgcluster.Options{
			Durable: o.durable,
			// The claim statement is longer than the default 1 kB of
			// pg_stat_activity.query; the EXPLAIN samples read it there.
			// pg_stat_statements: each phase's costliest statements
			// (statementsOfPhase).
			Settings: map[string]string{"track_activity_query_size": "65536",
				"shared_preload_libraries": "pg_stat_statements"},
			Log: stderr,
		})
		if err != nil {
			return fmt.Errorf("private cluster: %w", err)
		}
		defer c.Close()
		base = c.URL()
		r.progress("private cluster on port %d (%s)", c.Port(), c.Dir())
	} else if t, err := storeurl.Parse(base); err != nil {
		return err
	} else if t.Backend != "postgres" {
		return fmt.Errorf("pressure runs on PostgreSQL only, not %s", t.Backend)
	}
	connURL, err := plainPostgresURL(base)
	if err != nil {
		return err
	}
	r.connURL = connURL
	// A connection for each reader and the idle transaction, and more
	// for the sampler: with pgxpool's default of 4 the readers held them
	// all and the sampling stopped for their phase.
	pc, err := pgxpool.ParseConfig(connURL + "&application_name=sluice-pressure-admin")
	if err != nil {
		return fmt.Errorf("admin pool: %w", err)
	}
	pc.MaxConns = int32(o.readerCount + 4)
	r.admin, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("admin pool: %w", err)
	}
	defer r.admin.Close()
	defer func() {
		if r.explainConn != nil {
			r.explainConn.Close(context.WithoutCancel(ctx))
		}
	}()
	if !o.private && !o.keep {
		defer func() {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer dcancel()
			if _, err := r.admin.Exec(dctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{r.schema}.Sanitize()+" CASCADE"); err != nil {
				r.progress("drop schema %s: %v", r.schema, err)
			}
		}()
	}
	storeURL := pgcluster.Migrating(pgcluster.WithSchema(base, r.schema))
	if o.storeParams != "" {
		storeURL += "&" + o.storeParams
	}
	store, err := storeurl.Open(ctx, storeURL, log)
	if err != nil {
		return err
	}
	defer store.Close()

	if o.timeline != "" {
		f, err := os.Create(o.timeline)
		if err != nil {
			return fmt.Errorf("timeline: %w", err)
		}
		defer f.Close()
		r.timeline = f
		fmt.Fprintln(f, "t_seconds,phase,offered,enqueued,completed,backlog,producer_owed,jobs_live,jobs_dead,jobs_autovacuum,jobs_total_mb,claim_index_mb,xmin_age,pick_buffers,claim_buffers,claim_ms")
	}
	if o.explainOut != "" {
		f, err := os.Create(o.explainOut)
		if err != nil {
			return fmt.Errorf("explain out: %w", err)
		}
		defer f.Close()
		r.explain = f
	}

	// The producer has a store and an engine of its own, as a producing
	// process would: sharing the workers' pool, its inserts took the
	// connections the claims and acknowledgements wait for. Its engine
	// is never started; it only enqueues, and the workers hear of its
	// jobs the way another process's are heard of.
	pstore, err := storeurl.Open(ctx, storeURL, log)
	if err != nil {
		return err
	}
	defer pstore.Close()
	if r.pe, err = engine.New(pstore, engine.Config{Logger: log}); err != nil {
		return err
	}
	r.e, err = engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{o.queue: {Concurrency: o.workers}},
		Logger: log,
	})
	if err != nil {
		return err
	}
	err = r.e.Register(engine.Kind{Name: benchKind, Handler: func(_ context.Context, j *engine.Job) error {
		ms := float32(time.Since(j.CreatedAt).Seconds() * 1000)
		r.latMu.Lock()
		if i := int(r.cur.Load()); i < len(r.phases) {
			r.phases[i].lat = append(r.phases[i].lat, ms)
		} else {
			r.drainLat = append(r.drainLat, ms)
		}
		r.latMu.Unlock()
		r.handled.Add(1)
		return nil
	}})
	if err != nil {
		return err
	}
	if err := r.e.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	engineStopped := false
	defer func() {
		if !engineStopped {
			_ = stopEngine(ctx, r.e)
		}
	}()

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var bg sync.WaitGroup
	errc := make(chan error, o.inserters+4)
	r.rateMult.Store(math.Float64bits(1))
	bg.Add(1)
	go func() { defer bg.Done(); r.schedule(runCtx) }()
	for range o.inserters {
		bg.Add(1)
		go func() {
			defer bg.Done()
			if err := r.insert(runCtx); err != nil && runCtx.Err() == nil {
				errc <- err
			}
		}()
	}
	var backlog backlogWatch
	bg.Add(1)
	go func() { defer bg.Done(); r.watch(runCtx, &backlog) }()
	bg.Add(1)
	go func() {
		defer bg.Done()
		if err := r.sample(runCtx); err != nil && runCtx.Err() == nil {
			errc <- err
		}
	}()
	failed := func() error {
		select {
		case err := <-errc:
			return err
		default:
			return nil
		}
	}

	t0 := time.Now()
	for i, p := range r.phases {
		r.latMu.Lock()
		r.cur.Store(int32(i))
		r.latMu.Unlock()
		r.rateMult.Store(math.Float64bits(p.mult))
		p.start, p.load1Start = time.Now(), load1()
		if i == 0 {
			r.cleanStart.Store(p.start.UnixNano())
		}
		off0, enq0, h0 := r.offered.Load(), r.enqueued.Load(), r.handled.Load()
		backlog.startPhase(i)
		r.resetStatements(ctx)
		r.progress("phase %s for %s at %.0f jobs/s (t=%s)", p.name, p.dur, o.rate*p.mult, time.Since(t0).Round(time.Second))
		pctx, pcancel := context.WithTimeout(runCtx, p.dur)
		stressErr := make(chan error, 1)
		if p.stress != nil {
			go func() { stressErr <- p.stress(pctx) }()
		} else {
			stressErr <- nil
		}
		<-pctx.Done()
		pcancel()
		if err := <-stressErr; err != nil {
			return fmt.Errorf("phase %s: %w", p.name, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := failed(); err != nil {
			return err
		}
		p.end, p.load1End = time.Now(), load1()
		p.offered, p.enqueued, p.handled = r.offered.Load()-off0, r.enqueued.Load()-enq0, r.handled.Load()-h0
		p.ownedEnd = r.owed.Load()
		p.backlogEnd = r.enqueued.Load() + r.owed.Load() - r.handled.Load()
		p.backlogMax = backlog.phaseMax(i)
		if i == 0 {
			backlog.setBaseline()
			p.catchup = "0"
		}
		backlog.endPhase(i, p.end)
		if p.stats, err = r.tableStats(ctx); err != nil {
			return err
		}
		r.progress("phase %s done: %d offered, %d completed, backlog %d (max %d), jobs dead tuples %d, jobs %.1f MB",
			p.name, p.offered, p.handled, p.backlogEnd, p.backlogMax, p.stats.jobs.dead, float64(p.stats.jobs.total)/(1<<20))
		r.statementsOfPhase(ctx, p.name)
	}
	// The drain: the base rate again, until the last phase has caught up.
	r.latMu.Lock()
	r.cur.Store(int32(len(r.phases)))
	r.latMu.Unlock()
	r.rateMult.Store(math.Float64bits(1))
	r.progress("drain at %.0f jobs/s until the backlog is back to its clean level (at most %s)", o.rate, scaled(o.drainMax))
	deadline := time.Now().Add(scaled(o.drainMax))
	for backlog.pending() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	backlog.finish()
	for i, p := range r.phases {
		if i > 0 {
			p.catchup = backlog.catchup(i)
		}
	}
	// Stop offering, let the engine finish what was sent, and check the
	// store completed every job the handler saw.
	stopRun()
	bg.Wait()
	if err := failed(); err != nil {
		return err
	}
	// What is still queued when the drain's time is up stays available:
	// a store that never caught up would otherwise keep the run for hours.
	for r.handled.Load() < r.enqueued.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	if left := r.enqueued.Load() - r.handled.Load(); left > 0 {
		r.progress("drain time is up with %d jobs not yet run; stopping", left)
	}
	engineStopped = true
	if err := stopEngine(ctx, r.e); err != nil {
		return err
	}
	var completed int64
	if err := r.admin.QueryRow(ctx, r.sql("SELECT count(*) FROM {s}.jobs WHERE state = 'completed'")).Scan(&completed); err != nil {
		return fmt.Errorf("count completed: %w", err)
	}
	r.latMu.Lock()
	drainLat := append([]float32(nil), r.drainLat...)
	r.latMu.Unlock()
	sort.Slice(drainLat, func(a, b int) bool { return drainLat[a] < drainLat[b] })
	r.progress("drained: %d enqueued, %d handled, %d completed in the store; drain pickup p99 %.1f ms",
		r.enqueued.Load(), r.handled.Load(), completed, quantile32(drainLat, 0.99))
	if completed != r.handled.Load() {
		return fmt.Errorf("the store has %d completed jobs, the handler ran %d", completed, r.handled.Load())
	}
	return nil
}

// sql names the run's schema in q's {s}.
func (r *pressureRun) sql(q string) string {
	return strings.ReplaceAll(q, "{s}", pgx.Identifier{r.schema}.Sanitize())
}

// plainPostgresURL strips the store's own parameters (schema, migrate,
// listen_url), which pgx would send to the server as settings.
func plainPostgresURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("store url: %w", err)
	}
	q := u.Query()
	for _, k := range []string{"schema", "migrate", "listen_url", "application_name"} {
		q.Del(k)
	}
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// schedule makes jobs due at the offered rate: every tick it owes the
// inserters what the rate has accrued since the last, whatever they have
// managed to send (open loop).
func (r *pressureRun) schedule(ctx context.Context) {
	const tick = 5 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	acc := 0.0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			acc += now.Sub(last).Seconds() * r.o.rate * math.Float64frombits(r.rateMult.Load())
			last = now
			if n := int64(acc); n > 0 {
				acc -= float64(n)
				r.offered.Add(n)
				r.owed.Add(n)
				select {
				case r.wake <- struct{}{}:
				default:
				}
			}
		}
	}
}

// insert sends owed jobs in batches until ctx ends.
func (r *pressureRun) insert(ctx context.Context) error {
	const most = 500
	ps := make([]engine.EnqueueParams, 0, most)
	for {
		n := r.owed.Load()
		if n <= 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-r.wake:
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		k := min(n, most)
		if !r.owed.CompareAndSwap(n, n-k) {
			continue
		}
		// Wake another inserter while this one sends: the rest may be due.
		if n > k {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
		ps = ps[:0]
		for range k {
			ps = append(ps, engine.EnqueueParams{Queue: r.o.queue, Kind: benchKind, Payload: []byte(`{}`)})
		}
		rs, err := r.pe.EnqueueMany(ctx, ps)
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		for _, x := range rs {
			if x.Err != nil {
				return fmt.Errorf("enqueue: %w", x.Err)
			}
		}
		r.enqueued.Add(k)
	}
}

// backlogWatch follows the backlog (jobs offered and not yet handled,
// those the producer still owes included) for the per-phase maximum and
// the catch-up times.
type backlogWatch struct {
	mu       sync.Mutex
	phase    int
	maxes    map[int]int64
	baseline int64
	based    bool
	cleanLvl []int64 // clean-phase samples, second half
	ended    map[int]time.Time
	caught   map[int]time.Duration
	done     bool
}

func (b *backlogWatch) startPhase(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.maxes == nil {
		b.maxes, b.ended, b.caught = map[int]int64{}, map[int]time.Time{}, map[int]time.Duration{}
	}
	b.phase = i
}

func (b *backlogWatch) phaseMax(i int) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxes[i]
}

// setBaseline fixes the clean level: the highest backlog seen in the
// second half of the clean phase (the first half absorbs the start).
func (b *backlogWatch) setBaseline() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, v := range b.cleanLvl {
		b.baseline = max(b.baseline, v)
	}
	b.based = true
}

func (b *backlogWatch) endPhase(i int, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i > 0 {
		b.ended[i] = at
	}
}

// observe takes one backlog sample.
func (b *backlogWatch) observe(v int64, at time.Time, cleanSecondHalf bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.maxes == nil || b.done {
		return
	}
	b.maxes[b.phase] = max(b.maxes[b.phase], v)
	if cleanSecondHalf {
		b.cleanLvl = append(b.cleanLvl, v)
	}
	if !b.based || v > b.baseline {
		return
	}
	for i, end := range b.ended {
		if _, ok := b.caught[i]; !ok {
			b.caught[i] = at.Sub(end)
		}
	}
}

// pending reports whether a phase that ended has not caught up yet.
func (b *backlogWatch) pending() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.caught) < len(b.ended)
}

func (b *backlogWatch) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
}

// catchup is how long after phase i ended the backlog was back to the
// clean level, "never" when it was not by the end of the drain.
func (b *backlogWatch) catchup(i int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.caught[i]
	if !ok {
		return "never"
	}
	return fmt.Sprintf("%.1f", d.Seconds())
}

// watch samples the backlog every 100 ms.
func (r *pressureRun) watch(ctx context.Context, b *backlogWatch) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			v := r.enqueued.Load() + r.owed.Load() - r.handled.Load()
			clean := false
			if r.cur.Load() == 0 {
				if at := r.cleanStart.Load(); at != 0 {
					clean = now.Sub(time.Unix(0, at)) > r.phases[0].dur/2
				}
			}
			b.observe(v, now, clean)
		}
	}
}

// idleXID holds one transaction with an XID, idle, until ctx ends: vacuum
// can then reclaim no tuple that died after it began.
func (r *pressureRun) idleXID(ctx context.Context) error {
	c, err := r.admin.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("idle xid: %w", err)
	}
	defer c.Release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("idle xid: %w", err)
	}
	var xid int64
	if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return fmt.Errorf("idle xid: %w", err)
	}
	r.progress("idle transaction holds xid %d", xid)
	<-ctx.Done()
	if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("idle xid: rollback: %w", err)
	}
	return nil
}

// readersPhase runs the REPEATABLE READ readers until ctx ends. Each
// scans the jobs table again and again in one transaction and starts a
// new one every --reader-tx; reader i's first lasts (i+1)/n of that, so
// their snapshots overlap and one is always old.
func (r *pressureRun) readersPhase(ctx context.Context) error {
	n := r.o.readerCount
	txLen := time.Duration(float64(r.o.readerTx) * r.o.scale)
	var wg sync.WaitGroup
	errc := make(chan error, n)
	var scans atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.reader(ctx, time.Duration(float64(txLen)*float64(i+1)/float64(n)), txLen, &scans); err != nil && ctx.Err() == nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	r.progress("readers: %d scans of the jobs table", scans.Load())
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func (r *pressureRun) reader(ctx context.Context, first, every time.Duration, scans *atomic.Int64) error {
	c, err := r.admin.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("reader: %w", err)
	}
	defer c.Release()
	q := r.sql("SELECT state, count(*), max(created_at) FROM {s}.jobs GROUP BY state")
	txLen := first
	for ctx.Err() == nil {
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("reader: %w", err)
		}
		end := time.Now().Add(txLen)
		for time.Now().Before(end) && ctx.Err() == nil {
			rows, err := tx.Query(ctx, q)
			if err == nil {
				for rows.Next() {
				}
				rows.Close()
				err = rows.Err()
			}
			if err != nil {
				_ = tx.Rollback(context.WithoutCancel(ctx))
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("reader scan: %w", err)
			}
			scans.Add(1)
		}
		_ = tx.Rollback(context.WithoutCancel(ctx))
		txLen = every
	}
	return nil
}

func (r *pressureRun) phaseName() string {
	if i := int(r.cur.Load()); i < len(r.phases) {
		return r.phases[i].name
	}
	return "drain"
}
