// Command embedded is a Go program that runs Sluice the embedded way: its
// own job kinds and handlers, its workers and the operations console, in
// one process on one SQLite file. This is where workers live: in your
// program, next to the code they call (`sluice worker` carries no kinds of
// yours).
//
//	go run ./examples/embedded               # the console in this terminal; q quits
//	go run ./examples/embedded -headless     # workers only, until Ctrl-C
//	sluice tui --store sqlite://embedded.db  # the console from another terminal
//
// A few sample jobs are enqueued at start: welcome emails that are sent or
// skipped, and thumbnails of which one fails until it is archived, so the
// console opens on a dead job to inspect and retry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/tui"
)

// The program's queues and kinds.
const (
	QueueEmail  = "email"
	QueueMedia  = "media"
	KindWelcome = "welcome.send"
	KindThumb   = "thumbnail.render"
)

// Signup is welcome.send's payload.
type Signup struct {
	Email string `json:"email"`
	Plan  string `json:"plan"`
}

// Thumbnail is thumbnail.render's payload.
type Thumbnail struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func sendWelcome(_ context.Context, _ *engine.Job, s Signup) error {
	if !strings.Contains(s.Email, "@") {
		// Retrying cannot help: archive it at once, with the reason.
		return engine.Skip(fmt.Sprintf("%q is not an email address", s.Email))
	}
	return nil // a real program sends the email here
}

func renderThumbnail(ctx context.Context, _ *engine.Job, t Thumbnail) error {
	if t.Width <= 0 || t.Width > 4096 {
		return fmt.Errorf("render %s: width %d out of range 1..4096", t.Image, t.Width)
	}
	return ctx.Err()
}

// newEngine builds the engine over store with this program's queues and
// kinds; Start runs its workers and maintenance.
func newEngine(store *sqlite.Store, log *slog.Logger) (*engine.Engine, error) {
	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{
			QueueEmail: {Concurrency: 4},
			QueueMedia: {Concurrency: 2},
		},
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	kinds := []engine.Kind{
		{Name: KindWelcome, Handler: engine.TypedHandler(sendWelcome), MaxAttempts: 5},
		{Name: KindThumb, Handler: engine.TypedHandler(renderThumbnail), MaxAttempts: 2,
			Backoff: func(int) time.Duration { return 500 * time.Millisecond }},
	}
	for _, k := range kinds {
		if err := e.Register(k); err != nil {
			return nil, err
		}
	}
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) {
		log.Warn("job died", "job", ev.Job.ID, "kind", ev.Job.Kind, "reason", ev.Reason, "err", ev.Error)
	})
	return e, nil
}

// enqueueSamples enqueues the sample jobs: three sent, one skipped, one
// thumbnail rendered and one that fails until it is archived.
func enqueueSamples(ctx context.Context, e *engine.Engine) error {
	ps := []engine.EnqueueParams{
		{Queue: QueueEmail, Kind: KindWelcome, Args: Signup{Email: "ann@example.com", Plan: "pro"}},
		{Queue: QueueEmail, Kind: KindWelcome, Args: Signup{Email: "bob@example.com", Plan: "free"}},
		{Queue: QueueEmail, Kind: KindWelcome, Args: Signup{Email: "cy@example.com", Plan: "free"}},
		{Queue: QueueEmail, Kind: KindWelcome, Args: Signup{Email: "not-an-address", Plan: "free"}},
		{Queue: QueueMedia, Kind: KindThumb, Args: Thumbnail{Image: "cat.png", Width: 256}},
		{Queue: QueueMedia, Kind: KindThumb, Args: Thumbnail{Image: "banner.png", Width: 10000}},
	}
	rs, err := e.EnqueueMany(ctx, ps)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func main() {
	db := flag.String("db", "embedded.db", "SQLite file (created and migrated when missing)")
	headless := flag.Bool("headless", false, "run the workers only, without the console")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *db, *headless); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, path string, headless bool) error {
	// Logs go to a file: the console draws on the terminal.
	logf, err := os.OpenFile(path+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, nil))

	store, err := sqlite.Open(ctx, path, sqlite.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	e, err := newEngine(store, log)
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer func() {
		// Running jobs get the shutdown timeout to finish; unfinished
		// ones go back to available without charging an attempt.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := e.Stop(stopCtx); err != nil {
			log.Warn("stop", "err", err)
		}
	}()
	if err := enqueueSamples(ctx, e); err != nil {
		return err
	}
	if headless {
		fmt.Printf("working %s; Ctrl-C stops (logs in %s.log)\n", path, path)
		<-ctx.Done()
		return nil
	}
	// The console is handed the engine itself: it is an engine.Control.
	err = tui.Run(e, tui.Options{Source: "sqlite://" + path, Logger: log}, tea.WithContext(ctx))
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
