package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/tui"
)

type tuiOptions struct {
	store    string
	apiURL   string
	token    string
	worker   bool
	readOnly bool
	theme    string
	state    string
	query    string
	actor    string
	keys     string
	mouse    bool

	// retention is --retention (retention.go).
	retention retentionFlag
}

func newTUICmd(lo *logOptions) *cobra.Command {
	o := &tuiOptions{}
	cmd := &cobra.Command{
		Use:   "tui",
		Short: "Open the operations console on a store or an API",
		// The README calls it the console: a user who types that is
		// pointed here rather than left with "unknown command".
		SuggestFor: []string{"console", "ui"},
		Long: `Open the operations console: find the jobs that died, see why, fix the
cause and redrive them.

Embedded: --store URL opens the store in this process (the console runs
maintenance, so bulk operations progress); with --worker it also runs the
demo's workers on their queues. Attached: --api URL [--token T] talks to a
sluice server over HTTP.

Keys are rebindable, in one format (action: key or [keys]; [] unbinds),
in the keys section of the config file (sluice config --help) or in the
keys file, $XDG_CONFIG_HOME/sluice/keys.yaml or the file --keys names,
which wins for the actions it names. JSON is YAML, so a keys.json file
reads as it is: keys.json, the file's earlier name, is read when there
is no keys.yaml.
Logs go to --log-file, never to the terminal (discarded when not given).
NO_COLOR set to anything turns colour off.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTUI(cmd.Context(), o, lo)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "", "store URL to open in this process: sqlite://FILE (or a file path), postgres://… or redis://…")
	f.StringVar(&o.apiURL, "api", "", "URL of a sluice server to attach to (instead of --store)")
	f.StringVar(&o.token, "token", "", "bearer token for --api (env SLUICE_TOKEN)")
	f.BoolVar(&o.worker, "worker", false, "with --store: also run the demo's workers in this process")
	f.BoolVar(&o.readOnly, "read-only", false, "hide every action that changes jobs or queues")
	f.StringVar(&o.theme, "theme", "", "dark, light, high-contrast or mono (default: by the terminal's background)")
	f.StringVar(&o.state, "state", "archived", "state tab to open on")
	f.StringVar(&o.query, "query", "", "filter to open with, in the query grammar (queue:billing kind:x ...)")
	f.StringVar(&o.actor, "actor", "", "your name on the jobs' timelines and operations (default $USER)")
	f.StringVar(&o.keys, "keys", "", "key bindings file, YAML or JSON (default $XDG_CONFIG_HOME/sluice/keys.yaml)")
	f.BoolVar(&o.mouse, "mouse", false, "use the mouse: wheel, row and tab clicks (shift-drag still selects text in most terminals)")
	o.retention.add(f)
	return cmd
}

// consoleOptions are the console settings shared by tui and demo.
func (o *tuiOptions) consoleOptions(ctx context.Context, log *slog.Logger, source string) (tui.Options, error) {
	keysPath := o.keys
	if keysPath == "" {
		keysPath = keymap.DefaultPath(os.Getenv)
	}
	km, err := loadKeyMap(ctx, keysPath)
	if err != nil {
		return tui.Options{}, err
	}
	state := engine.State(o.state)
	if !state.Valid() {
		return tui.Options{}, fmt.Errorf("%w: --state %q is not a state", engine.ErrInvalid, o.state)
	}
	if o.query != "" {
		if _, err := engine.ParseQuery(o.query); err != nil {
			return tui.Options{}, fmt.Errorf("--query: %w", err)
		}
	}
	actor := o.actor
	if actor == "" {
		actor = os.Getenv("USER")
	}
	if actor != "" {
		ctx = engine.WithActor(ctx, actor)
	}
	// An embedded console is its store's owner's; an attached one is
	// given its role and source by the server.
	ctx = engine.WithOrigin(ctx, engine.Origin{Role: engine.RoleAdmin, Surface: engine.SurfaceConsole, Source: "store"})
	return tui.Options{
		ReadOnly: o.readOnly, Theme: o.theme, KeyMap: km, Logger: log, Mouse: o.mouse,
		State: state, Query: o.query, Source: source, Actor: actor, Context: ctx,
	}, nil
}

func runTUI(ctx context.Context, o *tuiOptions, lo *logOptions) error {
	if (o.store == "") == (o.apiURL == "") {
		return fmt.Errorf("tui: give --store URL (embedded) or --api URL (attached)")
	}
	if o.worker && o.store == "" {
		return fmt.Errorf("tui: --worker runs workers in this process and needs --store")
	}
	log, closeLog, err := lo.Logger(nil)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, stop := signalContext(ctx)
	defer stop()

	if o.apiURL != "" {
		ctl := api.NewClient(o.apiURL, o.token, api.ClientOptions{Surface: engine.SurfaceConsole})
		opts, err := o.consoleOptions(ctx, log, redact.URL(o.apiURL))
		if err != nil {
			return err
		}
		return runConsole(ctx, ctl, opts)
	}

	// Only a console that runs workers owns the store: without --worker
	// it never creates or migrates one.
	open := storeurl.OpenExisting
	if o.worker {
		open = storeurl.Open
	}
	storeURL, err := o.retention.archive.storeURL(o.store)
	if err != nil {
		return err
	}
	store, err := open(ctx, storeURL, log)
	if err != nil {
		return err
	}
	defer store.Close()
	cfg := engine.Config{Logger: log, ShutdownTimeout: 5 * time.Second}
	if err := o.retention.apply(&cfg); err != nil {
		return err
	}
	e, err := startEmbedded(ctx, store, cfg, o.worker)
	if err != nil {
		return err
	}
	opts, err := o.consoleOptions(ctx, log, redact.URL(o.store))
	if err != nil {
		stopEngine(ctx, e)
		return err
	}
	runErr := runConsole(ctx, e, opts)
	if err := stopEngine(ctx, e); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// runConsole runs the console until the user quits or a signal comes.
func runConsole(ctx context.Context, ctl engine.Control, opts tui.Options) error {
	err := tui.Run(ctl, opts, tea.WithContext(ctx))
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func stopEngine(ctx context.Context, e *engine.Engine) error {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop engine: %w", err)
	}
	return nil
}
