package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// The api scenario (scripts/bench api): the HTTP control API under a fixed
// arrival rate of list requests, over a store holding N archived jobs,
// while the server's workers run.

type benchAPIOptions struct {
	store       string
	jobs        int
	rate        float64
	duration    time.Duration
	warmup      time.Duration
	connections int
	cursorShare float64
	workRate    int
	workMS      int
	seedConc    int
	seedBatch   int
	wrk         bool
	label       string
	timeout     time.Duration
	serverBin   string
}

func newBenchAPICmd(lo *cmdline.LogOptions) *cobra.Command {
	o := &benchAPIOptions{}
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Load GET /jobs?state=archived&limit=50 at a fixed rate on a server over N archived jobs, workers running",
		Long: `Seed the store with archived jobs until it holds at least N (with the
deadletter scenario's seeding, on queue "bench": on SQLite jobs enqueued
with one attempt, run by workers whose handler fails; on PostgreSQL and
Redis jobs archived by claims past their deadline, as deadletter --seed
deadline does; a store is never emptied, so a second run reuses the
seed, and a deadletter --no-retry run's store serves as it is), then start
the real server as a child process — this binary, "sluice serve --store ...
--listen 127.0.0.1:0 --demo-workers" — and, while a steady stream of demo
jobs (--work-rate per second, POST /jobs in batches every 100ms) keeps its
workers busy:

  - an open-loop load generator sends GET /api/v1/jobs?state=archived&limit=50
    at a fixed arrival rate (--rate) over --connections keep-alive
    connections for --duration, after a --warmup at the same rate. Request i
    is due at start + i/rate; its latency runs from when it was due to when
    its response has been read, so a server that falls behind is charged
    for the wait (no coordinated omission). --cursor-share of the requests
    ask for one of the next 20 pages by cursor instead of the first.
  - before the warm-up, the bench waits until the workers complete a job
    within a second of its enqueueing, 3s or more after the server came up
    (settle_seconds), so neither the server's start nor a backlog an
    earlier run left is measured.
  - the server's VmRSS is read from /proc/PID/status: idle (once it
    serves), start (before the measured run), peak (sampled every 250ms
    during it), end (after it); and its VmHWM at the end.
  - worker_jobs_done is how many jobs the server's workers completed during
    the measured run (the maintained counters, before and after).
  - with --wrk, when wrk is installed, wrk runs against the same server for
    the same duration and connections afterwards (closed loop, for
    comparison).

Prints one key=value result line on stdout (load1_before/load1_after are
/proc/loadavg's first field); progress goes to stderr.`,
		Example: `  scripts/bench api --store sqlite:///tmp/sluice-api.db --jobs 1000000 --rate 2000 --duration 30s`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchAPI(cmd.Context(), o, lo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "", "store URL (required); kept between runs")
	f.IntVar(&o.jobs, "jobs", 1_000_000, "archived jobs the store must hold (seeded when fewer)")
	f.Float64Var(&o.rate, "rate", 2000, "list requests per second (arrival rate)")
	f.DurationVar(&o.duration, "duration", 30*time.Second, "measured run")
	f.DurationVar(&o.warmup, "warmup", 5*time.Second, "unmeasured run at the same rate before it")
	f.IntVar(&o.connections, "connections", 32, "keep-alive connections (the most requests in flight)")
	f.Float64Var(&o.cursorShare, "cursor-share", 0, "share of requests (0–1) that ask for a later page by cursor")
	f.IntVar(&o.workRate, "work-rate", 500, "demo jobs enqueued per second for the server's workers (0: none)")
	f.IntVar(&o.workMS, "work-ms", 5, "work each of those jobs pretends to do, in milliseconds")
	f.IntVar(&o.seedConc, "seed-concurrency", 256, "seeding: failing handlers run at once")
	f.IntVar(&o.seedBatch, "seed-batch", 1000, "seeding: jobs per EnqueueMany call")
	f.BoolVar(&o.wrk, "wrk", true, "also run wrk against the server when it is installed")
	f.StringVar(&o.label, "label", "main", "free-form variant label echoed in the result line")
	f.DurationVar(&o.timeout, "timeout", 60*time.Minute, "overall timeout")
	f.StringVar(&o.serverBin, "server-bin", "", "sluice binary to run the server with (default: sluice beside this binary)")
	_ = cmd.MarkFlagRequired("store")
	return cmd
}

