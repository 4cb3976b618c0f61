package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

type demoOptions struct {
	// retention is --retention (retention.go).
	retention retentionFlag
	db        string
	store     string
	trickle   time.Duration
	every     time.Duration
	plain     bool
	outage    time.Duration
	backlog   int
	console   tuiOptions
}

func newDemoCmd(lo *logOptions) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the demo: workers on a store, seeded with jobs that live and die",
		Long: `Run an embedded engine with the demo's workers (queues billing, email and
reports) on a SQLite file (--db) or on the store a URL names (--store, e.g.
postgres://...); the demo sets its store up itself: it always migrates it.
An empty store is seeded with the operator's night: a few thousand invoices
killed by an outage of the billing database (--backlog), which ends a few
minutes in (--outage; invoices retried after it succeed), and a few hundred
other jobs — most succeed, some fail until they are archived (bad data: they
succeed once their payload is fixed), one is a poison pill that is
quarantined, some are undecodable, two miss their deadline — and a steady
trickle of new jobs follows.

The operations console opens on the archived jobs; q quits and stops the
engine gracefully. With --plain a text summary of what this process did is
printed every second instead, until Ctrl-C.

Logs are discarded unless --log-file is given; they never reach the screen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), o, lo, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.db, "db", "sluice-demo.db", "SQLite file (a path or sqlite:// URL): the shorthand of --store for SQLite")
	cmd.Flags().StringVar(&o.store, "store", "", "store URL (sqlite://FILE, postgres://...); replaces --db")
	cmd.MarkFlagsMutuallyExclusive("db", "store")
	cmd.Flags().DurationVar(&o.trickle, "trickle", 500*time.Millisecond, "enqueue one new job this often (0 turns the trickle off)")
	cmd.Flags().DurationVar(&o.every, "refresh", time.Second, "how often the --plain summary is printed")
	cmd.Flags().BoolVar(&o.plain, "plain", false, "print a text summary instead of opening the console")
	cmd.Flags().DurationVar(&o.outage, "outage", demo.DefaultOutage, "how long the billing database's outage lasts from the seed; invoices retried after it succeed")
	cmd.Flags().IntVar(&o.backlog, "backlog", demo.DefaultBacklog, "how many invoices the outage killed before the demo opened (seeded on an empty file)")
	cmd.Flags().BoolVar(&o.console.readOnly, "read-only", false, "open the console without the actions that change jobs")
	cmd.Flags().StringVar(&o.console.theme, "theme", "", "console theme: dark, light, high-contrast or mono")
	cmd.Flags().BoolVar(&o.console.mouse, "mouse", false, "use the mouse: wheel, row and tab clicks")
	cmd.Flags().StringVar(&o.console.state, "state", "archived", "state tab the console opens on")
	o.retention.add(cmd.Flags())
	return cmd
}

func runDemo(ctx context.Context, o *demoOptions, lo *logOptions, out io.Writer) error {
	log, closeLog, err := lo.Logger(nil)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, stop := signalContext(ctx)
	defer stop()

	storeURL := o.db
	if o.store != "" {
		storeURL = o.store
	}
	t, err := storeurl.Parse(storeURL)
	if err != nil {
		return err
	}
	if o.store == "" && t.Backend != "sqlite" {
		return fmt.Errorf("demo: --db names a SQLite file; got a %s url (use --store for it)", t.Backend)
	}
	// What the console's title and the summary call the store: never a
	// password.
	label := redact.URL(storeURL)
	if t.Backend == "sqlite" {
		label = "sqlite://" + t.Path
	}
	// The demo owns its store and sets it up: OpenStore creates and
	// migrates (DESIGN.md, "Creating and migrating a store").
	openURL := storeURL
	if t.Backend == "postgres" && !strings.Contains(storeURL, "migrate=") {
		// On PostgreSQL a process migrates only when told; the demo is
		// always told (the backend's migrate=true parameter).
		sep := "?"
		if strings.Contains(storeURL, "?") {
			sep = "&"
		}
		openURL += sep + "migrate=true"
	}
	if openURL, err = o.retention.archive.storeURL(openURL); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	store, err := storeurl.Open(ctx, openURL, log)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer store.Close()

	// The tally counts what this process does for the --plain summary; it
	// wraps the store as a plain backend.Store, which hides the operator
	// surface the console needs, so the console runs on the store itself.
	tally := demo.NewTally()
	// Not a terminal (a pipe, a file, a test): the console cannot be
	// drawn, the summary can.
	plain := o.plain || !isTerminal(out)
	var engStore backend.Store = store
	if plain {
		engStore = tally.Wrap(store)
	}
	cfg := engine.Config{
		Queues: map[string]engine.QueueConfig{
			demo.QueueBilling: {Concurrency: 8},
			demo.QueueEmail:   {Concurrency: 8},
			demo.QueueReports: {Concurrency: 4},
		},
		CrashBackoff:    demo.CrashBackoff,
		ShutdownTimeout: 5 * time.Second,
		Logger:          log,
	}
	if err := o.retention.apply(&cfg); err != nil {
		return err
	}
	e, err := engine.New(engStore, cfg)
	if err != nil {
		return err
	}
	if err := demo.Register(e); err != nil {
		return err
	}
	e.OnDead(tally.OnDead)
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) {
		log.Warn("job died", "job", ev.Job.ID, "kind", ev.Job.Kind, "queue", ev.Job.Queue, "reason", ev.Reason, "err", ev.Error)
	})

	story, seeded, err := demo.StoryOf(ctx, store, o.outage, o.backlog)
	if err != nil {
		return err
	}
	note := "the store was seeded before: not seeding again"
	if !seeded {
		if err := demo.Seed(ctx, e, story); err != nil {
			return err
		}
		note = "seeded the store"
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	if o.trickle > 0 {
		go demo.Trickle(ctx, e, o.trickle, story)
	}
	if !plain {
		copts, err := o.console.consoleOptions(ctx, log, label+" · demo")
		if err != nil {
			stopEngine(ctx, e)
			return err
		}
		runErr := runConsole(ctx, e, copts)
		if err := stopEngine(ctx, e); err != nil && runErr == nil {
			runErr = err
		}
		return runErr
	}

	scr := newDemoScreen(out, label, note)
	every := o.every
	if every <= 0 {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	scr.draw(tally.Snapshot())
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-tick.C:
			scr.draw(tally.Snapshot())
		}
	}

	fmt.Fprintln(out, "\nstopping: waiting for running jobs (at most 5s)...")
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop engine: %w", err)
	}
	fmt.Fprintln(out, "stopped. "+summaryLine(tally.Snapshot()))
	return nil
}

// isTerminal reports whether out is a terminal.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// demoScreen prints the summary: redrawn in place on a terminal, one line
// per refresh otherwise.
type demoScreen struct {
	out   io.Writer
	tty   bool
	path  string
	note  string
	start time.Time
}

func newDemoScreen(out io.Writer, path, note string) *demoScreen {
	tty := false
	if f, ok := out.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = os.Getenv("TERM") != "dumb"
		}
	}
	return &demoScreen{out: out, tty: tty, path: path, note: note, start: time.Now()}
}

func (s *demoScreen) draw(snap demo.Snapshot) {
	up := time.Since(s.start).Truncate(time.Second)
	if !s.tty {
		fmt.Fprintf(s.out, "%s up %s  %s\n", time.Now().Format("15:04:05"), up, summaryLine(snap))
		return
	}
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J") // home, clear
	fmt.Fprintf(&b, "sluice demo · %s · up %s · Ctrl-C stops\n", s.path, up)
	fmt.Fprintf(&b, "%s; counts are what this process did since it started.\n\n", s.note)
	renderTable(&b, snap)
	b.WriteString("\n" + summaryLine(snap) + "\n")
	if len(snap.Deaths) > 0 {
		b.WriteString("\nlatest deaths\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for i := len(snap.Deaths) - 1; i >= 0; i-- {
			d := snap.Deaths[i]
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", d.At.Format("15:04:05"), d.Reason, sanitize(d.Kind, 24),
				sanitize(d.JobID, 36), sanitize(d.Error, 70))
		}
		tw.Flush()
	}
	_, _ = io.WriteString(s.out, b.String())
}

// renderTable writes the per-queue counts: names left, numbers right.
func renderTable(w io.Writer, snap demo.Snapshot) {
	cols := []string{"enqueued", "running", "completed", "failed", "crashed", "archived", "quarantined", "undecodable"}
	rows := append(append([]demo.QueueTally(nil), snap.Queues...), snap.Total)
	nameW := len("queue")
	for _, q := range rows {
		nameW = max(nameW, len([]rune(sanitize(q.Queue, 20))))
	}
	fmt.Fprintf(w, "%-*s", nameW, "queue")
	for _, c := range cols {
		fmt.Fprintf(w, "  %s", c)
	}
	fmt.Fprintln(w)
	for _, q := range rows {
		name := sanitize(q.Queue, 20)
		fmt.Fprintf(w, "%s%s", name, strings.Repeat(" ", nameW-len([]rune(name))))
		for i, v := range []int{q.Enqueued, q.Running, q.Completed, q.Failed, q.Crashed, q.Archived, q.Quarantined, q.Undecodable} {
			fmt.Fprintf(w, "  %*d", len(cols[i]), v)
		}
		fmt.Fprintln(w)
	}
}

// summaryLine is the one-line summary of a snapshot.
func summaryLine(snap demo.Snapshot) string {
	t := snap.Total
	line := fmt.Sprintf("enqueued %d · ran %d · completed %d · dead %d (archived %d, quarantined %d) · undecodable %d · running %d",
		t.Enqueued, t.Ran, t.Completed, t.Dead(), t.Archived, t.Quarantined, t.Undecodable, t.Running)
	if t.Refused > 0 {
		line += fmt.Sprintf(" · refused %d", t.Refused)
	}
	if snap.StoreErrors > 0 {
		line += fmt.Sprintf(" · store errors %d", snap.StoreErrors)
	}
	return line
}

// sanitize makes a string from a job safe to print on a terminal: control
// characters and escape sequences are shown escaped, never executed, and
// the result is cut to max runes.
func sanitize(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n >= max {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}
