package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// sluice operations: the bulk operations that sluice bulk and the console
// start (bulk.go follows and prints one).

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
		RunE: runCall(o, func(_ *cobra.Command, s *session, _ []string) (*engine.OperationPage, error) {
			return s.ctl.Operations(s.ctx, limit, cursor)
		}, func(w io.Writer, page *engine.OperationPage) error {
			return tableOf("ID\tACTION\tSTATUS\tPROCESSED\tFAILED\tBY\tCREATED\tSELECTOR", operationRow)(w, page.Operations)
		}),
	}
	list.Flags().IntVar(&limit, "limit", 50, "rows (1–200)")
	list.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page")
	var wait bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one operation's progress",
		Args:  cobra.ExactArgs(1),
		RunE: runCall(o, func(cmd *cobra.Command, s *session, args []string) (*engine.Operation, error) {
			if wait {
				return followOperation(s, args[0], cmd.ErrOrStderr())
			}
			return s.ctl.Operation(s.ctx, args[0])
		}, printOperation),
	}
	show.Flags().BoolVar(&wait, "wait", false, "follow the operation until it ends")
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a pending or running operation after its current batch",
		Args:  cobra.ExactArgs(1),
		RunE: runCall(o, func(_ *cobra.Command, s *session, args []string) (*engine.Operation, error) {
			return s.ctl.CancelOperation(s.ctx, args[0])
		}, printOperation),
	}
	cmd.AddCommand(list, show, cancel)
	return cmd
}

// operationRow is an operation's row in operations list.
func operationRow(op *engine.Operation) []string {
	return []string{op.ID, string(op.Action), string(op.Status), fmt.Sprintf("%d/%d", op.Processed, op.Matched), fmt.Sprint(op.Failed), op.CreatedBy, ago(op.CreatedAt), short(op.Selector.String(), 50)}
}
