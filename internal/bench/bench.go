package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/commithook"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

type benchOptions struct {
	store       string
	jobs        int
	concurrency int
	batch       int
	insertConc  int
	queue       string
	label       string
	timeout     time.Duration
	// cpuProfile, when set, is a file for a CPU profile of the work
	// window alone (throughput): not the insert, not the read-back.
	cpuProfile string
	// prefetch is the queue's Prefetch (throughput; 0: the engine's
	// default, negative: none).
	prefetch int
	// writers is the engine's CompleteWriters (throughput; 0: its default).
	writers int
	// payload is what the throughput jobs carry: "empty" ({}, as the peer
	// harness's no-op jobs) or "order" (a small order of its own per job,
	// with metadata: every job a fingerprint of its own, and entries in
	// the payload and metadata indexes where a store keeps them).
	payload string
	// limit, when positive, is a concurrency limit across processes on
	// the throughput kind (throughput): the cost of a limit that holds no
	// job back, against the same run without one.
	limit int
	// rate, when positive, is a rate limit across processes on the kind
	// (starts per second; throughput): set far above the run's rate, it
	// measures the check and the starts log, not a wait.
	rate int
}

// addFlags registers the flags every scenario built on benchOptions shares;
// --store is required.
func (o *benchOptions) addFlags(cmd *cobra.Command, timeout time.Duration) {
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "", "store URL (required); a sqlite file is deleted first")
	f.IntVar(&o.jobs, "jobs", 10000, "number of jobs N")
	f.IntVar(&o.concurrency, "concurrency", 50, "jobs run at once (the queue's concurrency)")
	f.IntVar(&o.batch, "batch", 1000, "jobs per EnqueueMany call")
	f.IntVar(&o.insertConc, "insert-conc", 4, "goroutines sending insert batches (as the peer harness)")
	f.StringVar(&o.queue, "queue", "bench", "queue name")
	f.StringVar(&o.label, "label", "main", "free-form variant label echoed in the result line")
	f.DurationVar(&o.timeout, "timeout", timeout, "overall timeout")
	_ = cmd.MarkFlagRequired("store")
}

func newBenchThroughputCmd(lo *cmdline.LogOptions) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "throughput",
		Short: "Insert N no-op jobs, then time the workers until the store has completed all N",
		Long: `Reset the store (a SQLite file named by --store is deleted first), insert N
no-op jobs with EnqueueMany in batches, then start an engine with one queue
and time until every job is completed in the store: the clock stops when
Engine.Stop returns, after the completer has committed every acknowledgement,
and each job is then read back to check that it is completed.

Prints one key=value result line on stdout, the shape of the peer harness
(the harness for River and asynq, bench/peers); progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchThroughput(cmd.Context(), o, lo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addFlags(cmd, 15*time.Minute)
	cmd.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the work window alone (from Start to Stop) to this file")
	cmd.Flags().IntVar(&o.writers, "complete-writers", 0, "acknowledgement batches written at once (0: the engine's default, engine.Config.CompleteWriters)")
	cmd.Flags().IntVar(&o.prefetch, "prefetch", 0, "jobs claimed ahead of free slots (0: the engine's default, engine.DefaultPrefetch; negative: none)")
	cmd.Flags().IntVar(&o.limit, "limit", 0, "a concurrency limit across processes on the benchmark's kind (0: none)")
	cmd.Flags().IntVar(&o.rate, "rate", 0, "a rate limit across processes on the benchmark's kind, starts per second (0: none)")
	cmd.Flags().StringVar(&o.payload, "payload", "empty", `what each job carries: empty ({}, as the peers' no-op jobs) or order (an order of its own, with metadata)`)
	return cmd
}

// benchKind is the no-op kind of the throughput benchmark.
const benchKind = "bench.noop"

func runBenchThroughput(ctx context.Context, o *benchOptions, lo *cmdline.LogOptions, stdout, stderr io.Writer) error {
	if o.payload != "empty" && o.payload != "order" {
		return fmt.Errorf("--payload %q: want empty or order", o.payload)
	}
	res := benchHeader("throughput", o)
	res.add("payload", o.payload)
	return printBenchResult(stdout, &res, benchThroughput(ctx, o, lo, stderr, &res))
}

