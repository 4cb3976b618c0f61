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
// store (--store URL), through engine.Control either way.

// controlCommands are the operator commands, for the root.
func controlCommands(lo *logOptions) []*cobra.Command {
	return []*cobra.Command{
		newServeCmd(lo),
		newJobsCmd(), newErrorsCmd(), newBulkCmd(), newOperationsCmd(), newQuarantineCmd(), newQueuesCmd(),
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
		c := api.NewClient(apiURL, token, api.ClientOptions{UserAgent: "sluice-cli"})
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

// --- jobs ---

func newJobsCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, inspect and act on jobs",
		Long: `List, inspect and act on jobs, on a server (--api) or directly on a store
(--store).`,
	}
	o.addFlags(cmd)

	var ff filterFlags
	var limit int
	var cursor string
	list := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first by the time each entered its state",
		Example: `  sluice jobs list --api http://127.0.0.1:8080 --state archived --queue billing
  sluice jobs list --store sqlite://sluice.db -q 'state:archived error:"timeout"' -o json`,
		Args: cobra.NoArgs,
		RunE: o.withSession(func(cmd *cobra.Command, s *session, _ []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			page, err := s.ctl.ListJobs(s.ctx, engine.ListJobsParams{Filter: f, Limit: limit, Cursor: cursor})
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), page)
			}
			if len(page.Jobs) == 0 {
				what := "no jobs"
				if !f.IsEmpty() {
					what = "no job matches " + f.String()
				}
				if cursor != "" {
					what += " past this cursor"
				}
				fmt.Fprintln(cmd.ErrOrStderr(), what)
				return nil
			}
			rows := make([][]string, len(page.Jobs))
			for i, j := range page.Jobs {
				rows[i] = []string{j.ID, string(j.State), j.Queue, j.Kind, fmt.Sprintf("%d/%d", j.AttemptShown(), j.MaxAttempts), ago(j.StateChangedAt), short(lastError(j), 60)}
			}
			if err := table(cmd.OutOrStdout(), "ID\tSTATE\tQUEUE\tKIND\tATTEMPT\tSINCE\tLAST ERROR", rows); err != nil {
				return err
			}
			if page.Next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s\n", page.Next)
			}
			return nil
		}),
	}
	ff.add(list)
	list.Flags().IntVar(&limit, "limit", 50, "rows per page (1–200)")
	list.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page")

	var withPayload bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one job with its workflow steps, errors and timeline",
		Args:  cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			d, err := s.ctl.GetJob(s.ctx, args[0], withPayload)
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), d)
			}
			return printDetail(cmd.OutOrStdout(), d)
		}),
	}
	show.Flags().BoolVar(&withPayload, "payload", false, "include the payload")

	var force bool
	retry := &cobra.Command{
		Use:   "retry ID...",
		Short: "Redrive dead jobs (archived, cancelled, undecodable → available)",
		Args:  cobra.MinimumNArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			if len(args) == 1 {
				j, err := s.ctl.Retry(s.ctx, args[0], engine.RetryOptions{Force: force})
				return o.printJob(cmd, j, err, "retried")
			}
			return o.apply(cmd, s, engine.ActionRetry, args)
		}),
	}
	retry.Flags().BoolVar(&force, "force", false, "retry a job superseded by a retry with new input or a replay (its side effects run again)")

	cancel := &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel jobs that have not finished",
		Args:  cobra.MinimumNArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			if len(args) == 1 {
				j, err := s.ctl.Cancel(s.ctx, args[0])
				return o.printJob(cmd, j, err, "cancelled")
			}
			return o.apply(cmd, s, engine.ActionCancel, args)
		}),
	}

	release := &cobra.Command{
		Use:   "release ID",
		Short: "Run one quarantined job again; its fingerprint stays quarantined",
		Long: `Return one job held by a quarantine to available. Only this job runs
again: its fingerprint stays quarantined, and the other jobs it holds keep
waiting (sluice quarantine release FINGERPRINT lifts the quarantine).

The job runs on probation: the release resets its crash counter, but its
next crash (a panic, or its worker gone) quarantines it again at once, and
holds with it the fingerprint's jobs then waiting (others released alone).`,
		Args: cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			j, err := s.ctl.ReleaseJob(s.ctx, args[0])
			if err != nil || o.json() {
				return o.printJob(cmd, j, err, "released")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "released %s: now %s\n", j.ID, j.State)
			if j.Fingerprint == "" {
				return nil
			}
			fps, err := s.ctl.Quarantine(s.ctx)
			if err != nil {
				return err
			}
			for _, fp := range fps {
				if fp.Fingerprint == j.Fingerprint {
					fmt.Fprintf(cmd.OutOrStdout(), "its fingerprint %s stays %s: its %d other held job(s) keep waiting (sluice quarantine release %s lifts it)\n",
						j.Fingerprint, fp.Status, fp.Held, shellQuote("", j.Fingerprint)[1:])
					fmt.Fprintf(cmd.OutOrStdout(), "%s runs on probation: its next crash quarantines it again\n", j.ID)
				}
			}
			return nil
		}),
	}

	del := &cobra.Command{
		Use:   "delete ID...",
		Short: "Delete jobs that are not running (asks first unless --yes)",
		Args:  cobra.MinimumNArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			if !o.yes && !confirm(cmd, fmt.Sprintf("Delete %d job(s)? This cannot be undone.", len(args))) {
				return errAborted
			}
			if len(args) == 1 {
				if err := s.ctl.Delete(s.ctx, args[0]); err != nil {
					return err
				}
				if o.json() {
					return printJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "deleted": true})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
				return nil
			}
			return o.apply(cmd, s, engine.ActionDelete, args)
		}),
	}
	del.Flags().BoolVarP(&o.yes, "yes", "y", false, "do not ask for confirmation")

	var payload string
	edit := &cobra.Command{
		Use:   "edit ID --payload JSON|@FILE",
		Short: "Replace a job's payload (refused if it changed since it was read)",
		Args:  cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			raw, err := readPayload(cmd, payload)
			if err != nil {
				return err
			}
			d, err := s.ctl.GetJob(s.ctx, args[0], false)
			if err != nil {
				return err
			}
			j, err := s.ctl.UpdatePayload(s.ctx, args[0], raw, d.Job.Version)
			return o.printJob(cmd, j, err, "payload replaced")
		}),
	}
	edit.Flags().StringVar(&payload, "payload", "", "the new payload: JSON, @FILE, or - for standard input")
	_ = edit.MarkFlagRequired("payload")

	var newID string
	rwi := &cobra.Command{
		Use:   "retry-with-input ID --payload JSON|@FILE",
		Short: "Enqueue a corrected copy of a dead job; the original is marked superseded",
		Args:  cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			raw, err := readPayload(cmd, payload)
			if err != nil {
				return err
			}
			j, err := s.ctl.RetryWithInput(s.ctx, args[0], engine.RetryWithInputParams{ID: newID, Payload: raw})
			return o.printJob(cmd, j, err, "enqueued corrected copy")
		}),
	}
	rwi.Flags().StringVar(&payload, "payload", "", "the corrected payload: JSON, @FILE, or - for standard input")
	rwi.Flags().StringVar(&newID, "id", "", "id of the new job (default ID~retry~<8 hex>)")
	_ = rwi.MarkFlagRequired("payload")

	cmd.AddCommand(list, show, retry, release, cancel, del, edit, rwi, o.replayCmd(), o.signalCmd())
	return cmd
}

