package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
	"github.com/sluicehq/sluice/internal/termtext"
)

// The operator commands: jobs, errors, bulk, operations, quarantine and queues.
// Each works against a server (--api URL, with --token) or directly on a
// store (--store URL), through engine.Control either way. This file holds
// what they share: the target flags and session, the output as a table or
// JSON, confirmation and the filter flags; each command tree has its own
// file (jobs_cmd.go, errors.go, bulk.go, operations_cmd.go,
// quarantine_cmd.go, queues_cmd.go).

// controlCommands are the operator commands, for the root.
func controlCommands(lo *logOptions) []*cobra.Command {
	return []*cobra.Command{
		newServeCmd(lo),
		newJobsCmd(), newErrorsCmd(), newBulkCmd(), newOperationsCmd(), newQuarantineCmd(), newQueuesCmd(), newLimitsCmd(),
		newSchedulesCmd(), newAuditCmd(),
	}
}

// ctlOptions are the flags every operator command shares.
type ctlOptions struct {
	api    string
	token  string
	store  string
	output string
	yes    bool
}

func (o *ctlOptions) addFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.api, "api", "", "control API of a sluice server, as http://127.0.0.1:8080 (env SLUICE_API)")
	f.StringVar(&o.token, "token", "", "bearer token for --api (env SLUICE_TOKEN)")
	f.StringVar(&o.store, "store", "", "act directly on a store, as sqlite://sluice.db (env SLUICE_STORE)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
}

// session is an open Control and what to close after.
type session struct {
	ctl    engine.Control
	engine *engine.Engine // set in --store mode
	close  func()
	ctx    context.Context
}

// open opens the Control --api or --store names (the root has resolved
// them from flag, environment and config file already).
func (o *ctlOptions) open(cmd *cobra.Command) (*session, error) {
	if o.output != "table" && o.output != "json" {
		return nil, fmt.Errorf("-o %q: want table or json", o.output)
	}
	apiURL, storeURL, token := o.api, o.store, o.token
	ctx := engine.WithActor(cmd.Context(), cliActor())
	switch {
	case apiURL != "" && storeURL != "":
		return nil, fmt.Errorf("give --api or --store, not both")
	case apiURL != "":
		c := api.NewClient(apiURL, token, api.ClientOptions{UserAgent: "sluice-cli", Surface: engine.SurfaceCLI})
		return &session{ctl: c, close: func() {}, ctx: ctx}, nil
	case storeURL != "":
		// A command never creates or migrates the store it acts on.
		store, err := storeurl.OpenExisting(ctx, storeURL, slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, err
		}
		e, err := engine.New(store, engine.Config{NoMaintenance: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			store.Close()
			return nil, err
		}
		// Straight on the store the command line holds every right, as
		// the store's owner.
		ctx = engine.WithOrigin(ctx, engine.Origin{Role: engine.RoleAdmin, Surface: engine.SurfaceCLI, Source: "store"})
		return &session{ctl: e, engine: e, close: func() { store.Close() }, ctx: ctx}, nil
	}
	return nil, fmt.Errorf("name a server with --api URL (or SLUICE_API, or api: in the config file) or a store with --store URL (or SLUICE_STORE, or store:)")
}

// cliActor is who the command line acts as: the login name.
func cliActor() string {
	for _, v := range []string{"SLUICE_ACTOR", "USER", "LOGNAME"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return "cli"
}

// withSession opens the Control for a command, runs fn and closes it.
func (o *ctlOptions) withSession(fn func(cmd *cobra.Command, s *session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		// Job data goes to the terminal escaped (termtext.Writer).
		cmd.SetOut(termtext.Writer(cmd.OutOrStdout()))
		cmd.SetErr(termtext.Writer(cmd.ErrOrStderr()))
		s, err := o.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		return fn(cmd, s, args)
	}
}

func (o *ctlOptions) json() bool { return o.output == "json" }

// runCall is the body of a command that makes one call and prints its
// answer: open the session, call, then render what it returned.
func runCall[T any](o *ctlOptions, call func(cmd *cobra.Command, s *session, args []string) (T, error), text func(w io.Writer, v T) error) func(*cobra.Command, []string) error {
	return o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
		v, err := call(cmd, s, args)
		return render(cmd, o, v, err, text)
	})
}

// render prints a call's answer v on the command's output: as JSON with
// -o json, else as text writes it. err is the call's: an error prints
// nothing and is returned.
func render[T any](cmd *cobra.Command, o *ctlOptions, v T, err error, text func(w io.Writer, v T) error) error {
	if err != nil {
		return err
	}
	if o.json() {
		return printJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout(), v)
}

// tableOf is the text of a list: a table under header, a row per item.
func tableOf[T any](header string, row func(T) []string) func(w io.Writer, items []T) error {
	return func(w io.Writer, items []T) error {
		rows := make([][]string, len(items))
		for i, it := range items {
			rows[i] = row(it)
		}
		return table(w, header, rows)
	}
}

// addYesFlag adds --yes to a command that asks before it acts.
func (o *ctlOptions) addYesFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "do not ask for confirmation")
}

// targetFlag names the server or store the command acted on, for a
// command line to paste (" --api URL", " --store URL"): without it the
// pasted line would go wherever the environment points. A store URL with
// a password is left out rather than printed; the token never is.
func (o *ctlOptions) targetFlag() string {
	switch {
	case o.api != "":
		if redact.URL(o.api) != o.api {
			return ""
		}
		return " " + shellQuote("--api", o.api)
	case o.store != "":
		if redact.URL(o.store) != o.store {
			return ""
		}
		return " " + shellQuote("--store", o.store)
	}
	return ""
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes rows under a header, aligned.
func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// confirm asks a yes/no question on the command's input; anything but y
// or yes (or the end of input) is no.
func confirm(cmd *cobra.Command, question string) bool {
	fmt.Fprintf(cmd.ErrOrStderr(), "%s [y/N] ", question)
	line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// errAborted ends a command the user declined.
var errAborted = fmt.Errorf("aborted: nothing was changed")

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}

func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func lastError(j *engine.Job) string { return j.LastErrorText() }

// filterFlags are the simple filter flags and -q, ANDed.
type filterFlags struct {
	states, queues, kinds []string
	q                     string
}

func (ff *filterFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVar(&ff.states, "state", nil, "states (comma-separated or repeated)")
	f.StringSliceVar(&ff.queues, "queue", nil, "queues")
	f.StringSliceVar(&ff.kinds, "kind", nil, "kinds")
	f.StringVarP(&ff.q, "query", "q", "", `query, as state:archived queue:billing error:"timeout" payload.customer:42`)
}

func (ff *filterFlags) filter() (engine.Filter, error) {
	f, err := engine.ParseQuery(ff.q)
	if err != nil {
		return engine.Filter{}, err
	}
	for _, s := range ff.states {
		f.States = append(f.States, engine.State(s))
	}
	f.Queues = append(f.Queues, ff.queues...)
	f.Kinds = append(f.Kinds, ff.kinds...)
	return f, f.Validate()
}
