package cli

// sluice bulk: a selector's dry run, then the run, driven or followed
// with progress.

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
)

func newBulkCmd() *cobra.Command {
	o := &ctlOptions{}
	var ff filterFlags
	var dryRun, wait bool
	var rate int
	var cutoff, at string
	var cf canaryFlags
	cmd := &cobra.Command{
		Use:   "bulk ACTION",
		Short: "Retry, cancel, delete or release every job a selector matches",
		Long: `Run ACTION (retry, cancel, delete, release) on every job the selector
matches, as a persisted operation processed in batches. The command dry-
runs first: the matched count is shown and confirmed (with --yes, printed
and run); --dry-run only shows it, a sample and the plan. Cancel and
delete run only from a dry run's plan, which the command passes itself. The run does what its preview showed: it takes only
jobs that had entered their state by the preview (the plan's cutoff), so
it never touches more jobs than were counted; a job that dies after the
preview is left alone. --cutoff TIME runs the plan a dry run printed
(same action and selector): it counts and takes only the jobs that
entered their state by TIME.

--at TIME schedules the run: the operation waits, pending, until TIME
(HH:MM: the next time your clock shows it; or an RFC 3339 time), listed
by sluice operations and the console's :operations as "scheduled for
06:00 (in 3h12m)", cancellable meanwhile, and kept across restarts. It
still takes only what the preview counted, however late it starts. The
time is sent as an absolute instant; one more than a minute past or more
than 7 days ahead is refused. Whichever process runs maintenance when it
comes (sluice serve, a worker) starts it.

--canary N tests the fix before betting on it (retry only): the run
redrives N jobs spread across the selection first, waits (at most
--canary-timeout) for their outcomes, and goes on only if at least
--canary-min-success of them succeeded. While it goes on it watches the
last --canary-window jobs it redrove and halts itself when more than
--halt-failure-rate of them failed again, leaving the rest untouched and
saying why ("halted: 23 of the last 100 redriven failed again — ...").
Resume a halted run with sluice operations resume ID, or cancel it.

Against a server (--api) the server's maintenance runs the operation; with
--wait the command follows it to the end. The operation is kept in the
store: it carries on if the command stops or the server goes away, and
whichever process runs maintenance next finishes it. Directly on a store (--store)
the command drives the operation to the end itself, so it works when
nothing else runs maintenance.`,
		Example: `  sluice bulk retry --api http://127.0.0.1:8080 --state archived --queue billing --dry-run
  sluice bulk retry --store sqlite://sluice.db -q 'state:archived error:"timeout"' --yes
  sluice bulk retry --api http://127.0.0.1:8080 --state archived --queue billing --cutoff 2026-12-01T16:07:45.637416591Z
  sluice bulk retry --api http://127.0.0.1:8080 -q 'state:archived queue:billing' --at 06:00
  sluice bulk retry --api http://127.0.0.1:8080 -q 'state:archived queue:billing' --canary 50 --canary-min-success 0.9 --halt-failure-rate 0.2`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"retry", "cancel", "delete", "release"},
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			action := engine.Action(args[0])
			sel, err := ff.filter()
			if err != nil {
				return err
			}
			if sel.IsEmpty() {
				return fmt.Errorf("empty selector: name at least one of --state, --queue, --kind, -q")
			}
			canary, err := cf.params(cmd)
			if err != nil {
				return err
			}
			var start *time.Time
			if at != "" {
				// Read on this machine's clock and sent as an instant: the
				// server checks it against the store's.
				t, err := engine.ParseStartAt(at, time.Now())
				if err != nil {
					return fmt.Errorf("--at: %w", err)
				}
				start = &t
			}
			// The preview carries the start too, so that a start out of
			// bounds is refused before the question.
			ask := engine.BulkParams{Action: action, Selector: sel, DryRun: true, StartAt: start, Canary: canary}
			if cutoff != "" {
				// A plan printed by an earlier dry run: count and run as
				// of its cutoff.
				at, err := time.Parse(time.RFC3339Nano, cutoff)
				if err != nil {
					return fmt.Errorf("--cutoff %q: want an RFC 3339 time, as a dry run prints it", cutoff)
				}
				narrowed, ok := engine.BulkSelector(action, sel)
				if !ok {
					return fmt.Errorf("%s takes none of the selected states", action)
				}
				ask.Plan = &engine.BulkPlan{Action: action, Selector: narrowed, Cutoff: at}
			}
			preview, err := s.ctl.Bulk(s.ctx, ask)
			if err != nil {
				return err
			}
			count := fmt.Sprint(preview.Matched)
			if preview.Estimated {
				count = "about " + count
			}
			if dryRun {
				if o.json() {
					return printJSON(cmd.OutOrStdout(), preview)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s would %s %s job(s) matching %s\n", "dry run:", action, count, sel)
				if line := uniqueHeldLine(preview); line != "" {
					fmt.Fprintln(cmd.OutOrStdout(), line)
				}
				if pl := preview.Plan; pl != nil {
					at := pl.Cutoff.UTC().Format(time.RFC3339Nano)
					fmt.Fprintf(cmd.OutOrStdout(), "plan: %s %s, jobs in that state by %s\n", pl.Action, pl.Selector, at)
					fmt.Fprintf(cmd.OutOrStdout(), "run exactly this: %s\n", runExactly(pl, o.targetFlag(), bulkRunShape{rate: rate, wait: wait, at: start, canary: canary}))
				}
				rows := make([][]string, len(preview.Sample))
				for i, j := range preview.Sample {
					rows[i] = []string{j.ID, string(j.State), j.Queue, j.Kind, short(lastError(j), 60)}
				}
				if len(rows) > 0 {
					return table(cmd.OutOrStdout(), "SAMPLE ID\tSTATE\tQUEUE\tKIND\tLAST ERROR", rows)
				}
				return nil
			}
			if preview.Matched == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no job matches %s: nothing to do\n", sel)
				return nil
			}
			question := fmt.Sprintf("%s %s job(s) matching %s?", action, count, sel)
			if pl := preview.Plan; pl != nil {
				question = fmt.Sprintf("%s %s job(s) matching %s (only those in that state by the preview, %s; none that enter it later)?",
					action, count, sel, pl.Cutoff.UTC().Format(time.RFC3339))
			}
			if start != nil {
				question = strings.TrimSuffix(question, "?") + ", " + startText(*start, time.Now()) + "?"
			}
			if canary != nil {
				question = strings.TrimSuffix(question, "?") + ", " + canaryText(canary) + "?"
			}
			if line := uniqueHeldLine(preview); line != "" {
				// Said before the question: those retries will be refused.
				fmt.Fprintln(cmd.ErrOrStderr(), line)
			}
			if o.yes {
				// Unasked, the count is still said: what the run takes.
				fmt.Fprintln(cmd.ErrOrStderr(), strings.TrimSuffix(question, "?"))
			} else if !confirm(cmd, question) {
				return errAborted
			}
			// The preview's plan: the run takes no job the preview did
			// not count.
			res, err := s.ctl.Bulk(s.ctx, engine.BulkParams{Action: action, Selector: sel, RatePerSecond: rate, Plan: preview.Plan, StartAt: start,
				Canary: canary})
			if err != nil {
				return err
			}
			op := res.Operation
			if op.Waiting(time.Now()) && !wait {
				// Nothing to drive yet: the store keeps it until its time.
				fmt.Fprintf(cmd.ErrOrStderr(), "operation %s is %s: whichever process runs maintenance then (sluice serve, a worker) starts it; cancel it meanwhile with: sluice operations cancel %s%s\n",
					op.ID, engine.StartMark(op, time.Now()), op.ID, o.targetFlag())
			} else if s.engine != nil {
				op, err = driveOperation(s, op.ID, cmd.ErrOrStderr())
			} else if wait {
				fmt.Fprintf(cmd.ErrOrStderr(), "operation %s runs on the server: it carries on if this command stops or the server goes away (whichever process runs maintenance next, a worker or the restarted server, finishes it); see it again with: sluice operations show %s%s\n",
					op.ID, op.ID, o.targetFlag())
				op, err = followOperation(s, op.ID, cmd.ErrOrStderr())
			}
			return render(cmd, o, op, err, func(w io.Writer, op *engine.Operation) error {
				if err := printOperation(w, op); err != nil {
					return err
				}
				if op.Status == engine.OperationFailed {
					return fmt.Errorf("operation %s failed: %s", op.ID, op.Error)
				}
				if op.Status == engine.OperationHalted {
					return fmt.Errorf("operation %s %s; resume it with: sluice operations resume %s%s (or cancel it)",
						op.ID, termtext.Line(op.Error), op.ID, o.targetFlag())
				}
				return nil
			})
		}),
	}
	o.addFlags(cmd)
	ff.add(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only count the matching jobs and show a sample")
	o.addYesFlag(cmd)
	cmd.Flags().BoolVar(&wait, "wait", false, "with --api: follow the operation until it ends (it carries on without this command); with --at on --store: wait for its start and run it")
	cmd.Flags().IntVar(&rate, "rate", 0, "jobs per second at most (0: unlimited)")
	cmd.Flags().StringVar(&cutoff, "cutoff", "", "run a dry run's plan: only jobs that entered their state by this time (RFC 3339, as the dry run prints it)")
	cmd.Flags().StringVar(&at, "at", "", "start the run at this time, not now: HH:MM (next occurrence, local time) or RFC 3339; it waits, pending and cancellable")
	cf.add(cmd)
	return cmd
}