func runBenchAPI(ctx context.Context, o *benchAPIOptions, lo *cmdline.LogOptions, stdout, stderr io.Writer) error {
	var res benchResult
	res.add("system", "sluice")
	res.add("scenario", "api")
	res.add("label", o.label)
	return printBenchResult(stdout, &res, benchAPI(ctx, o, lo, stderr, &res))
}

// apiBenchPath is what the load generator asks for.
const apiBenchPath = api.Prefix + "/jobs?state=archived&limit=50"

func benchAPI(ctx context.Context, o *benchAPIOptions, lo *cmdline.LogOptions, stderr io.Writer, res *benchResult) error {
	// The server's stderr is copied here too, from a goroutine of os/exec.
	stderr = &apiLockedWriter{w: stderr}
	progress := benchProgress(stderr, "api")
	if o.jobs < 50 || o.rate <= 0 || o.duration <= 0 || o.warmup < 0 || o.connections <= 0 ||
		o.workRate < 0 || o.workMS < 0 || o.seedConc <= 0 || o.seedBatch <= 0 || o.cursorShare < 0 || o.cursorShare > 1 {
		return errors.New("--rate, --duration, --connections, --seed-concurrency and --seed-batch must be positive, --jobs at least 50 (a page), --cursor-share within 0–1")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	log, closeLog, err := lo.Logger(nil)
	if err != nil {
		return err
	}
	defer closeLog()
	if _, err := benchStore(o.store, res); err != nil {
		return err
	}
	res.add("jobs", o.jobs)
	res.add("rate_target", o.rate)
	res.add("duration", o.duration)
	res.add("connections", o.connections)
	res.add("cursor_share", o.cursorShare)
	res.add("work_rate", o.workRate)
	res.add("work_ms", o.workMS)
	res.add("lib", libVersion())
	res.add("go", runtime.Version())
	res.add("gomaxprocs", runtime.GOMAXPROCS(0))
	res.add("cores", runtime.NumCPU())

	seeded, took, err := apiBenchSeed(ctx, o, log, progress)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	res.add("seeded", seeded)
	res.add("seed_seconds", took)

	srv, err := startAPIBenchServer(ctx, o, stderr, progress)
	if err != nil {
		return err
	}
	defer srv.stop(progress)
	// The bench's own calls (cursors, counts, the work stream) retry.
	cl := api.NewClient(srv.base, "", api.ClientOptions{Timeout: 30 * time.Second, UserAgent: "sluice-bench"})
	archived, err := apiBenchArchived(ctx, cl)
	if err != nil {
		return err
	}
	res.add("archived", archived)
	if archived < int64(o.jobs) {
		return fmt.Errorf("the server sees %d archived jobs, want at least %d", archived, o.jobs)
	}
	paths, err := apiBenchPaths(ctx, cl, o.cursorShare > 0)
	if err != nil {
		return err
	}

	rssIdle, _ := procStatus(srv.pid)
	work := startAPIBenchWork(ctx, cl, o, log)
	defer work.stop()
	settle, err := apiBenchSettle(ctx, cl, progress)
	if err != nil {
		return err
	}
	res.add("settle_seconds", settle)

	lg := newAPIHTTPLoad(srv.base, o.connections)
	defer lg.close()
	pick := apiBenchPicker(paths, o.cursorShare)
	if o.warmup > 0 {
		progress("warm-up: %.0f requests/s for %s", o.rate, o.warmup)
		w := &apiLoad{rate: o.rate, duration: o.warmup, conns: o.connections, do: lg.get(pick)}
		if _, err := w.run(ctx); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	before, err := cl.Counts(ctx, "")
	if err != nil {
		return fmt.Errorf("counts: %w", err)
	}
	res.add("load1_before", apiLoadAvg())
	rssStart, _ := procStatus(srv.pid)
	rss := startRSSSampler(srv.pid, 250*time.Millisecond)
	defer rss.close()
	srvCPU0, genCPU0, wall0 := apiProcCPU(srv.pid), apiProcCPU(os.Getpid()), time.Now()
	progress("measuring: %.0f requests/s for %s over %d connections", o.rate, o.duration, o.connections)
	run := &apiLoad{rate: o.rate, duration: o.duration, conns: o.connections, do: lg.get(pick)}
	st, err := run.run(ctx)
	if err != nil {
		return err
	}
	res.add("load1_after", apiLoadAvg())
	srvCPU, genCPU, wall := apiProcCPU(srv.pid)-srvCPU0, apiProcCPU(os.Getpid())-genCPU0, time.Since(wall0)
	after, err := cl.Counts(ctx, "")
	if err != nil {
		return fmt.Errorf("counts: %w", err)
	}
	rss.close()
	rssEnd, hwm := procStatus(srv.pid)
	werr := work.firstErr()

	lat := st.sorted()
	res.add("rate_achieved", st.achievedRate())
	res.add("requests", st.scheduled)
	res.add("ok", len(lat))
	res.add("errors", st.errors)
	res.add("unsent", st.unsent)
	for _, p := range []struct {
		key string
		p   float64
	}{{"p50_ms", 50}, {"p90_ms", 90}, {"p99_ms", 99}, {"p999_ms", 99.9}, {"max_ms", 100}} {
		res.add(p.key, apiMS(apiPercentile(lat, p.p)))
	}
	res.add("server_rss_mb_idle", mb(rssIdle))
	res.add("server_rss_mb_start", mb(rssStart))
	res.add("server_rss_mb_peak", mb(rss.peak.Load()))
	res.add("server_rss_mb_end", mb(rssEnd))
	res.add("server_rss_mb_hwm", mb(hwm))
	// CPU says more than a rate on a shared machine: the server's
	// includes its workers' share.
	res.add("server_cpu_cores", srvCPU.Seconds()/wall.Seconds())
	res.add("server_cpu_ms_per_req", apiMS(srvCPU)/float64(max(1, len(lat))))
	res.add("loadgen_cpu_cores", genCPU.Seconds()/wall.Seconds())
	res.add("work_enqueued", work.enqueued.Load())
	res.add("worker_jobs_done", after.Total[engine.StateCompleted]-before.Total[engine.StateCompleted])
	res.add("work_backlog", after.Total[engine.StateAvailable]+after.Total[engine.StateRunning])
	p99 := apiPercentile(lat, 99)
	met := st.errors == 0 && st.unsent == 0 && st.achievedRate() >= 0.98*o.rate && p99 < 50*time.Millisecond
	res.add("target_met", met)
	if st.firstErr != nil {
		res.add("first_error", strings.Join(strings.Fields(st.firstErr.Error()), "_"))
	}
	progress("achieved %.0f/s, p50 %.2fms p99 %.2fms max %.2fms, %d errors; server RSS %.0f→%.0f MB (peak %.0f)",
		st.achievedRate(), apiMS(apiPercentile(lat, 50)), apiMS(p99), apiMS(apiPercentile(lat, 100)), st.errors, mb(rssStart), mb(rssEnd), mb(rss.peak.Load()))

	if o.wrk {
		if bin, err := exec.LookPath("wrk"); err == nil {
			progress("wrk: %s for %s over %d connections", bin, o.duration, o.connections)
			w, err := apiBenchWrk(ctx, bin, srv.base+apiBenchPath, o.connections, o.duration)
			if err != nil {
				return fmt.Errorf("wrk: %w", err)
			}
			for _, kv := range w {
				res.add(kv[0], kv[1])
			}
			rssWrk, hwm := procStatus(srv.pid)
			res.add("server_rss_mb_after_wrk", mb(rssWrk))
			res.add("server_rss_mb_hwm_after_wrk", mb(hwm))
		} else {
			res.add("wrk", "not_installed")
		}
	}
	work.stop()
	if werr != nil {
		return fmt.Errorf("work stream: %w", werr)
	}
	if err := work.firstErr(); err != nil {
		return fmt.Errorf("work stream: %w", err)
	}
	return nil
}

// apiLockedWriter serialises writes to w.
type apiLockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *apiLockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func apiMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// apiLoadAvg is /proc/loadavg's first field ("" where there is none).
func apiLoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// Seeding.

// apiBenchSeed tops the store up to o.jobs archived jobs with the dead
// letter scenario's seeding (benchDeadSeed: failing jobs with one attempt
// on queue "bench", run to their death by an engine's workers), and
// returns how many it added.
func apiBenchSeed(ctx context.Context, o *benchAPIOptions, log *slog.Logger, progress func(string, ...any)) (int, time.Duration, error) {
	store, err := storeurl.Open(ctx, o.store, log)
	if err != nil {
		return 0, 0, err
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{NoMaintenance: true, Logger: log})
	if err != nil {
		return 0, 0, err
	}
	c, err := e.Counts(ctx, "")
	if err != nil {
		return 0, 0, fmt.Errorf("counts: %w", err)
	}
	have := c.Total[engine.StateArchived]
	need := o.jobs - int(have)
	if need <= 0 {
		progress("%s holds %d archived jobs: no seeding", redact.URL(o.store), have)
		return 0, 0, nil
	}
	progress("%s holds %d archived jobs: seeding %d more", redact.URL(o.store), have, need)
	t0 := time.Now()
	var discard benchResult // the dead letter scenario's own figures
	do := &benchDeadOptions{benchOptions: benchOptions{store: o.store, jobs: need, concurrency: o.seedConc,
		batch: o.seedBatch, insertConc: 4, queue: "bench", label: o.label}}
	target, err := storeurl.Parse(o.store)
	if err != nil {
		return 0, 0, err
	}
	if how, _ := deadSeedHow("auto", target.Backend); how == "deadline" {
		_, err = benchDeadSeedDeadline(ctx, store, do, progress, &discard)
	} else {
		_, err = benchDeadSeed(ctx, store, do, log, progress, &discard)
	}
	if err != nil {
		return 0, 0, err
	}
	took := time.Since(t0)
	progress("seeded %d archived jobs in %.1fs", need, took.Seconds())
	return need, took, nil
}

// The server, a child process.

type apiBenchServer struct {
	cmd  *exec.Cmd
	pid  int
	base string
	done chan struct{}
	tmp  string
}

var reAPIServing = regexp.MustCompile(`serving (http://\S+?)` + regexp.QuoteMeta(api.Prefix))

// startAPIBenchServer runs `sluice serve --demo-workers` on a free
// loopback port and waits until it is ready. The child gets no SLUICE_*
// settings from this environment and no config file, so it serves without
// tokens exactly what the flags say.
func startAPIBenchServer(ctx context.Context, o *benchAPIOptions, stderr io.Writer, progress func(string, ...any)) (*apiBenchServer, error) {
	bin := o.serverBin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("server binary: %w", err)
		}
		bin = filepath.Join(filepath.Dir(exe), "sluice")
	}
	tmp, err := os.MkdirTemp("", "sluice-bench-api-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--store", o.store, "--listen", "127.0.0.1:0", "--demo-workers", "--log-level", "warn")
	env := []string{"XDG_CONFIG_HOME=" + tmp}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("start server: %w", err)
	}
	s := &apiBenchServer{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{}), tmp: tmp}
	baseC := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		found := false
		for sc.Scan() {
			if m := reAPIServing.FindStringSubmatch(sc.Text()); m != nil && !found {
				found = true
				baseC <- m[1]
			}
		}
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case s.base = <-baseC:
	case <-s.done:
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("server exited before serving: %v", cmd.ProcessState)
	case <-time.After(2 * time.Minute):
		s.stop(progress)
		return nil, errors.New("server did not start serving within 2 minutes")
	case <-ctx.Done():
		s.stop(progress)
		return nil, ctx.Err()
	}
	progress("server pid %d serving %s", s.pid, s.base)
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := hc.Get(s.base + api.Prefix + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop(progress)
			return nil, fmt.Errorf("server not ready within a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the server with SIGTERM, and kills it if it has not exited
// within 30s. It may be called again.
func (s *apiBenchServer) stop(progress func(string, ...any)) {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			progress("server pid %d still running 30s after SIGTERM: killing it", s.pid)
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.tmp)
}

// apiProcCPU is a process's CPU time so far (user and system), from
// /proc/PID/stat; 0 where there is no /proc.
func apiProcCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return parseAPIProcStat(b)
}

