package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// The deadletter scenario of the peer harness for River and asynq
// (bench/peers):
// N jobs whose handler always fails with one attempt, timed until all are
// dead; then, with the workers stopped, the operator's side through
// engine.Control (the embedded engine, as `sluice tui --store` and `sluice
// bulk --store` use it): list pages, counts, error groups, a bulk dry run,
// and a real bulk retry of every dead job driven to its end the way
// `sluice bulk retry --store` drives it.

type benchDeadOptions struct {
	benchOptions
	listCalls int
	pageSize  int
	noRetry   bool
	reuse     bool
	seed      string
}

func newBenchDeadLetterCmd(lo *cmdline.LogOptions) *cobra.Command {
	o := &benchDeadOptions{}
	cmd := &cobra.Command{
		Use:   "deadletter",
		Short: "Kill N jobs, then time lists, counts, a dry run and a bulk retry of all of them",
		Long: `Reset the store (a SQLite file named by --store is deleted first), insert N
jobs of three kinds with small payloads whose handler always fails (max
attempts 1, five error groups), and time until the store holds all N
archived. Then stop the workers and measure the operator's side through
engine.Control on an engine without workers, as "sluice bulk --store" opens
one: the first page of 50 archived jobs and a page at the end of the list
(medians of --list-calls calls), Counts, ErrorGroups, a bulk dry run (the
exact count), and a bulk retry of every archived job, created with Bulk and
driven to its end by this process (RunOperation, as "sluice bulk retry
--store" does). Every job must then be available, retried exactly once.

Seeding a million dead jobs through the handlers takes minutes: --no-retry
stops before the retry and leaves them in place, and --reuse keeps the
store and skips the seeding when it holds exactly those N dead jobs (a
copy of a --no-retry run's file can be measured again and again).

Prints one key=value result line on stdout with the peer harness's keys
(the harness for River and asynq, bench/peers); progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchDeadLetter(cmd.Context(), o, lo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.addFlags(cmd, time.Hour)
	f.IntVar(&o.listCalls, "list-calls", 20, "calls per list and counts measurement (the median is reported)")
	f.IntVar(&o.pageSize, "page-size", 50, "rows per list page")
	f.BoolVar(&o.noRetry, "no-retry", false, "stop before the bulk retry (leave the dead jobs in place)")
	f.StringVar(&o.seed, "seed", "auto", "how to seed the dead jobs: handlers (failing handlers), deadline (claims archive jobs past their deadline, a thousand a statement), auto (handlers on SQLite, deadline elsewhere)")
	f.BoolVar(&o.reuse, "reuse", false, "keep the store; if it holds the N dead jobs a --no-retry run left (or a copy of them), skip the seeding")
	return cmd
}

func runBenchDeadLetter(ctx context.Context, o *benchDeadOptions, lo *cmdline.LogOptions, stdout, stderr io.Writer) error {
	res := benchHeader("deadletter", &o.benchOptions)
	return printBenchResult(stdout, &res, benchDeadLetter(ctx, o, lo, stderr, &res))
}

// deadKinds are the kinds of the scenario, each with a small payload and
// failures that fall into a few error groups (numbers, addresses and ids
// vary from job to job; engine.NormalizeError masks them).
var deadKinds = []struct {
	name    string
	payload func(i int) string
	errs    []func(i int) string
}{
	{
		name: "email.send",
		payload: func(i int) string {
			return fmt.Sprintf(`{"to":"customer%d@example.com","template":"invoice_ready","locale":"en-GB","invoice_id":"INV-2026-%06d"}`, i%50000, i)
		},
		errs: []func(i int) string{
			func(i int) string {
				return fmt.Sprintf("smtp: 550 5.1.1 <customer%d@example.com>: mailbox unavailable", i%50000)
			},
			func(i int) string {
				return fmt.Sprintf("dial tcp 10.0.%d.%d:587: connect: connection refused", i%4, 10+i%200)
			},
		},
	},
	{
		name: "billing.charge",
		payload: func(i int) string {
			return fmt.Sprintf(`{"customer_id":%d,"amount_cents":%d,"currency":"EUR","invoice_id":"INV-2026-%06d"}`, 100000+i%90000, 500+i%9500, i)
		},
		errs: []func(i int) string{
			func(i int) string {
				return fmt.Sprintf("card declined for customer %d: insufficient funds (code 51)", 100000+i%90000)
			},
			func(i int) string {
				return fmt.Sprintf("POST https://api.payments.example.com/v1/charges: context deadline exceeded after %ds", 10+i%20)
			},
		},
	},
	{
		name: "webhook.deliver",
		payload: func(i int) string {
			return fmt.Sprintf(`{"endpoint":"https://hooks.example.net/t/%d","event":"invoice.paid","delivery":%d}`, i%3000, i)
		},
		errs: []func(i int) string{
			func(i int) string {
				return fmt.Sprintf("webhook endpoint %d answered 503 Service Unavailable after %dms", i%3000, 100+i%900)
			},
		},
	},
}

// deadIndex reads the job's sequence number back from its payload's last
// number, so that the handler's error depends on the job alone.
func deadIndex(p []byte) int {
	end := len(p) - 1
	for end >= 0 && (p[end] < '0' || p[end] > '9') {
		end--
	}
	start := end
	for start > 0 && p[start-1] >= '0' && p[start-1] <= '9' {
		start--
	}
	n, _ := strconv.Atoi(string(p[start : end+1]))
	return n
}

// deadSamples is how many jobs, spread over all N, are read back after the
// retry to check their timelines.
const deadSamples = 200

func benchDeadLetter(ctx context.Context, o *benchDeadOptions, lo *cmdline.LogOptions, stderr io.Writer, res *benchResult) error {
	progress := benchProgress(stderr, "deadletter")
	if o.jobs <= 0 || o.concurrency <= 0 || o.batch <= 0 || o.insertConc <= 0 || o.listCalls <= 0 {
		return fmt.Errorf("--jobs, --concurrency, --batch, --insert-conc and --list-calls must be positive")
	}
	if o.pageSize < 1 || o.pageSize >= engine.MaxListLimit {
		return fmt.Errorf("--page-size must be 1–%d", engine.MaxListLimit-1)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	ctx = engine.WithActor(ctx, "bench")
	log, closeLog, err := lo.Logger(stderr)
	if err != nil {
		return err
	}
	defer closeLog()

	target, err := benchStore(o.store, res)
	if err != nil {
		return err
	}
	res.add("insert_batch", o.batch)
	res.add("insert_conc", o.insertConc)
	res.add("kinds", len(deadKinds))
	if target.Backend == "sqlite" && !o.reuse {
		if err := removeSQLiteFile(target.Path); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	store, err := storeurl.Open(ctx, o.store, log)
	if err != nil {
		return err
	}
	defer store.Close()

	// ---- The dead jobs ----
	n := int64(o.jobs)
	have, err := deadHave(ctx, store, o.queue, n)
	if err != nil {
		return err
	}
	probe, err := newRedisProbe(store)
	if err != nil {
		return err
	}
	defer probe.close()
	var samples []string
	memPerJob := "na"
	if have {
		// --reuse on a store a run with --no-retry left: its dead jobs.
		progress("%s holds %d dead jobs: reusing them", redact.URL(o.store), n)
		res.add("seeded", "reused")
	} else {
		how, err := deadSeedHow(o.seed, target.Backend)
		if err != nil {
			return err
		}
		res.add("seeded", how)
		var mem0 int64
		if probe != nil {
			if mem0, err = probe.usedMemory(ctx); err != nil {
				return err
			}
		}
		if how == "deadline" {
			samples, err = benchDeadSeedDeadline(ctx, store, o, progress, res)
		} else {
			samples, err = benchDeadSeed(ctx, store, o, log, progress, res)
		}
		if err != nil {
			return err
		}
		if probe != nil {
			// The server's memory for the dead jobs (other clients' keys
			// change it too: the shared server's figure is approximate).
			mem1, err := probe.usedMemory(ctx)
			if err != nil {
				return err
			}
			memPerJob = fmt.Sprintf("%.1f", float64(mem1-mem0)/float64(n))
		}
	}
	res.add("redis_used_memory_per_dead_job", memPerJob)

	// ---- The operator's side, workers stopped ----
	// An engine without workers or maintenance, as the CLI opens on a
	// store; the bulk retry below is driven by this process.
	timed := &batchTimer{Store: store}
	e, err := engine.New(timed, engine.Config{NoMaintenance: true, Logger: log})
	if err != nil {
		return err
	}
	var ctl engine.Control = e
	dead := engine.Filter{States: []engine.State{engine.StateArchived}}
	// The dry run and the retry take the scenario's queue only: a store
	// the api scenario ran on holds its demo jobs too.
	deadQ := engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{o.queue}}

	counts, err := ctl.Counts(ctx, "")
	if err != nil {
		return fmt.Errorf("counts: %w", err)
	}
	retained := counts.Queues[o.queue][engine.StateArchived]
	res.add("dead_retained", retained)

	progress("list the first page of %d dead jobs x%d", o.pageSize, o.listCalls)
	rows := 0
	first, err := deadMedian(o.listCalls, func() error {
		p, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: dead, Limit: o.pageSize})
		if p != nil {
			rows = len(p.Jobs)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("list first page: %w", err)
	}
	deadAddMs(res, "list_first_p50_ms", first)
	res.add("list_first_rows", rows)

	// The deep page: the last page of the list (the oldest dead jobs). Its
	// cursor is the keyset of the (page+1)-th oldest job, found by one
	// call that pages back from the start of time (a prev cursor), as the
	// river harness builds its cursor from a job near the end.
	start := engine.Cursor{At: time.Unix(0, 0), ID: "0", Dir: engine.CursorPrev}.Encode()
	oldest, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: dead, Cursor: start, Limit: o.pageSize + 1})
	if err != nil {
		return fmt.Errorf("list oldest: %w", err)
	}
	if len(oldest.Jobs) == 0 {
		return fmt.Errorf("list oldest: no dead jobs")
	}
	edge := oldest.Jobs[0] // newest first: the (page+1)-th oldest
	deep := engine.Cursor{At: edge.StateChangedAt, ID: edge.ID, Dir: engine.CursorNext}.Encode()
	progress("list the last page x%d", o.listCalls)
	deepP50, err := deadMedian(o.listCalls, func() error {
		p, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: dead, Cursor: deep, Limit: o.pageSize})
		if p != nil {
			rows = len(p.Jobs)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("list deep page: %w", err)
	}
	res.add("list_deep_how", fmt.Sprintf("cursor_after_%d_oldest", len(oldest.Jobs)))
	if samples == nil {
		// Reused dead jobs: check the newest and the oldest pages' jobs.
		newest, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: dead, Limit: engine.MaxListLimit})
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		for _, j := range slices.Concat(newest.Jobs, oldest.Jobs) {
			samples = append(samples, j.ID)
		}
	}
	deadAddMs(res, "list_deep_p50_ms", deepP50)
	res.add("list_deep_rows", rows)

	countsP50, err := deadMedian(o.listCalls, func() error {
		_, err := ctl.Counts(ctx, "")
		return err
	})
	if err != nil {
		return fmt.Errorf("counts: %w", err)
	}
	deadAddMs(res, "counts_p50_ms", countsP50)

	progress("error groups x5")
	groups := 0
	groupsP50, err := deadMedian(5, func() error {
		gs, err := ctl.ErrorGroups(ctx, dead)
		groups = len(gs)
		return err
	})
	if err != nil {
		return fmt.Errorf("error groups: %w", err)
	}
	deadAddMs(res, "error_groups_p50_ms", groupsP50)
	res.add("error_groups", groups)

	progress("bulk retry dry run")
	t2 := time.Now()
	preview, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: deadQ, DryRun: true})
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	deadAddMs(res, "dry_run_ms", time.Since(t2))
	res.add("dry_run_matched", preview.Matched)
	res.add("dry_run_estimated", preview.Estimated)
	// The first dry run pays for its statements' first planning too:
	// the median of five more.
	dryP50, err := deadMedian(5, func() error {
		_, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: deadQ, DryRun: true})
		return err
	})
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	deadAddMs(res, "dry_run_p50_ms", dryP50)

	if o.noRetry {
		res.add("retry_all", "skipped")
		deadAddMB(res, "peak_rss_mb", selfHWM())
		return nil
	}

	// ---- The bulk retry, as `sluice bulk retry --store` runs it ----
	progress("bulk retry of every dead job")
	slowThreshold, slow0 := "na", int64(0)
	var redisCPU0 time.Duration
	if probe != nil {
		if slowThreshold, err = probe.threshold(ctx); err != nil {
			return err
		}
		if redisCPU0, err = probe.cpu(ctx); err != nil {
			return err
		}
		if slow0, err = probe.lastSlow(ctx); err != nil {
			return err
		}
	}
	pg := newPGProbe(store)
	var pgCPU0 map[uint32]time.Duration
	pgOK := false
	if pg != nil {
		pgCPU0, pgOK = pg.cpu(ctx)
	}
	rss := deadSampleRSS(100 * time.Millisecond)
	cpu0 := processCPU()
	t3 := time.Now()
	started, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: deadQ})
	if err != nil {
		rss()
		return fmt.Errorf("bulk retry: %w", err)
	}
	op, err := driveOperation(ctx, e, started.Operation.ID, stderr)
	retryDur := time.Since(t3)
	cpu := processCPU() - cpu0
	rssStart, rssMax, rssEnd := rss()
	if err != nil {
		return fmt.Errorf("bulk retry: %w", err)
	}
	res.add("retry_all_seconds", retryDur)
	res.add("retry_all_per_sec", float64(op.Succeeded)/retryDur.Seconds())
	res.add("retry_all_reported", op.Succeeded)
	if op.StartedAt != nil && op.FinishedAt != nil {
		// The operation's own run, by the store's clock: the batches only,
		// without Bulk's count before it.
		run := op.FinishedAt.Sub(*op.StartedAt)
		res.add("retry_run_seconds", run)
		res.add("retry_run_per_sec", float64(op.Succeeded)/run.Seconds())
	}
	// The process's CPU (the runner and SQLite's background checkpoints)
	// varies less with the machine's load than the elapsed time does.
	res.add("retry_cpu_us_per_job", float64(cpu.Microseconds())/float64(max(1, op.Succeeded)))
	res.add("retry_cpu_cores", cpu.Seconds()/retryDur.Seconds())
	res.add("retry_status", op.Status)
	res.add("retry_failed", op.Failed)
	deadAddMB(res, "rss_retry_start_mb", rssStart)
	deadAddMB(res, "rss_retry_max_mb", rssMax)
	deadAddMB(res, "rss_retry_end_mb", rssEnd)
	batches, b50, b99, bmax := timed.stats()
	res.add("retry_batches", batches)
	deadAddMs(res, "retry_batch_p50_ms", b50)
	deadAddMs(res, "retry_batch_p99_ms", b99)
	deadAddMs(res, "retry_batch_max_ms", bmax)
	// Redis: no entry of ours in the slow log during the retry, at the
	// server's threshold, is the evidence that no script took longer.
	res.add("redis_slowlog_threshold_us", slowThreshold)
	if probe != nil {
		all, ours, longest, err := probe.slowSince(ctx, slow0)
		if err != nil {
			return err
		}
		res.add("redis_slowlog_entries", all)
		res.add("redis_slowlog_ours", ours)
		res.add("redis_slowlog_ours_max_ms", fmt.Sprintf("%.3f", float64(longest.Microseconds())/1000))
		c, err := probe.cpu(ctx)
		if err != nil {
			return err
		}
		// The server's CPU per retried job: what a quiet core gives,
		// whatever the wall clock of a loaded machine says.
		res.add("redis_cpu_us_per_retried_job", fmt.Sprintf("%.2f", float64((c-redisCPU0).Microseconds())/float64(max(1, op.Succeeded))))
	} else {
		res.add("redis_slowlog_entries", "na")
		res.add("redis_slowlog_ours", "na")
		res.add("redis_slowlog_ours_max_ms", "na")
		res.add("redis_cpu_us_per_retried_job", "na")
	}
	// PostgreSQL: the CPU of the store's backends per retried job, read
	// from /proc when the server runs here.
	pgPerJob := "na"
	if pgOK {
		if d, ok := pg.since(ctx, pgCPU0); ok {
			pgPerJob = fmt.Sprintf("%.2f", float64(d.Microseconds())/float64(max(1, op.Succeeded)))
		}
	}
	res.add("pg_backend_cpu_us_per_retried_job", pgPerJob)

	// ---- Every job retried exactly once ----
	progress("verifying")
	after, err := ctl.Counts(ctx, "")
	if err != nil {
		return fmt.Errorf("counts: %w", err)
	}
	avail := after.Queues[o.queue][engine.StateAvailable]
	res.add("available_after_retry", avail)
	res.add("archived_after_retry", after.Queues[o.queue][engine.StateArchived])
	// The counters are maintained; count the available jobs exactly too
	// (a cancel dry run over them counts them without the counters).
	exact, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionCancel,
		Selector: engine.Filter{States: []engine.State{engine.StateAvailable}, Queues: []string{o.queue}}, DryRun: true})
	if err != nil {
		return fmt.Errorf("count available: %w", err)
	}
	res.add("available_counted", exact.Matched)
	checked, bad := 0, ""
	for _, id := range samples {
		d, err := ctl.GetJob(ctx, id, false)
		if err != nil {
			return fmt.Errorf("verify job %s: %w", id, err)
		}
		retried := 0
		for _, ev := range d.Timeline {
			if ev.Kind == engine.EventRetried {
				retried++
			}
		}
		if d.Job.State != engine.StateAvailable || retried != 1 {
			bad = fmt.Sprintf("job %s is %s, retried %d times", id, d.Job.State, retried)
		}
		checked++
	}
	res.add("retry_sample_checked", checked)
	ok := op.Status == engine.OperationCompleted && op.Succeeded == n && op.Failed == 0 &&
		avail == n && exact.Matched == n && retained == n && after.Queues[o.queue][engine.StateArchived] == 0 && bad == ""
	if !ok {
		res.add("retry_verify", "MISMATCH")
		deadAddMB(res, "peak_rss_mb", selfHWM())
		if bad == "" {
			bad = fmt.Sprintf("operation %s succeeded %d failed %d; %d available (%d counted), %d archived, of %d",
				op.Status, op.Succeeded, op.Failed, avail, exact.Matched, after.Queues[o.queue][engine.StateArchived], n)
		}
		return fmt.Errorf("verify: %s", bad)
	}
	res.add("retry_verify", "ok")
	deadAddMB(res, "peak_rss_mb", selfHWM())
	return nil
}

// benchDeadSeed inserts o.jobs failing jobs and runs them to their death
// in an engine with workers, timed as the peer harness times it, and
// returns the ids of deadSamples of them.
func benchDeadSeed(ctx context.Context, store backend.Store, o *benchDeadOptions, log *slog.Logger,
	progress func(string, ...any), res *benchResult) ([]string, error) {
	n := int64(o.jobs)
	var handled atomic.Int64
	var handlerAt atomic.Int64
	w, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{o.queue: {Concurrency: o.concurrency}},
		// Keep every dead job whatever the clock says.
		Retention: map[engine.State]time.Duration{},
		Logger:    log,
	})
	if err != nil {
		return nil, err
	}
	for _, k := range deadKinds {
		errs := k.errs
		err := w.Register(engine.Kind{Name: k.name, Handler: func(_ context.Context, j *engine.Job) error {
			i := deadIndex(j.Payload)
			if handled.Add(1) == n {
				handlerAt.Store(time.Now().UnixNano())
			}
			return errors.New(errs[(i/len(deadKinds))%len(errs)](i))
		}})
		if err != nil {
			return nil, err
		}
	}

	progress("inserting %d failing jobs into %s", o.jobs, redact.URL(o.store))
	t0 := time.Now()
	samples, err := benchDeadInsert(ctx, w, o)
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	insertDur := time.Since(t0)
	res.add("insert_seconds", insertDur)
	res.add("insert_per_sec", float64(o.jobs)/insertDur.Seconds())

	progress("working (concurrency %d, every attempt fails)", o.concurrency)
	t1 := time.Now()
	if err := w.Start(ctx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	deadAt, err := deadWait(ctx, w, o.queue, n, &handled, progress)
	if err != nil {
		_ = w.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	deadDur := deadAt.Sub(t1)
	res.add("dead_seconds", deadDur)
	res.add("dead_per_sec", float64(o.jobs)/deadDur.Seconds())
	res.add("handler_seconds", time.Unix(0, handlerAt.Load()).Sub(t1))
	if err := w.Stop(ctx); err != nil {
		return nil, fmt.Errorf("stop: %w", err)
	}
	return samples, nil
}

// deadHave reports whether the store already holds exactly n jobs, all of
// them dead in queue (what a run with --no-retry leaves); an empty store
// is to be seeded, anything else is refused.
func deadHave(ctx context.Context, store backend.Store, queue string, n int64) (bool, error) {
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		return false, err
	}
	c, err := e.Counts(ctx, "")
	if err != nil {
		return false, fmt.Errorf("counts: %w", err)
	}
	// Only the queue counts: the api scenario, run on the same store
	// before, leaves its demo jobs on queues of their own.
	var total int64
	for _, v := range c.Queues[queue] {
		total += v
	}
	switch {
	case total == 0:
		return false, nil
	case total == n && c.Queues[queue][engine.StateArchived] == n:
		return true, nil
	}
	return false, fmt.Errorf("--reuse: queue %s holds %d jobs (%v), not %d dead ones", queue, total, c.Queues[queue], n)
}

// benchDeadInsert enqueues o.jobs failing jobs (max attempts 1) in batches
// of o.batch from o.insertConc goroutines, cycling through deadKinds, and
// returns the ids of deadSamples of them spread over the whole run.
func benchDeadInsert(ctx context.Context, e *engine.Engine, o *benchDeadOptions) ([]string, error) {
	every := max(1, o.jobs/deadSamples)
	var (
		mu      sync.Mutex
		samples []string
	)
	err := enqueueBatches(ctx, e, o.jobs, o.batch, o.insertConc,
		func(i int) engine.EnqueueParams {
			kind := deadKinds[i%len(deadKinds)]
			return engine.EnqueueParams{Queue: o.queue, Kind: kind.name, MaxAttempts: 1,
				Payload: []byte(kind.payload(i))}
		},
		func(i int, j *engine.Job) {
			if i%every == 0 {
				mu.Lock()
				samples = append(samples, j.ID)
				mu.Unlock()
			}
		})
	return samples, err
}

// deadWait waits until every handler has run, then until the store counts
// n archived jobs in the queue (its maintained counters, written in the
// same transaction as each death), polling every 10 ms as the peer harness
// does. It returns when the store first confirmed.
func deadWait(ctx context.Context, c engine.Control, queue string, n int64, handled *atomic.Int64,
	progress func(string, ...any)) (time.Time, error) {
	last := time.Now()
	for handled.Load() < n {
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("timed out with %d of %d jobs handled: %w", handled.Load(), n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Since(last) > 5*time.Second {
			progress("handled %d/%d", handled.Load(), n)
			last = time.Now()
		}
	}
	for {
		cs, err := c.Counts(ctx, queue)
		if err != nil {
			return time.Time{}, fmt.Errorf("counts: %w", err)
		}
		dead := cs.Total[engine.StateArchived]
		if dead >= n {
			return time.Now(), nil
		}
		if time.Since(last) > 5*time.Second {
			progress("store counts %d/%d dead", dead, n)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("timed out with %d of %d jobs dead: %w", dead, n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// deadMedian times fn calls times and returns the median.
func deadMedian(calls int, fn func() error) (time.Duration, error) {
	lat := make([]time.Duration, 0, calls)
	for range calls {
		t := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	if len(lat)%2 == 1 {
		return lat[len(lat)/2], nil
	}
	return (lat[len(lat)/2-1] + lat[len(lat)/2]) / 2, nil
}

func deadAddMs(r *benchResult, k string, d time.Duration) {
	r.kv = append(r.kv, [2]string{k, fmt.Sprintf("%.3f", float64(d.Nanoseconds())/1e6)})
}

func deadAddMB(r *benchResult, k string, mb float64) {
	r.kv = append(r.kv, [2]string{k, fmt.Sprintf("%.1f", mb)})
}

// selfRSS and selfHWM are this process's VmRSS and VmHWM in MiB.
func selfRSS() float64 { rss, _ := procStatus(os.Getpid()); return mb(rss) }
func selfHWM() float64 { _, hwm := procStatus(os.Getpid()); return mb(hwm) }

// deadSampleRSS samples VmRSS every interval until the returned function is
// called, which reports the first, largest and last sample in MiB.
func deadSampleRSS(interval time.Duration) func() (first, peak, last float64) {
	stop := make(chan struct{})
	done := make(chan struct{})
	first := selfRSS()
	peak := first
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			peak = max(peak, selfRSS())
		}
	}()
	return func() (float64, float64, float64) {
		close(stop)
		<-done
		v := selfRSS()
		return first, max(peak, v), v
	}
}

// deadSeedHow resolves --seed for a store's backend.
func deadSeedHow(seed, backend string) (string, error) {
	switch seed {
	case "handlers", "deadline":
		return seed, nil
	case "auto":
		if backend == "sqlite" {
			return "handlers", nil
		}
		return "deadline", nil
	}
	return "", fmt.Errorf("--seed %q: want handlers, deadline or auto", seed)
}