// shellQuote writes flag and value for a shell command line, the value in
// single quotes.
func shellQuote(flag, v string) string {
	return flag + " '" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// driveOperation runs pending operations in this process until op ends,
// showing its progress; a scheduled op is waited for.
func driveOperation(s *session, id string, progress io.Writer) (*engine.Operation, error) {
	done := make(chan error, 1)
	go func() {
		for {
			did, err := s.engine.RunOperation(s.ctx)
			if err == nil && !did && s.ctx.Err() == nil {
				// A scheduled run is not taken before its time, by the
				// store's clock: wait for it, a second at a time at most,
				// so that a store clock a little behind ours is met.
				op, err := s.ctl.Operation(s.ctx, id)
				if err == nil && op.Status == engine.OperationPending && op.StartAt != nil {
					wait := min(max(time.Until(*op.StartAt), 250*time.Millisecond), time.Second)
					select {
					case <-s.ctx.Done():
					case <-time.After(wait):
					}
					continue
				}
			}
			if err != nil || !did || s.ctx.Err() != nil {
				done <- err
				return
			}
			op, err := s.ctl.Operation(s.ctx, id)
			if err == nil && finished(op) {
				done <- nil
				return
			}
		}
	}()
	return watchOperation(s, id, progress, done)
}

// followOperation polls an operation that someone else runs until it ends.
func followOperation(s *session, id string, progress io.Writer) (*engine.Operation, error) {
	return watchOperation(s, id, progress, nil)
}

// finished: the operation ended, or halted (it waits for an operator).
func finished(op *engine.Operation) bool {
	return op.Status != engine.OperationPending && op.Status != engine.OperationRunning
}

// watchOperation shows an operation's progress until it ends (or the
// driver stops).
func watchOperation(s *session, id string, progress io.Writer, driver <-chan error) (*engine.Operation, error) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		op, err := s.ctl.Operation(s.ctx, id)
		if err != nil {
			return nil, err
		}
		// The line redraws itself with \r, the command's own: it goes
		// out raw (it holds no job data).
		stage := ""
		if t := engine.CanaryStageText(op); t != "" && op.Status != engine.OperationHalted {
			stage = "— " + termtext.Line(t) + " "
		}
		fmt.Fprintf(termtext.Raw(progress), "\r%s %d/%d (%d failed) %s %s", bar(op.Processed, op.Matched, 30), op.Processed, op.Matched, op.Failed, op.Status, stage)
		if finished(op) {
			fmt.Fprintln(progress)
			return op, nil
		}
		select {
		case <-s.ctx.Done():
			fmt.Fprintln(progress)
			return op, s.ctx.Err()
		case err := <-driver:
			if err != nil {
				fmt.Fprintln(progress)
				return nil, err
			}
			driver = nil
		case <-tick.C:
		}
	}
}

