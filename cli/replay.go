package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// replayCmd is `sluice jobs replay ID --step N`: replay a terminal
// workflow job from a step, or with --dry-run say what that would keep
// and run again.
func (o *ctlOptions) replayCmd() *cobra.Command {
	var (
		step          int
		result, newID string
		dryRun        bool
	)
	c := &cobra.Command{
		Use:   "replay ID --step N [--result JSON|@FILE] [--id NEW] [--dry-run]",
		Short: "Replay a dead workflow job from step N as a new job that keeps the steps before N",
		Args:  cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			p := engine.ReplayParams{Step: step, ID: newID}
			if result != "" {
				raw, err := readPayload(cmd, result)
				if err != nil {
					return err
				}
				p.Result = raw
			}
			if dryRun {
				plan, err := s.ctl.ReplayPreview(s.ctx, args[0], p)
				return render(cmd, o, plan, err, func(w io.Writer, plan *engine.ReplayPlan) error {
					for i, r := range plan.Kept {
						fmt.Fprintf(w, "keep   %d %s (%s)\n", i+1, r.Name, r.State)
					}
					for i, r := range plan.Rerun {
						fmt.Fprintf(w, "rerun  %d %s (was %s)\n", len(plan.Kept)+i+1, r.Name, r.State)
					}
					fmt.Fprintf(w, "then   the steps the handler asks for after those\n")
					return nil
				})
			}
			j, err := s.ctl.ReplayFromStep(s.ctx, args[0], p)
			return render(cmd, o, j, err, jobNow(fmt.Sprintf("replaying %s from step %d as", args[0], step)))
		}),
	}
	c.Flags().IntVar(&step, "step", 0, "1-based position of the first step that runs again")
	c.Flags().StringVar(&result, "result", "", "replacement result of step N-1 in the new job: JSON, @FILE, or - for standard input")
	c.Flags().StringVar(&newID, "id", "", "id of the new job (default ID~replay~<8 hex>)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "only say which steps are kept and which run again")
	_ = c.MarkFlagRequired("step")
	return c
}