// printBenchResult ends a scenario: its result line with status=ok, or
// status=error and the error (and exit status 1).
func printBenchResult(stdout io.Writer, res *benchResult, err error) error {
	if err != nil {
		res.add("status", "error")
		res.add("error", strings.Join(strings.Fields(err.Error()), "_"))
		fmt.Fprintln(stdout, res.String())
		return cmdline.ExitError{Code: 1}
	}
	res.add("status", "ok")
	fmt.Fprintln(stdout, res.String())
	return nil
}

func benchThroughput(ctx context.Context, o *benchOptions, lo *cmdline.LogOptions, stderr io.Writer, res *benchResult) error {
	progress := benchProgress(stderr, "throughput")
	if o.jobs <= 0 || o.concurrency <= 0 || o.batch <= 0 || o.insertConc <= 0 {
		return fmt.Errorf("--jobs, --concurrency, --batch and --insert-conc must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
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
	if target.Backend == "sqlite" {
		if err := removeSQLiteFile(target.Path); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	store, err := storeurl.Open(ctx, o.store, log)
	if err != nil {
		return err
	}
	defer store.Close()
	// Every write transaction the engine commits on SQLite calls the commit
	// hook its contexts (Enqueue's, Start's, Stop's) carry, so the hook
	// counts them for write_tx_per_job. PostgreSQL calls it only for its
	// multi-statement transactions (claims and completions are autocommitted
	// statements), so its count would mean something else: "na" there.
	var writeTxs atomic.Int64
	ctx = commithook.With(ctx, func() { writeTxs.Add(1) })

	n := int64(o.jobs)
	var handled atomic.Int64
	done := make(chan struct{})
	var handlerAt time.Time
	var limits []engine.Limit
	if o.limit > 0 || o.rate > 0 {
		limits = []engine.Limit{{Scope: engine.LimitKind, Name: benchKind, Concurrency: o.limit, Rate: o.rate}}
	}
	res.add("limit", o.limit)
	res.add("rate", o.rate)
	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{o.queue: {Concurrency: o.concurrency, Prefetch: o.prefetch}},
		Limits: limits,
		// Keep every terminal job, so the store can be asked about each.
		Retention:       map[engine.State]time.Duration{},
		CompleteWriters: o.writers,
		Logger:          log,
	})
	if err != nil {
		return err
	}
	err = e.Register(engine.Kind{Name: benchKind, Handler: func(context.Context, *engine.Job) error {
		if handled.Add(1) == n {
			handlerAt = time.Now()
			close(done)
		}
		return nil
	}})
	if err != nil {
		return err
	}

	progress("inserting %d jobs into %s", o.jobs, redact.URL(o.store))
	t0 := time.Now()
	ids, err := benchInsert(ctx, e, o)
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	insertDur := time.Since(t0)
	res.add("insert_seconds", insertDur)
	res.add("insert_per_sec", float64(o.jobs)/insertDur.Seconds())

	progress("working (concurrency %d)", o.concurrency)
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	scpu, err := storeCPUFor(target.Backend, o.store)
	if err != nil && !errors.Is(err, errNoStoreCPU) {
		return err
	}
	var scpu0 map[string]time.Duration
	if scpu != nil {
		if scpu0, err = scpu.snapshot(ctx); err != nil {
			return err
		}
	}
	res.add("load1_before", load1())
	tx0 := writeTxs.Load()
	cpu0 := processCPU()
	t1 := time.Now()
	if err := e.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		_ = e.Stop(context.WithoutCancel(ctx))
		return fmt.Errorf("timed out with %d of %d jobs handled: %w", handled.Load(), n, ctx.Err())
	}
	// Stop returns once the completer has committed every acknowledgement:
	// from here the store has them all.
	if err := e.Stop(ctx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	workDur := time.Since(t1)
	cpu := processCPU() - cpu0
	if err := stopProfile(); err != nil {
		return err
	}
	// The store server's CPU, read before the store closes its
	// connections (their backends would be gone).
	storeSource, storeCPU := "in_process", time.Duration(0)
	if scpu != nil {
		scpu1, err := scpu.snapshot(ctx)
		if err != nil {
			return err
		}
		storeSource, storeCPU = scpu.source(), cpuDelta(scpu0, scpu1)
	}
	res.add("seconds", workDur)
	res.add("work_seconds", workDur)
	res.add("jobs_per_sec", float64(o.jobs)/workDur.Seconds())
	// CPU per job varies less with the machine's load than the rate does;
	// write transactions per job show how well work is batched.
	res.add("cpu_us_per_job", float64(cpu.Microseconds())/float64(o.jobs))
	if store.Backend() == "sqlite" {
		res.add("write_tx_per_job", float64(writeTxs.Load()-tx0)/float64(o.jobs))
	} else {
		res.add("write_tx_per_job", "na")
	}
	// The split: this process (the engine, and the store too where it is
	// embedded: SQLite) and the store's own processes, measured apart.
	perJob := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(o.jobs) }
	res.add("engine_cpu_us_per_job", perJob(cpu))
	res.add("store_cpu_us_per_job", perJob(storeCPU))
	res.add("store_cpu_source", storeSource)
	res.add("total_cpu_us_per_job", perJob(cpu+storeCPU))
	res.add("load1_after", load1())
	res.add("handler_seconds", handlerAt.Sub(t1))
	res.add("handled", handled.Load())

	progress("verifying %d jobs in the store", len(ids))
	states, err := benchVerify(ctx, store, ids)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	res.add("verified", states[engine.StateCompleted])
	if states[engine.StateCompleted] != len(ids) {
		return fmt.Errorf("verify: %d of %d jobs completed (%s)", states[engine.StateCompleted], len(ids), formatStates(states))
	}
	return nil
}