// readPayload reads --payload: inline JSON, @FILE, or - (standard input).
func readPayload(cmd *cobra.Command, v string) (json.RawMessage, error) {
	switch {
	case v == "-":
		b, err := io.ReadAll(cmd.InOrStdin())
		return b, err
	case strings.HasPrefix(v, "@"):
		return os.ReadFile(v[1:])
	}
	return json.RawMessage(v), nil
}

func (o *ctlOptions) printJob(cmd *cobra.Command, j *engine.Job, err error, what string) error {
	if err != nil {
		return err
	}
	if o.json() {
		return printJSON(cmd.OutOrStdout(), j)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s: now %s\n", what, j.ID, j.State)
	return nil
}

// apply runs an action on several ids and reports each; it fails when any
// id failed.
func (o *ctlOptions) apply(cmd *cobra.Command, s *session, a engine.Action, ids []string) error {
	res, err := s.ctl.Apply(s.ctx, a, ids)
	if err != nil {
		return err
	}
	failed := 0
	rows := make([][]string, len(res))
	for i, r := range res {
		status := "ok"
		if !r.OK {
			failed++
			status = r.Reason
		}
		rows[i] = []string{r.ID, status, short(r.Error, 80)}
	}
	if o.json() {
		if err := printJSON(cmd.OutOrStdout(), res); err != nil {
			return err
		}
	} else if err := table(cmd.OutOrStdout(), "ID\tRESULT\tERROR", rows); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d of %d failed", a, failed, len(ids))
	}
	return nil
}

