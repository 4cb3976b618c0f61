package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// sluice jobs: list, show and act on jobs one id at a time (replay.go and
// signal.go hold replay and signal).

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
			return render(cmd, o, page, err, func(w io.Writer, page *engine.JobPage) error {
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
				if err := jobsTable(w, page.Jobs); err != nil {
					return err
				}
				if page.Next != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s\n", page.Next)
				}
				return nil
			})
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
		RunE: runCall(o, func(_ *cobra.Command, s *session, args []string) (*engine.JobDetail, error) {
			return s.ctl.GetJob(s.ctx, args[0], withPayload)
		}, printDetail),
	}
	show.Flags().BoolVar(&withPayload, "payload", false, "include the payload")

	var force bool
	retry := &cobra.Command{
		Use:   "retry ID...",
		Short: "Redrive dead jobs (archived, cancelled, undecodable → available)",
		Args:  cobra.MinimumNArgs(1),
		RunE: o.oneOrMany(engine.ActionRetry, "retried", func(s *session, id string) (*engine.Job, error) {
			return s.ctl.Retry(s.ctx, id, engine.RetryOptions{Force: force})
		}),
	}
	retry.Flags().BoolVar(&force, "force", false, "retry a job superseded by a retry with new input or a replay (its side effects run again)")

	cancel := &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel jobs that have not finished",
		Args:  cobra.MinimumNArgs(1),
		RunE: o.oneOrMany(engine.ActionCancel, "cancelled", func(s *session, id string) (*engine.Job, error) {
			return s.ctl.Cancel(s.ctx, id)
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
			return render(cmd, o, j, err, func(w io.Writer, j *engine.Job) error {
				if err := jobNow("released")(w, j); err != nil || j.Fingerprint == "" {
					return err
				}
				fps, err := s.ctl.Quarantine(s.ctx)
				if err != nil {
					return err
				}
				for _, fp := range fps {
					if fp.Fingerprint == j.Fingerprint {
						fmt.Fprintf(w, "its fingerprint %s stays %s: its %d other held job(s) keep waiting (sluice quarantine release %s lifts it)\n",
							j.Fingerprint, fp.Status, fp.Held, shellQuote("", j.Fingerprint)[1:])
						fmt.Fprintf(w, "%s runs on probation: its next crash quarantines it again\n", j.ID)
					}
				}
				return nil
			})
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
			if len(args) > 1 {
				return o.apply(cmd, s, engine.ActionDelete, args)
			}
			err := s.ctl.Delete(s.ctx, args[0])
			return render(cmd, o, map[string]any{"id": args[0], "deleted": true}, err, func(w io.Writer, _ map[string]any) error {
				fmt.Fprintf(w, "deleted %s\n", args[0])
				return nil
			})
		}),
	}
	o.addYesFlag(del)

	var payload string
	edit := &cobra.Command{
		Use:   "edit ID --payload JSON|@FILE",
		Short: "Replace a job's payload (refused if it changed since it was read)",
		Args:  cobra.ExactArgs(1),
		RunE: runCall(o, func(cmd *cobra.Command, s *session, args []string) (*engine.Job, error) {
			raw, err := readPayload(cmd, payload)
			if err != nil {
				return nil, err
			}
			d, err := s.ctl.GetJob(s.ctx, args[0], false)
			if err != nil {
				return nil, err
			}
			return s.ctl.UpdatePayload(s.ctx, args[0], raw, d.Job.Version)
		}, jobNow("payload replaced")),
	}
	edit.Flags().StringVar(&payload, "payload", "", "the new payload: JSON, @FILE, or - for standard input")
	_ = edit.MarkFlagRequired("payload")

	var newID string
	rwi := &cobra.Command{
		Use:   "retry-with-input ID --payload JSON|@FILE",
		Short: "Enqueue a corrected copy of a dead job; the original is marked superseded",
		Args:  cobra.ExactArgs(1),
		RunE: runCall(o, func(cmd *cobra.Command, s *session, args []string) (*engine.Job, error) {
			raw, err := readPayload(cmd, payload)
			if err != nil {
				return nil, err
			}
			return s.ctl.RetryWithInput(s.ctx, args[0], engine.RetryWithInputParams{ID: newID, Payload: raw})
		}, jobNow("enqueued corrected copy")),
	}
	rwi.Flags().StringVar(&payload, "payload", "", "the corrected payload: JSON, @FILE, or - for standard input")
	rwi.Flags().StringVar(&newID, "id", "", "id of the new job (default ID~retry~<8 hex>)")
	_ = rwi.MarkFlagRequired("payload")

	cmd.AddCommand(list, show, o.exportCmd(), retry, release, cancel, del, edit, rwi, o.replayCmd(), o.signalCmd())
	return cmd
}

// jobRow is a job's row in jobs list.
// jobsTable writes listed jobs as a table. A page with an available job
// that a full limit across processes holds back gets a HELD BY column
// naming the limit and its usage (as the console's row and the JSON's
// held_by do), before LAST ERROR; a page without one keeps the narrower
// layout, since most pages hold none and a column of blanks would push
// the errors off an 80-column terminal.
func jobsTable(w io.Writer, jobs []*engine.Job) error {
	if !slices.ContainsFunc(jobs, func(j *engine.Job) bool { return j.HeldBy != "" }) {
		return tableOf("ID\tSTATE\tQUEUE\tKIND\tATTEMPT\tSINCE\tLAST ERROR", jobRow)(w, jobs)
	}
	return tableOf("ID\tSTATE\tQUEUE\tKIND\tATTEMPT\tSINCE\tHELD BY\tLAST ERROR", func(j *engine.Job) []string {
		r := jobRow(j)
		return append(r[:6:6], cmp.Or(j.HeldBy, "-"), r[6])
	})(w, jobs)
}

func jobRow(j *engine.Job) []string {
	return []string{j.ID, string(j.State), j.Queue, j.Kind, fmt.Sprintf("%d/%d", j.AttemptShown(), j.MaxAttempts), ago(j.StateChangedAt), short(lastError(j), 60)}
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

// jobNow is the text of an action on one job: what was done, and the
// state the job is in now.
func jobNow(what string) func(w io.Writer, j *engine.Job) error {
	return func(w io.Writer, j *engine.Job) error {
		fmt.Fprintf(w, "%s %s: now %s\n", what, j.ID, j.State)
		return nil
	}
}

// oneOrMany is the body of an action on the jobs its arguments name: one
// id is acted on by one, which answers with the job; several go through
// apply, a row each.
func (o *ctlOptions) oneOrMany(a engine.Action, done string, one func(s *session, id string) (*engine.Job, error)) func(*cobra.Command, []string) error {
	return o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
		if len(args) > 1 {
			return o.apply(cmd, s, a, args)
		}
		j, err := one(s, args[0])
		return render(cmd, o, j, err, jobNow(done))
	})
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
	if d.DeleteAt != nil {
		del := d.DeleteAt.UTC().Format(time.RFC3339)
		if d.Expiring {
			del += " (expiring: retention deletes it within the warning window)"
		}
		field("deleted by retention", del)
	}
	field("terminal reason", string(j.TerminalReason))
	field("fingerprint", j.Fingerprint)
	field("unique key", j.UniqueKey)
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
