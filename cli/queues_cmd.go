package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// sluice queues: the queues with their jobs per state, paused or resumed.

func newQueuesCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "queues", Short: "List, pause and resume queues",
		Long: `List queues with their jobs per state, and pause or resume them (workers
claim nothing from a paused queue), on a server (--api) or directly on a
store (--store).`}
	o.addFlags(cmd)
	header := "QUEUE\tPAUSED"
	for _, st := range engine.AllStates {
		header += "\t" + strings.ToUpper(string(st))
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List queues with their counts",
		Args:  cobra.NoArgs,
		RunE: runCall(o, func(_ *cobra.Command, s *session, _ []string) ([]engine.QueueInfo, error) {
			return s.ctl.Queues(s.ctx)
		}, tableOf(header, queueRow)),
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
			RunE: runCall(o, func(_ *cobra.Command, s *session, args []string) (map[string]any, error) {
				var err error
				if p {
					err = s.ctl.PauseQueue(s.ctx, args[0])
				} else {
					err = s.ctl.ResumeQueue(s.ctx, args[0])
				}
				return map[string]any{"queue": args[0], "paused": p}, err
			}, func(w io.Writer, v map[string]any) error {
				fmt.Fprintf(w, "queue %s paused: %v\n", v["queue"], p)
				return nil
			}),
		}
	}
	cmd.AddCommand(list, pause(true), pause(false))
	return cmd
}

// queueRow is a queue's row in queues list: its counts in the order of
// engine.AllStates.
func queueRow(q engine.QueueInfo) []string {
	row := []string{q.Name, fmt.Sprint(q.Paused)}
	for _, st := range engine.AllStates {
		row = append(row, fmt.Sprint(q.Counts[st]))
	}
	return row
}