// parseAPIProcStat reads utime and stime (fields 14 and 15, in clock
// ticks of 1/100 s) from a /proc/PID/stat line. The command name, field 2,
// may hold spaces and parentheses, so fields are counted from its last ')'.
func parseAPIProcStat(b []byte) time.Duration {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// apiBenchSettle waits, up to 5 minutes, until the server's workers
// complete a job within a second of its enqueueing, at least 3 seconds
// after the server came up: until then the server may still be busy with
// its start (maintenance's first ticks) or with a backlog an earlier run
// left in the store, which is not what is measured.
func apiBenchSettle(ctx context.Context, cl *api.Client, progress func(string, ...any)) (time.Duration, error) {
	t0 := time.Now()
	for n := 0; ; n++ {
		t1 := time.Now()
		j, err := cl.Enqueue(ctx, engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindInvoiceGenerate,
			Args: demo.Invoice{Invoice: fmt.Sprintf("INV-SETTLE-%d", n), Customer: 1000, AmountCents: 100, Currency: "EUR"}})
		if err != nil {
			return 0, fmt.Errorf("settle: enqueue: %w", err)
		}
		if n == 0 {
			progress("waiting until the workers complete a job within a second")
		}
		for {
			d, err := cl.GetJob(ctx, j.ID, false)
			if err != nil {
				return 0, fmt.Errorf("settle: job %s: %w", j.ID, err)
			}
			st := d.Job.State
			if st == engine.StateCompleted {
				break
			}
			if st.Terminal() {
				return 0, fmt.Errorf("settle: job %s ended %s", j.ID, st)
			}
			if time.Since(t0) > 5*time.Minute {
				return 0, fmt.Errorf("settle: job %s still %s after 5 minutes", j.ID, st)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		if time.Since(t1) < time.Second && time.Since(t0) >= 3*time.Second {
			return time.Since(t0), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// The bench's own calls.

func apiBenchArchived(ctx context.Context, cl *api.Client) (int64, error) {
	c, err := cl.Counts(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("counts: %w", err)
	}
	return c.Total[engine.StateArchived], nil
}

// apiBenchPaths checks the first page (50 archived jobs) and returns the
// paths to load: the first page, then, with cursors, the next pages by
// cursor (20, or as many as there are).
func apiBenchPaths(ctx context.Context, cl *api.Client, cursors bool) ([]string, error) {
	paths := []string{apiBenchPath}
	p := engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}, Limit: 50}
	for page := 0; page <= 20; page++ {
		pg, err := cl.ListJobs(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list page %d: %w", page+1, err)
		}
		if len(pg.Jobs) == 0 || (page == 0 && len(pg.Jobs) != 50) {
			return nil, fmt.Errorf("list page %d: %d jobs, want 50", page+1, len(pg.Jobs))
		}
		for _, j := range pg.Jobs {
			if j.State != engine.StateArchived {
				return nil, fmt.Errorf("list page %d: job %s is %s", page+1, j.ID, j.State)
			}
		}
		if !cursors {
			break
		}
		if page > 0 {
			paths = append(paths, apiBenchPath+"&cursor="+url.QueryEscape(p.Cursor))
		}
		if pg.Next == "" {
			break
		}
		p.Cursor = pg.Next
	}
	return paths, nil
}

// apiBenchPicker returns which path slot i asks for: a cursor page for
// about share of the slots (chosen by a fixed hash of i), the first page
// for the rest.
func apiBenchPicker(paths []string, share float64) func(i int) string {
	if share <= 0 || len(paths) < 2 {
		return func(int) string { return paths[0] }
	}
	return func(i int) string {
		r := rand.New(rand.NewPCG(uint64(i), 20261129))
		if r.Float64() >= share {
			return paths[0]
		}
		return paths[1+r.IntN(len(paths)-1)]
	}
}

// apiBenchWork enqueues demo jobs through the API at a steady rate, for the
// server's workers.
type apiBenchWork struct {
	enqueued atomic.Int64
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	err      error
	once     sync.Once
}

func startAPIBenchWork(ctx context.Context, cl *api.Client, o *benchAPIOptions, log *slog.Logger) *apiBenchWork {
	ctx, cancel := context.WithCancel(ctx)
	w := &apiBenchWork{cancel: cancel, done: make(chan struct{})}
	if o.workRate == 0 {
		close(w.done)
		return w
	}
	go func() {
		defer close(w.done)
		const tick = 100 * time.Millisecond
		t := time.NewTicker(tick)
		defer t.Stop()
		start := time.Now()
		n := 0
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				// Catch up to the rate: how many jobs are due by now.
				due := int(float64(o.workRate)*now.Sub(start).Seconds()) - n
				if due <= 0 {
					continue
				}
				ps := make([]engine.EnqueueParams, due)
				for i := range ps {
					k := n + i
					if k%2 == 0 {
						ps[i] = engine.EnqueueParams{Queue: demo.QueueBilling, Kind: demo.KindInvoiceGenerate, Args: demo.Invoice{
							Invoice: fmt.Sprintf("INV-B%08d", k), Customer: 1000 + k%400, AmountCents: 500 + k%250000,
							Currency: "EUR", WorkMS: o.workMS}}
					} else {
						ps[i] = engine.EnqueueParams{Queue: demo.QueueEmail, Kind: demo.KindReceiptSend, Args: demo.Receipt{
							Invoice: fmt.Sprintf("INV-B%08d", k-1), To: fmt.Sprintf("billing+%d@example.com", 1000+k%400),
							Template: "receipt-v2", WorkMS: o.workMS}}
					}
				}
				n += due
				rs, err := cl.EnqueueMany(ctx, ps)
				if err == nil {
					for _, r := range rs {
						if r.Err != nil {
							err = r.Err
							break
						}
					}
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					log.Warn("bench api: enqueue", "err", err)
					w.mu.Lock()
					if w.err == nil {
						w.err = err
					}
					w.mu.Unlock()
					continue
				}
				w.enqueued.Add(int64(len(ps)))
			}
		}
	}()
	return w
}

func (w *apiBenchWork) stop() {
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
}

func (w *apiBenchWork) firstErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// The load generator.

// apiJobsPrefix starts every list answer.
var apiJobsPrefix = []byte(`{"jobs":[{`)

// wrk.

var (
	reAPIWrkRPS     = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reAPIWrkPct     = regexp.MustCompile(`(?m)^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$`)
	reAPIWrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
	reAPIWrkErrors  = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	reAPIWrkReqs    = regexp.MustCompile(`(\d+) requests in`)
	reAPIWrkLatency = regexp.MustCompile(`(?m)^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\s`)
)
