// Package cli is the sluice command: demo, worker, tui, serve, jobs, bulk,
// operations, quarantine, queues, archive, migrate, config, completion,
// bench and version.
//
// Commands open a store from a URL (internal/storeurl.Open), build an
// engine over it and run until a signal. The binary holds no job kinds but
// the demo's, and those only for demo features (demo, worker --demo,
// tui --worker, serve --demo-workers); a program's own kinds run in the
// program (examples/embedded). The benchmark scenarios are not here either:
// they are internal/bench, which scripts/bench runs.
//
// Logs go to a file or stderr, never to the screen a command draws on.
// Settings come from flags, then SLUICE_* variables, then the config file
// (config.go).
package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
)

// Execute runs the sluice command with the process's arguments and returns
// its exit status.
func Execute() int {
	return run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
}

// Kinds registers job kinds on an engine.
type Kinds func(*engine.Engine) error

// ExecuteWithKinds is Execute for a binary that builds more job kinds into
// `worker`, which then runs them without --demo. The test worker of the
// fault tests (internal/testworker) is such a binary.
func ExecuteWithKinds(kinds Kinds) int {
	return runWith(context.Background(), os.Args[1:], os.Stdout, os.Stderr, kinds)
}

// run is Execute with its inputs given, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, nil)
}

func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, kinds Kinds) int {
	return cmdline.Run(ctx, newRootEnv(os.LookupEnv, kinds), "sluice", args, stdout, stderr)
}

// logOptions are the flags every command shares.
type logOptions = cmdline.LogOptions

func newRoot() *cobra.Command { return newRootEnv(os.LookupEnv, nil) }

// newRootEnv is newRoot reading settings from the environment lookupEnv
// gives, for tests, with kinds built into worker.
func newRootEnv(lookupEnv func(string) (string, bool), kinds Kinds) *cobra.Command {
	lo := &logOptions{}
	s := &settings{lookupEnv: lookupEnv}
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Sluice: a job engine with an operations console",
		Long: `Sluice runs background jobs and helps you on the bad day: find the jobs
that died, see why, fix the cause and redrive them.

Stores are named by URL: sqlite://FILE (relative), sqlite:///abs/path or a
bare file path; postgres://USER@HOST:PORT/DB (?schema=NAME); redis://HOST:PORT/DB
(?ns=NAME), rediss:// and redis+cluster://HOST1:PORT,HOST2:PORT. The README's
"Store URLs" lists every parameter.

Settings: every flag that is a setting (not what one command acts on) can
also come from the environment as SLUICE_<FLAG> (SLUICE_STORE, SLUICE_API,
SLUICE_TOKEN, SLUICE_LOG_LEVEL, ...) and from the config file,
$XDG_CONFIG_HOME/sluice/config.yaml (or --config FILE, or SLUICE_CONFIG).
A flag beats the environment, which beats the file. See sluice config
--help for the file's format, and sluice config show CMD for where each
setting of a command comes from.

Shell completion: sluice completion bash|zsh|fish|powershell --help.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return s.prepare(cmd)
		},
	}
	lo.AddFlags(root.PersistentFlags(), "write logs to this file (default: stderr for worker and serve, none for the others)")
	root.PersistentFlags().StringVar(&s.configFlag, "config", "", "config file (default $XDG_CONFIG_HOME/sluice/config.yaml; env SLUICE_CONFIG)")
	root.AddCommand(newDemoCmd(lo), newWorkerCmd(lo, kinds), newBenchCmd(lo), newTUICmd(lo))
	root.AddCommand(controlCommands(lo)...)
	root.AddCommand(newMigrateCmd(lo), newConfigCmd(s), newVersionCmd())
	root.AddCommand(newArchiveCmd())
	root.Version = currentVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	registerCompletions(root)
	cmdline.RefuseUnknownCommands(root)
	return root
}

// signalContext is cancelled by the first SIGINT or SIGTERM; a second one
// gets the default behaviour (the process ends at once).
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
