package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/tui"
)

type benchConsoleOptions struct {
	store         string
	jobs          int
	width, height int
	concurrency   int
	batch         int
	label         string
	timeout       time.Duration
	// noMaintenance runs the console's engine without maintenance, to
	// tell what the startup maintenance costs the first frame.
	noMaintenance bool
	// Set on the measuring run that follows a seeding run.
	measureOnly bool
	seeded      int
	seedSeconds float64
}

func newBenchConsoleCmd(lo *cmdline.LogOptions) *cobra.Command {
	o := &benchConsoleOptions{}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Time the console's first frame and scroll it through N archived jobs, headless",
		Long: `Seed the store with archived jobs until it holds at least N (through the
engine: jobs enqueued with one attempt, run by workers whose handler fails),
then run the real console (the tui package's model in a Bubble Tea program,
with no terminal: a fixed --width x --height, output discarded) on an
embedded engine over the store, as "sluice tui --store" does, and:

  - first_frame_ms: from the program's start to the first frame holding
    job rows written to the output (startup_ms counts from before the
    store is opened);
  - scroll: page-down key presses, each sent once the previous one has
    moved the cursor, until the cursor is on the last job; rows_seen counts
    the distinct jobs drawn on the way, so it equals the archived count
    when no row was skipped; then g and G, timed;
  - peak_rss_mb: VmRSS of this process, from /proc/self/status, sampled
    every 50ms from before the store is opened to the end; hwm_rss_mb is
    the kernel's VmHWM.

When it seeds, the measurement runs in a fresh process (this binary again),
so the seeding's memory is not counted. A SQLite file is never deleted.

Prints one key=value result line on stdout; progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchConsole(cmd.Context(), o, lo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "", "store URL (required); kept between runs")
	f.IntVar(&o.jobs, "jobs", 1_000_000, "archived jobs the store must hold (seeded when fewer)")
	f.IntVar(&o.width, "width", 120, "terminal width")
	f.IntVar(&o.height, "height", 40, "terminal height")
	f.IntVar(&o.concurrency, "concurrency", 32, "seeding: failing handlers run at once per queue")
	f.IntVar(&o.batch, "batch", 1000, "seeding: jobs per EnqueueMany call")
	f.StringVar(&o.label, "label", "main", "free-form variant label echoed in the result line")
	f.DurationVar(&o.timeout, "timeout", 60*time.Minute, "overall timeout")
	f.BoolVar(&o.noMaintenance, "no-maintenance", false, "diagnostic: run the console's engine without maintenance (unlike sluice tui)")
	f.BoolVar(&o.measureOnly, "measure-only", false, "do not seed")
	f.IntVar(&o.seeded, "seeded", 0, "jobs the seeding run added (echoed)")
	f.Float64Var(&o.seedSeconds, "seed-seconds", 0, "seconds the seeding run took (echoed)")
	for _, name := range []string{"no-maintenance", "measure-only", "seeded", "seed-seconds"} {
		_ = f.MarkHidden(name)
	}
	_ = cmd.MarkFlagRequired("store")
	return cmd
}

func runBenchConsole(ctx context.Context, o *benchConsoleOptions, lo *cmdline.LogOptions, stdout, stderr io.Writer) error {
	var res benchResult
	res.add("system", "sluice")
	res.add("scenario", "console")
	res.add("label", o.label)
	res.add("jobs", o.jobs)
	res.add("lib", libVersion())
	res.add("go", runtime.Version())
	res.add("gomaxprocs", runtime.GOMAXPROCS(0))
	fail := func(err error) error { return printBenchResult(stdout, &res, err) }
	if o.jobs <= 0 || o.width < 60 || o.height < 16 || o.concurrency <= 0 || o.batch <= 0 {
		return fail(errors.New("--jobs, --concurrency and --batch must be positive, the terminal at least 60x16"))
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	log, closeLog, err := lo.Logger(nil)
	if err != nil {
		return fail(err)
	}
	defer closeLog()
	progress := benchProgress(stderr, "bench console")

	if !o.measureOnly {
		seeded, took, err := benchConsoleSeed(ctx, o, log, progress)
		if err != nil {
			return fail(fmt.Errorf("seed: %w", err))
		}
		if seeded > 0 {
			// Measure in a fresh process: this one's heap and page
			// caches have seen a million inserts.
			return benchConsoleReexec(ctx, o, lo, seeded, took, stdout, stderr)
		}
	}
	res.add("seeded", o.seeded)
	res.add("seed_seconds", o.seedSeconds)
	return printBenchResult(stdout, &res, benchConsoleMeasure(ctx, o, log, progress, &res))
}

// asMainEnv set to 1 makes a test binary of this package run main, so the
// console scenario can re-execute itself under go test too.
const asMainEnv = "SLUICE_BENCH_AS_MAIN"

// benchConsoleReexec runs the measurement in a new process of this binary.
func benchConsoleReexec(ctx context.Context, o *benchConsoleOptions, lo *cmdline.LogOptions, seeded int, took time.Duration, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"console", "--measure-only",
		"--store", o.store, "--jobs", strconv.Itoa(o.jobs),
		"--width", strconv.Itoa(o.width), "--height", strconv.Itoa(o.height),
		"--label", o.label, "--timeout", o.timeout.String(),
		"--seeded", strconv.Itoa(seeded), "--seed-seconds", strconv.FormatFloat(took.Seconds(), 'f', 1, 64),
		"--log-level", lo.Level}
	if lo.File != "" {
		args = append(args, "--log-file", lo.File)
	}
	if o.noMaintenance {
		args = append(args, "--no-maintenance")
	}
	c := exec.CommandContext(ctx, exe, args...)
	c.Env = append(os.Environ(), asMainEnv+"=1")
	c.Stdout, c.Stderr = stdout, stderr
	if err := c.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return cmdline.ExitError{Code: ee.ExitCode()}
		}
		return err
	}
	return nil
}

// Seeding: jobs like an operator's bad day, spread over three queues and
// kinds, each failing its one attempt with an error of its own.

var benchConsoleKinds = []struct{ queue, kind string }{
	{"billing", "invoice.generate"},
	{"email", "receipt.send"},
	{"reports", "report.render"},
}

func benchConsoleError(j *engine.Job) error {
	h := fnv.New32a()
	h.Write([]byte(j.ID))
	n := h.Sum32()
	switch n % 4 {
	case 0:
		return fmt.Errorf("dial tcp 10.0.%d.%d:5432: connect: connection refused", n>>8&0xff, n>>16&0xff)
	case 1:
		return fmt.Errorf("invalid currency %q in invoice %d", []string{"EURO", "US$", "GBp"}[n%3], n>>4)
	case 2:
		return fmt.Errorf("template not found: receipt-v%d", n%7)
	}
	return fmt.Errorf("render report %d: context deadline exceeded after 30s", n>>4)
}

// archivedCount reads the maintained counters.
func archivedCount(ctx context.Context, ctl engine.Control) (int64, error) {
	c, err := ctl.Counts(ctx, "")
	if err != nil {
		return 0, err
	}
	return c.Total[engine.StateArchived], nil
}

// benchConsoleSeed tops the store up to o.jobs archived jobs and returns
// how many it added.
func benchConsoleSeed(ctx context.Context, o *benchConsoleOptions, log *slog.Logger, progress func(string, ...any)) (int, time.Duration, error) {
	store, err := storeurl.Open(ctx, o.store, log)
	if err != nil {
		return 0, 0, err
	}
	defer store.Close()
	queues := map[string]engine.QueueConfig{}
	for _, k := range benchConsoleKinds {
		queues[k.queue] = engine.QueueConfig{Concurrency: o.concurrency}
	}
	e, err := engine.New(store, engine.Config{
		Queues: queues, MaxAttempts: 1, Logger: log,
		// Keep every dead job, however long the seeding takes.
		Retention: map[engine.State]time.Duration{},
	})
	if err != nil {
		return 0, 0, err
	}
	for _, k := range benchConsoleKinds {
		err := e.Register(engine.Kind{Name: k.kind, MaxAttempts: 1, Handler: func(_ context.Context, j *engine.Job) error {
			return benchConsoleError(j)
		}})
		if err != nil {
			return 0, 0, err
		}
	}
	have, err := archivedCount(ctx, e)
	if err != nil {
		return 0, 0, err
	}
	need := o.jobs - int(have)
	if need <= 0 {
		progress("%s holds %d archived jobs: no seeding", redact.URL(o.store), have)
		return 0, 0, nil
	}
	t0 := time.Now()
	progress("%s holds %d archived jobs: enqueueing %d", redact.URL(o.store), have, need)
	for start := 0; start < need; start += o.batch {
		ps := make([]engine.EnqueueParams, min(o.batch, need-start))
		for i := range ps {
			n := int(have) + start + i
			k := benchConsoleKinds[n%len(benchConsoleKinds)]
			ps[i] = engine.EnqueueParams{Queue: k.queue, Kind: k.kind, MaxAttempts: 1,
				Payload: fmt.Appendf(nil, `{"n":%d,"customer":"cus_%06d","amount":%d}`, n, n%100_000, n%9973)}
		}
		rs, err := e.EnqueueMany(ctx, ps)
		if err != nil {
			return 0, 0, fmt.Errorf("enqueue: %w", err)
		}
		for _, r := range rs {
			if r.Err != nil {
				return 0, 0, fmt.Errorf("enqueue: %w", r.Err)
			}
		}
		if done := start + len(ps); done%100_000 < o.batch {
			progress("enqueued %d of %d", done, need)
		}
	}
	progress("enqueued %d in %.1fs; working them to archived", need, time.Since(t0).Seconds())
	if err := e.Start(ctx); err != nil {
		return 0, 0, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = e.Stop(context.WithoutCancel(ctx))
		}
	}()
	t1 := time.Now()
	for {
		n, err := archivedCount(ctx, e)
		if err != nil {
			return 0, 0, err
		}
		if n >= int64(o.jobs) {
			break
		}
		progress("archived %d of %d (%.0f/s)", n, o.jobs, float64(n-have)/time.Since(t1).Seconds())
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	stopped = true
	if err := e.Stop(ctx); err != nil {
		return 0, 0, err
	}
	took := time.Since(t0)
	progress("seeded %d archived jobs in %.1fs", need, took.Seconds())
	return need, took, nil
}

// Measuring.

var (
	reJobID    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	rePosition = regexp.MustCompile(`([\d,]+) of ([\d,]+)(\+?)`)
)

// consoleProbe wraps the console model and reads every frame it draws:
// the job ids on screen and the position on the status line.
type consoleProbe struct {
	tea.Model
	firstRows func() // called once, on the first frame with job rows

	mu        sync.Mutex
	last      string
	onScreen  map[string]bool
	rowsSeen  int64
	frames    int64
	pos       int64
	total     int64
	exact     bool // the total is not a lower bound
	firstSeen bool
	changed   chan struct{}
}

func (p *consoleProbe) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := p.Model.Update(msg)
	return p, cmd
}

func (p *consoleProbe) View() tea.View {
	v := p.Model.View()
	p.observe(v.Content)
	return v
}

func (p *consoleProbe) observe(content string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frames++
	if content == p.last {
		return
	}
	p.last = content
	plain := ansi.Strip(content)
	ids := reJobID.FindAllString(plain, -1)
	now := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !p.onScreen[id] && !now[id] {
			p.rowsSeen++
		}
		now[id] = true
	}
	p.onScreen = now
	if len(ids) > 0 && !p.firstSeen {
		p.firstSeen = true
		p.firstRows()
	}
	if ms := rePosition.FindAllStringSubmatch(plain, -1); len(ms) > 0 {
		m := ms[len(ms)-1] // the status line is the last line
		pos, _ := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
		total, _ := strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
		if pos != p.pos || total != p.total {
			p.pos, p.total, p.exact = pos, total, m[3] == ""
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
	}
}

func (p *consoleProbe) state() (pos, total int64, exact bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos, p.total, p.exact
}

// waitFor waits until ok holds for the position, or d passes.
func (p *consoleProbe) waitFor(ctx context.Context, d time.Duration, ok func(pos, total int64, exact bool) bool) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		if ok(p.state()) {
			return nil
		}
		select {
		case <-p.changed:
		case <-deadline.C:
			pos, total, _ := p.state()
			return fmt.Errorf("console stuck at %d of %d", pos, total)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// frameWriter stands in for the terminal: it notes when the first frame
// holding job rows is written.
type frameWriter struct {
	mu      sync.Mutex
	armed   bool
	firstAt time.Time
	first   chan struct{}
	bytes   int64
}

func (w *frameWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bytes += int64(len(b))
	if w.armed && w.firstAt.IsZero() {
		w.firstAt = time.Now()
		close(w.first)
	}
	return len(b), nil
}

func (w *frameWriter) arm() {
	w.mu.Lock()
	w.armed = true
	w.mu.Unlock()
}

func benchConsoleMeasure(ctx context.Context, o *benchConsoleOptions, log *slog.Logger, progress func(string, ...any), res *benchResult) error {
	rss := startRSSSampler(os.Getpid(), 50*time.Millisecond)
	defer rss.close()
	t0 := time.Now()
	store, err := storeurl.Open(ctx, o.store, log)
	if err != nil {
		return err
	}
	defer store.Close()
	// As sluice tui --store: an embedded engine with maintenance, no
	// workers.
	e, err := engine.New(store, engine.Config{Logger: log, ShutdownTimeout: 5 * time.Second, NoMaintenance: o.noMaintenance})
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = stopEngine(ctx, e) }()
	openDur := time.Since(t0)
	archived, err := archivedCount(ctx, e)
	if err != nil {
		return err
	}
	res.add("archived", archived)
	if archived < int64(o.jobs) {
		return fmt.Errorf("the store holds %d archived jobs, not %d: changed since it was seeded?", archived, o.jobs)
	}
	res.add("maintenance", !o.noMaintenance)
	res.add("width", o.width)
	res.add("height", o.height)

	out := &frameWriter{first: make(chan struct{})}
	pctx, stopProgram := context.WithCancel(ctx)
	defer stopProgram()
	model := tui.New(e, tui.Options{
		Theme: "dark", KeyMap: keymap.Default(), Logger: log, State: engine.StateArchived,
		Source: redact.URL(o.store), Context: pctx, Getenv: func(string) string { return "" },
	})
	probe := &consoleProbe{Model: model, firstRows: out.arm, changed: make(chan struct{}, 1)}
	prog := tea.NewProgram(probe,
		tea.WithContext(pctx), tea.WithInput(nil), tea.WithOutput(out),
		tea.WithWindowSize(o.width, o.height), tea.WithColorProfile(colorprofile.TrueColor),
		tea.WithEnvironment([]string{"TERM=xterm-256color"}), tea.WithoutSignalHandler())
	progStart := time.Now()
	runErr := make(chan error, 1)
	go func() {
		_, err := prog.Run()
		runErr <- err
	}()
	quit := func() error {
		prog.Quit()
		select {
		case err := <-runErr:
			if errors.Is(err, tea.ErrProgramKilled) {
				return nil
			}
			return err
		case <-time.After(10 * time.Second):
			stopProgram()
			return errors.New("the console did not quit")
		}
	}

	select {
	case <-out.first:
	case err := <-runErr:
		return fmt.Errorf("the console ended before its first frame: %v", err)
	case <-time.After(time.Minute):
		_ = quit()
		return errors.New("no frame with job rows within a minute")
	}
	out.mu.Lock()
	firstAt := out.firstAt
	out.mu.Unlock()
	res.add("open_ms", float64(openDur.Microseconds())/1000)
	res.add("first_frame_ms", float64(firstAt.Sub(progStart).Microseconds())/1000)
	res.add("startup_ms", float64(firstAt.Sub(t0).Microseconds())/1000)
	progress("first frame with rows %.1fms after the program started (%.1fms after opening the store)",
		float64(firstAt.Sub(progStart).Microseconds())/1000, float64(firstAt.Sub(t0).Microseconds())/1000)
	rssFirst, _ := procStatus(os.Getpid())
	res.add("rss_first_frame_mb", mb(rssFirst))

	// The counters give the total; wait for it on the status line.
	if err := probe.waitFor(ctx, time.Minute, func(_, total int64, exact bool) bool { return exact && total > 0 }); err != nil {
		_ = quit()
		return fmt.Errorf("waiting for the count: %w", err)
	}
	_, total, _ := probe.state()
	progress("scrolling through %d jobs", total)
	pgdown := tea.KeyPressMsg{Code: tea.KeyPgDown}
	scrollStart := time.Now()
	keys := 0
	lastReport := time.Now()
	for {
		pos, total, _ := probe.state()
		if pos >= total {
			break
		}
		prog.Send(pgdown)
		keys++
		if err := probe.waitFor(ctx, 30*time.Second, func(p, _ int64, _ bool) bool { return p != pos }); err != nil {
			_ = quit()
			return fmt.Errorf("page down: %w", err)
		}
		if time.Since(lastReport) > 10*time.Second {
			lastReport = time.Now()
			cur, _ := procStatus(os.Getpid())
			progress("at %d of %d, rss %.1f MB (peak %.1f MB)", pos, total, mb(cur), mb(rss.peak.Load()))
		}
	}
	scrollDur := time.Since(scrollStart)
	probe.mu.Lock()
	rowsSeen, frames := probe.rowsSeen, probe.frames
	probe.mu.Unlock()
	res.add("keys", keys)
	res.add("rows_seen", rowsSeen)
	res.add("scroll_seconds", scrollDur)
	res.add("rows_per_sec", float64(rowsSeen)/scrollDur.Seconds())
	res.add("frames", frames)

	// The jumps: g loads the top, G the end, whatever the distance.
	jump := func(key tea.KeyPressMsg, want func(pos, total int64) bool) (time.Duration, error) {
		t := time.Now()
		prog.Send(key)
		err := probe.waitFor(ctx, 30*time.Second, func(p, n int64, _ bool) bool { return want(p, n) })
		return time.Since(t), err
	}
	top, err := jump(tea.KeyPressMsg{Code: 'g', Text: "g"}, func(p, _ int64) bool { return p == 1 })
	if err != nil {
		_ = quit()
		return fmt.Errorf("g: %w", err)
	}
	bottom, err := jump(tea.KeyPressMsg{Code: 'G', Text: "G"}, func(p, n int64) bool { return p == n })
	if err != nil {
		_ = quit()
		return fmt.Errorf("key G: %w", err)
	}
	res.add("jump_top_ms", float64(top.Microseconds())/1000)
	res.add("jump_bottom_ms", float64(bottom.Microseconds())/1000)

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss.close()
	_, hwm := procStatus(os.Getpid())
	res.add("peak_rss_mb", mb(rss.peak.Load()))
	res.add("peak_rss_at_seconds", time.Unix(0, rss.peakAt.Load()).Sub(t0))
	res.add("hwm_rss_mb", mb(hwm))
	res.add("heap_inuse_mb", float64(ms.HeapInuse)/(1<<20))
	res.add("go_sys_mb", float64(ms.Sys)/(1<<20))
	if err := quit(); err != nil {
		return err
	}
	if rowsSeen != total {
		return fmt.Errorf("drew %d distinct jobs scrolling through %d", rowsSeen, total)
	}
	return nil
}