func printDetail(w io.Writer, d *engine.JobDetail) error {
	j := d.Job
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	field("id", j.ID)
	field("queue", j.Queue)
	field("kind", j.Kind)
	field("state", string(j.State))
	field("attempt", fmt.Sprintf("%d of %d (crashes %d)", j.AttemptShown(), j.MaxAttempts, j.CrashAttempt))
	field("since", ago(j.StateChangedAt))
	field("terminal reason", string(j.TerminalReason))
	field("fingerprint", j.Fingerprint)
	field("version", fmt.Sprint(j.Version))
	field("retry of", j.RetryOf)
	field("superseded by", j.SupersededBy)
	if len(j.Metadata) > 0 {
		field("metadata", string(j.Metadata))
	}
	if len(j.Payload) > 0 {
		field("payload", string(j.Payload))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(j.Checkpoint) > 0 {
		if cp, err := engine.ParseCheckpoint(j.Checkpoint); err == nil && len(cp.Steps) > 0 {
			fmt.Fprintf(w, "\nsteps (%d):\n", len(cp.Steps))
			stw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for i, st := range cp.Steps {
				line := fmt.Sprintf("  %d\t%s\t%s\tattempts %d", i+1, st.Name, st.State, st.Attempts)
				if st.Crashes > 0 {
					line += fmt.Sprintf(", crashes %d", st.Crashes)
				}
				if st.Duration > 0 {
					line += "\t" + st.Duration.Round(time.Millisecond).String()
				}
				if st.Error != "" {
					line += "\t" + short(st.Error, 60)
				}
				fmt.Fprintln(stw, line)
			}
			if err := stw.Flush(); err != nil {
				return err
			}
			for _, f := range cp.Forks {
				fmt.Fprintf(w, "  replayed from step %d as %s\n", f.Step, f.JobID)
			}
			if f := cp.ForkedFrom; f != nil {
				fmt.Fprintf(w, "  replay of %s from step %d\n", f.JobID, f.Step)
			}
			for _, c := range cp.Children {
				fmt.Fprintf(w, "  child %s\n", c)
			}
		}
	}
	if len(j.Errors) > 0 {
		fmt.Fprintln(w, "\nerrors:")
		for _, e := range j.Errors {
			kind := "error"
			if e.Crash {
				kind = "crash"
			}
			fmt.Fprintf(w, "  #%d %s %s: %s\n", e.Attempt, kind, e.At.Format(time.RFC3339), e.Message)
		}
	}
	fmt.Fprintln(w, "\ntimeline:")
	for _, ev := range d.Timeline {
		line := fmt.Sprintf("  %s  %-16s", ev.At.Format(time.RFC3339), ev.Kind)
		if ev.To != "" {
			line += " → " + string(ev.To)
		}
		if ev.Actor != "" {
			line += "  by " + ev.Actor
		}
		if ev.Message != "" {
			line += "  " + short(ev.Message, 80)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// --- bulk ---

// --- operations ---

func newOperationsCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "operations", Short: "List, show and cancel bulk operations",
		Long: `List, show and cancel the bulk operations started by sluice bulk or the
console, on a server (--api) or directly on a store (--store).`}
	o.addFlags(cmd)
	var limit int
	var cursor string
	list := &cobra.Command{
		Use:   "list",
		Short: "List bulk operations, newest first",
		Args:  cobra.NoArgs,
		RunE: o.withSession(func(cmd *cobra.Command, s *session, _ []string) error {
			page, err := s.ctl.Operations(s.ctx, limit, cursor)
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), page)
			}
			rows := make([][]string, len(page.Operations))
			for i, op := range page.Operations {
				rows[i] = []string{op.ID, string(op.Action), string(op.Status), fmt.Sprintf("%d/%d", op.Processed, op.Matched), fmt.Sprint(op.Failed), op.CreatedBy, ago(op.CreatedAt), short(op.Selector.String(), 50)}
			}
			return table(cmd.OutOrStdout(), "ID\tACTION\tSTATUS\tPROCESSED\tFAILED\tBY\tCREATED\tSELECTOR", rows)
		}),
	}
	list.Flags().IntVar(&limit, "limit", 50, "rows (1–200)")
	list.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page")
	var wait bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one operation's progress",
		Args:  cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			var op *engine.Operation
			var err error
			if wait {
				op, err = followOperation(s, args[0], cmd.ErrOrStderr())
			} else {
				op, err = s.ctl.Operation(s.ctx, args[0])
			}
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), op)
			}
			printOperation(cmd.OutOrStdout(), op)
			return nil
		}),
	}
	show.Flags().BoolVar(&wait, "wait", false, "follow the operation until it ends")
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a pending or running operation after its current batch",
		Args:  cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			op, err := s.ctl.CancelOperation(s.ctx, args[0])
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), op)
			}
			printOperation(cmd.OutOrStdout(), op)
			return nil
		}),
	}
	cmd.AddCommand(list, show, cancel)
	return cmd
}