// benchInsert enqueues o.jobs no-op jobs in batches of o.batch from
// o.insertConc goroutines and returns their ids.
func benchInsert(ctx context.Context, e *engine.Engine, o *benchOptions) ([]string, error) {
	ids := make([]string, o.jobs)
	err := enqueueBatches(ctx, e, o.jobs, o.batch, o.insertConc,
		func(i int) engine.EnqueueParams {
			if o.payload == "order" {
				return engine.EnqueueParams{Queue: o.queue, Kind: benchKind,
					Payload:  fmt.Appendf(nil, `{"order_id":%d,"customer":"c%d","amount_cents":%d,"currency":"EUR"}`, i, i%1000, 100+i%9900),
					Metadata: fmt.Appendf(nil, `{"tenant":"t%d"}`, i%50)}
			}
			return engine.EnqueueParams{Queue: o.queue, Kind: benchKind, Payload: []byte(`{}`)}
		},
		func(i int, j *engine.Job) { ids[i] = j.ID })
	return ids, err
}

// enqueueBatches enqueues n jobs, job i made by params(i), in EnqueueMany
// batches of batch from conc goroutines, and calls done(i, job) for each
// one accepted (from those goroutines). It stops at the first error,
// whether the batch's or one job's.
func enqueueBatches(ctx context.Context, e *engine.Engine, n, batch, conc int,
	params func(i int) engine.EnqueueParams, done func(i int, j *engine.Job)) error {
	starts := make(chan int)
	errc := make(chan error, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range starts {
				ps := make([]engine.EnqueueParams, min(start+batch, n)-start)
				for k := range ps {
					ps[k] = params(start + k)
				}
				rs, err := e.EnqueueMany(ctx, ps)
				if err != nil {
					errc <- err
					return
				}
				for k, r := range rs {
					if r.Err != nil {
						errc <- fmt.Errorf("job %d: %w", start+k, r.Err)
						return
					}
					done(start+k, r.Job)
				}
			}
		}()
	}
	var err error
feed:
	for start := 0; start < n; start += batch {
		select {
		case starts <- start:
		case err = <-errc:
			break feed
		}
	}
	close(starts)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// benchVerify reads every job back and counts them by state.
