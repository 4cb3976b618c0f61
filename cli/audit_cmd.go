package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// sluice audit: the audit trail, one record per mutating action of every
// surface, newest first.

func newAuditCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "audit", Short: "Read the audit trail of operator actions",
		Long: `Read the audit trail: one record per mutating action of the console, the
command line, the API and SSH sessions, refused ones included, newest first,
on a server (--api) or directly on a store (--store).`}
	o.addFlags(cmd)
	var q, cursor string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List audit records, newest first",
		Example: `  sluice audit list -q 'actor:maya since:24h'
  sluice audit list -q 'action:bulk' -o json
  sluice audit list -q 'job:invoice-42'`,
		Args: cobra.NoArgs,
		RunE: runCall(o, func(_ *cobra.Command, s *session, _ []string) (*engine.AuditPage, error) {
			aq, err := engine.ParseAuditQuery(q, time.Now())
			if err != nil {
				return nil, err
			}
			aq.Limit, aq.After = limit, cursor
			return s.ctl.Audit(s.ctx, aq)
		}, func(w io.Writer, page *engine.AuditPage) error {
			if err := tableOf("AT\tACTOR\tROLE\tSURFACE\tACTION\tWHAT\tRESULT", auditRow)(w, page.Records); err != nil {
				return err
			}
			if page.Next != "" {
				fmt.Fprintf(w, "more: --cursor %s\n", page.Next)
			}
			return nil
		}),
	}
	list.Flags().StringVarP(&q, "query", "q", "", "query, as actor:maya action:retry job:ID operation:ID since:24h until:2026-12-07T21:00:00Z")
	list.Flags().IntVar(&limit, "limit", 50, "rows (1–500)")
	list.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page")
	cmd.AddCommand(list)
	return cmd
}

// auditRow is a record's row in audit list.
func auditRow(r *engine.AuditRecord) []string {
	role := string(r.Role)
	if role == "" {
		role = "-"
	}
	return []string{r.At.Local().Format("2006-01-02 15:04:05"), r.Actor, role, string(r.Surface), r.Action, short(auditWhat(r), 60), r.Result}
}

// auditWhat says in a few words what a record names: the job, the
// target, the operation, the applied action and count, the edited paths.
func auditWhat(r *engine.AuditRecord) string {
	var parts []string
	if r.JobID != "" {
		parts = append(parts, "job "+r.JobID)
	}
	if len(r.IDs) > 0 {
		parts = append(parts, fmt.Sprintf("%d ids", len(r.IDs)))
	}
	if r.Target != "" {
		parts = append(parts, r.Target)
	}
	if r.Operation != "" {
		parts = append(parts, "op "+r.Operation)
	}
	if r.Applied != "" {
		parts = append(parts, string(r.Applied))
	}
	if r.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d jobs", r.Count))
	}
	if r.Selector != "" {
		parts = append(parts, r.Selector)
	}
	if len(r.Paths) > 0 {
		parts = append(parts, "paths "+strings.Join(r.Paths, ","))
	}
	return strings.Join(parts, " · ")
}