// --- quarantine ---

func newQuarantineCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "quarantine", Short: "List quarantined fingerprints and release them",
		Long: `List the fingerprints whose jobs crashed their process too often, and
release them so their held jobs run again, on a server (--api) or directly
on a store (--store).`}
	o.addFlags(cmd)
	list := &cobra.Command{
		Use:   "list",
		Short: "List quarantined and probationary fingerprints",
		Args:  cobra.NoArgs,
		RunE: o.withSession(func(cmd *cobra.Command, s *session, _ []string) error {
			fps, err := s.ctl.Quarantine(s.ctx)
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), fps)
			}
			rows := make([][]string, len(fps))
			for i, fp := range fps {
				rows[i] = []string{fp.Fingerprint, fp.Kind, string(fp.Status), fmt.Sprint(fp.Crashes), fmt.Sprint(fp.Held), ago(fp.Since), short(fp.LastError, 50)}
			}
			return table(cmd.OutOrStdout(), "FINGERPRINT\tKIND\tSTATUS\tCRASHES\tHELD\tSINCE\tLAST ERROR", rows)
		}),
	}
	release := &cobra.Command{
		Use:   "release FINGERPRINT",
		Short: "Lift a quarantine; its held jobs go back to available (asks first unless --yes)",
		Long: `Lift the quarantine of a fingerprint: its held jobs go back to available
with their crash counters reset, and new jobs of it are accepted again.

The fingerprint goes on probation until one of its jobs completes: a crash
of any of its jobs meanwhile quarantines it again at once. A job released
alone (sluice jobs release ID) runs on probation likewise, its fingerprint
staying quarantined.`,
		Args: cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			if !o.yes {
				held := "its held jobs"
				if fps, err := s.ctl.Quarantine(s.ctx); err == nil {
					for _, fp := range fps {
						if fp.Fingerprint == args[0] {
							held = fmt.Sprintf("%d held job(s)", fp.Held)
						}
					}
				}
				if !confirm(cmd, fmt.Sprintf("Release fingerprint %s and run %s again?", short(args[0], 16), held)) {
					return errAborted
				}
			}
			n, err := s.ctl.ReleaseFingerprint(s.ctx, args[0])
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), map[string]int{"released": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "released %d job(s)\n", n)
			return nil
		}),
	}
	release.Flags().BoolVarP(&o.yes, "yes", "y", false, "do not ask for confirmation")
	cmd.AddCommand(list, release)
	return cmd
}

// --- queues ---

func newQueuesCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "queues", Short: "List, pause and resume queues",
		Long: `List queues with their jobs per state, and pause or resume them (workers
claim nothing from a paused queue), on a server (--api) or directly on a
store (--store).`}
	o.addFlags(cmd)
	list := &cobra.Command{
		Use:   "list",
		Short: "List queues with their counts",
		Args:  cobra.NoArgs,
		RunE: o.withSession(func(cmd *cobra.Command, s *session, _ []string) error {
			qs, err := s.ctl.Queues(s.ctx)
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), qs)
			}
			header := "QUEUE\tPAUSED"
			for _, st := range engine.AllStates {
				header += "\t" + strings.ToUpper(string(st))
			}
			rows := make([][]string, len(qs))
			for i, q := range qs {
				rows[i] = []string{q.Name, fmt.Sprint(q.Paused)}
				for _, st := range engine.AllStates {
					rows[i] = append(rows[i], fmt.Sprint(q.Counts[st]))
				}
			}
			return table(cmd.OutOrStdout(), header, rows)
		}),
	}
	pause := func(p bool) *cobra.Command {
		use, short := "resume QUEUE", "Let workers claim from a queue again"
		if p {
			use, short = "pause QUEUE", "Stop workers claiming from a queue"
		}
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
				var err error
				if p {
					err = s.ctl.PauseQueue(s.ctx, args[0])
				} else {
					err = s.ctl.ResumeQueue(s.ctx, args[0])
				}
				if err != nil {
					return err
				}
				if o.json() {
					return printJSON(cmd.OutOrStdout(), map[string]any{"queue": args[0], "paused": p})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "queue %s paused: %v\n", args[0], p)
				return nil
			}),
		}
	}
	cmd.AddCommand(list, pause(true), pause(false))
	return cmd
}