func bar(done, total int64, width int) string {
	if total <= 0 {
		total = 1
	}
	n := int(min(done, total) * int64(width) / total)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// printOperation is one operation, a field a line.
func printOperation(w io.Writer, op *engine.Operation) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "operation\t%s\n", op.ID)
	fmt.Fprintf(tw, "action\t%s\n", op.Action)
	fmt.Fprintf(tw, "selector\t%s\n", op.Selector)
	fmt.Fprintf(tw, "status\t%s\n", op.Status)
	fmt.Fprintf(tw, "progress\t%d of %d processed, %d succeeded, %d failed\n", op.Processed, op.Matched, op.Succeeded, op.Failed)
	fmt.Fprintf(tw, "created\t%s by %s\n", op.CreatedAt.Format(time.RFC3339), op.CreatedBy)
	if op.Cutoff != nil {
		fmt.Fprintf(tw, "cutoff\tjobs in their state by %s\n", op.Cutoff.UTC().Format(time.RFC3339Nano))
	}
	if op.StartAt != nil {
		if mark := engine.StartMark(op, time.Now()); mark != "" {
			fmt.Fprintf(tw, "start\t%s, %s\n", mark, op.StartAt.UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintf(tw, "start\tscheduled for %s\n", op.StartAt.UTC().Format(time.RFC3339))
		}
	}
	if c := op.Canary; c != nil {
		fmt.Fprintf(tw, "canary\tsample %d, go on with %s ok, halt above %s failed of the last %d\n", c.Size,
			percentOf(c.MinSuccess), percentOf(c.HaltFailureRate), c.Window)
		if op.Status != engine.OperationHalted {
			fmt.Fprintf(tw, "stage\t%s\n", termtext.Line(engine.CanaryStageText(op)))
		}
	}
	if op.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", op.Error)
	}
	return tw.Flush()
}

// startText is a start time for the confirmation: "starting at 06:00
// (in 3h12m)", on this machine's clock.
func startText(at, now time.Time) string {
	mark := engine.StartMark(&engine.Operation{Status: engine.OperationPending, StartAt: &at}, now)
	if mark == "" {
		return "starting now"
	}
	return "starting at " + strings.TrimPrefix(mark, "scheduled for ")
}

// uniqueHeldLine says how many of a retry's matched jobs a live job holds
// the unique key of, naming one holder ("" for none): the run refuses
// them, and the operator reads it before confirming.
func uniqueHeldLine(p *engine.BulkResult) string {
	if p.UniqueHeld == 0 {
		return ""
	}
	return fmt.Sprintf("unique keys: %d of %d matched are held by a live job, e.g. %s; they will be refused",
		p.UniqueHeld, p.Matched, termtext.Line(p.UniqueHolder))
}
