package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// sluice operations: the bulk operations that sluice bulk and the console
// start (bulk.go follows and prints one).

func newOperationsCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "operations", Short: "List, show, cancel and resume bulk operations",
		Long: `List, show, cancel and resume the bulk operations started by sluice bulk
or the console, on a server (--api) or directly on a store (--store). A
canary run (sluice bulk --canary) that halted itself waits for an
operator: resume sets it going again, watching a fresh window; cancel
ends it.`}
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
			return tableOf("ID\tACTION\tSTATUS\tPROCESSED\tFAILED\tBY\tCREATED\tSTART\tSELECTOR", operationRow)(w, page.Operations)
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
		Short: "Stop a pending, running or halted operation after its current batch",
		Args:  cobra.ExactArgs(1),
		RunE: runCall(o, func(_ *cobra.Command, s *session, args []string) (*engine.Operation, error) {
			return s.ctl.CancelOperation(s.ctx, args[0])
		}, printOperation),
	}
	resume := &cobra.Command{
		Use:   "resume ID",
		Short: "Set a halted canary run going again, watching a fresh window",
		Args:  cobra.ExactArgs(1),
		RunE: runCall(o, func(_ *cobra.Command, s *session, args []string) (*engine.Operation, error) {
			return s.ctl.ResumeOperation(s.ctx, args[0])
		}, printOperation),
	}
	cmd.AddCommand(list, show, cancel, resume)
	return cmd
}

// operationRow is an operation's row in operations list. A run waiting
// for its start time is "scheduled" (pending on the wire), its START the
// time and the wait; "now" for one that started when it was created.
func operationRow(op *engine.Operation) []string {
	now := time.Now()
	status, start := string(op.Status), "now"
	if op.Waiting(now) {
		status = "scheduled"
		start = strings.TrimPrefix(engine.StartMark(op, now), "scheduled for ")
	} else if op.StartAt != nil {
		start = op.StartAt.Local().Format("2006-01-02 15:04")
	}
	return []string{op.ID, string(op.Action), status, fmt.Sprintf("%d/%d", op.Processed, op.Matched), fmt.Sprint(op.Failed), op.CreatedBy, ago(op.CreatedAt), start, short(op.Selector.String(), 50)}
}
