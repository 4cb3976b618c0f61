package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// signalCmd is `sluice jobs signal ID NAME [--payload JSON|@FILE|-]`:
// send a signal to a job (engine.WaitSignal takes it).
func (o *ctlOptions) signalCmd() *cobra.Command {
	var payload string
	c := &cobra.Command{
		Use:   "signal ID NAME [--payload JSON|@FILE|-]",
		Short: "Send a signal to a job: buffered until its wait of that name takes it, once; wakes it if it waits",
		Args:  cobra.ExactArgs(2),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			var raw []byte
			if payload != "" {
				b, err := readPayload(cmd, payload)
				if err != nil {
					return err
				}
				raw = b
			}
			sig, err := s.ctl.Signal(s.ctx, args[0], args[1], raw)
			if err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), sig)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signal %s sent to %s (#%d)\n", sig.Name, sig.JobID, sig.Seq)
			return nil
		}),
	}
	c.Flags().StringVar(&payload, "payload", "", "the signal's payload: JSON, @FILE, or - for standard input (default null)")
	return c
}