func benchVerify(ctx context.Context, s backend.Store, ids []string) (map[engine.State]int, error) {
	const readers = 8
	var (
		mu     sync.Mutex
		states = map[engine.State]int{}
		first  error
		wg     sync.WaitGroup
	)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[engine.State]int{}
			for i := r; i < len(ids); i += readers {
				j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: ids[i]})
				if errors.Is(err, engine.ErrNotFound) {
					local[engine.StateDeleted]++
					continue
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("job %s: %w", ids[i], err)
					}
					mu.Unlock()
					return
				}
				local[j.State]++
			}
			mu.Lock()
			for k, v := range local {
				states[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return states, first
}

func formatStates(m map[engine.State]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[engine.State(k)])
	}
	return strings.Join(parts, ",")
}

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// removeSQLiteFile deletes a SQLite database and its -wal and -shm files.
// It refuses a path that holds something other than a SQLite database, so
// a mistyped --store cannot delete an unrelated file.
func removeSQLiteFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Nothing to reset; stale -wal/-shm files without their database
		// are removed below.
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file; not deleting it", path)
	case fi.Size() > 0:
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		head := make([]byte, len(sqliteHeader))
		_, err = io.ReadFull(f, head)
		f.Close()
		if err != nil || !bytes.Equal(head, sqliteHeader) {
			return fmt.Errorf("%s is not a SQLite database; not deleting it", path)
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// benchResult is an ordered list of key=value pairs, printed as one line.
type benchResult struct{ kv [][2]string }

func (r *benchResult) add(k string, v any) {
	var s string
	switch x := v.(type) {
	case float64:
		s = fmt.Sprintf("%.4f", x)
	case time.Duration:
		s = fmt.Sprintf("%.4f", x.Seconds())
	default:
		s = fmt.Sprint(x)
	}
	r.kv = append(r.kv, [2]string{k, s})
}

func (r benchResult) String() string {
	parts := make([]string, 0, len(r.kv))
	for _, p := range r.kv {
		parts = append(parts, p[0]+"="+p[1])
	}
	return strings.Join(parts, " ")
}

func benchHeader(scenario string, o *benchOptions) benchResult {
	var r benchResult
	r.add("system", "sluice")
	r.add("scenario", scenario)
	r.add("label", o.label)
	r.add("jobs", o.jobs)
	r.add("concurrency", o.concurrency)
	r.add("lib", libVersion())
	r.add("go", runtime.Version())
	r.add("gomaxprocs", runtime.GOMAXPROCS(0))
	return r
}

func libVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v = s.Value[:12]
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return bi.Main.Path + "@" + v
}

// procStatus reads VmRSS and VmHWM of a process (os.Getpid() for this
// one), in kB; 0 where /proc has no such process.
func procStatus(pid int) (rss, hwm int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	return parseProcStatus(b)
}

func parseProcStatus(b []byte) (rss, hwm int64) {
	for line := range strings.SplitSeq(string(b), "\n") {
		for _, f := range []struct {
			key string
			dst *int64
		}{{"VmRSS:", &rss}, {"VmHWM:", &hwm}} {
			if rest, ok := strings.CutPrefix(line, f.key); ok {
				*f.dst, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			}
		}
	}
	return rss, hwm
}

// mb converts kB to MiB.
func mb(kb int64) float64 { return float64(kb) / 1024 }

// rssSampler keeps the highest VmRSS of a process, and when it was seen.
type rssSampler struct {
	pid    int
	peak   atomic.Int64 // kB
	peakAt atomic.Int64 // unix nanoseconds
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func startRSSSampler(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() int64 {
	rss, _ := procStatus(s.pid)
	for {
		p := s.peak.Load()
		if rss <= p {
			return rss
		}
		if s.peak.CompareAndSwap(p, rss) {
			s.peakAt.Store(time.Now().UnixNano())
			return rss
		}
	}
}

// close stops the sampling after a last sample; it may be called again.
func (s *rssSampler) close() {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.sample()
	})
}

// benchProgress writes a scenario's progress lines, time-stamped.
func benchProgress(w io.Writer, scenario string) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(w, time.Now().Format("15:04:05.000")+" sluice "+scenario+": "+format+"\n", args...)
	}
}

// benchStore parses a scenario's store URL and records its backend.
func benchStore(url string, res *benchResult) (storeurl.Target, error) {
	target, err := storeurl.Parse(url)
	if err != nil {
		return storeurl.Target{}, err
	}
	res.add("store", target.Backend)
	return target, nil
}

// startCPUProfile starts a CPU profile into path (nothing when path is
// empty) and returns what stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		return nil
	}, nil
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
