package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// signalCmd is `sluice jobs signal ID NAME [--payload JSON|@FILE|-]`:
// send a signal to a job (engine.WaitSignal takes it).
func (o *ctlOptions) signalCmd() *cobra.Command {
	var payload string
	c := &cobra.Command{
		Use:   "signal ID NAME [--payload JSON|@FILE|-]",
		Short: "Send a signal to a job: buffered until its wait of that name takes it, once; wakes it if it waits",
		Args:  cobra.ExactArgs(2),
		RunE: runCall(o, func(cmd *cobra.Command, s *session, args []string) (*engine.Signal, error) {
			var raw []byte
			if payload != "" {
				b, err := readPayload(cmd, payload)
				if err != nil {
					return nil, err
				}
				raw = b
			}
			return s.ctl.Signal(s.ctx, args[0], args[1], raw)
		}, func(w io.Writer, sig *engine.Signal) error {
			fmt.Fprintf(w, "signal %s sent to %s (#%d)\n", sig.Name, sig.JobID, sig.Seq)
			return nil
		}),
	}
	c.Flags().StringVar(&payload, "payload", "", "the signal's payload: JSON, @FILE, or - for standard input (default null)")
	return c
}
