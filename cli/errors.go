package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// newErrorsCmd is `sluice errors`: the dead jobs grouped by queue, kind and
// normalised error, as the console's :errors screen shows them.
func newErrorsCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{
		Use:   "errors",
		Short: "List error groups: dead jobs by queue, kind and normalised error",
		Long: `Group dead jobs by queue, kind and normalised error (ids, addresses,
numbers and times masked), on a server (--api) or directly on a store
(--store).`,
	}
	o.addFlags(cmd)

	var ff filterFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List error groups, largest first, each with the query that selects it",
		Long: `List error groups, largest first, with the columns of the console's
:errors screen. The QUERY column is the group's selector, quoted for the
shell: paste it after -q to act on the group, as

  sluice bulk retry -q 'state:archived queue:billing kind:charge errgroup:"card declined"' --dry-run

The groups are of archived jobs unless --state or -q names other states.
NEAR counts the groups of one job beside a group whose error differs from
its own in a single word: most likely the same failure with an id the
normaliser did not recognise, which the group's query leaves out.`,
		Example: `  sluice errors list --api http://127.0.0.1:8080
  sluice errors list --store sqlite://sluice.db --queue billing -o json`,
		Args: cobra.NoArgs,
		RunE: o.withSession(func(cmd *cobra.Command, s *session, _ []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			groups, err := s.ctl.ErrorGroups(s.ctx, f)
			if groups == nil {
				groups = []engine.ErrorGroup{}
			}
			return render(cmd, o, groups, err, func(w io.Writer, groups []engine.ErrorGroup) error {
				if len(groups) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no dead jobs match: no error groups")
					return nil
				}
				return tableOf("QUEUE\tKIND\tJOBS\tLAST\tFIRST\tNEAR\tERROR\tQUERY", errorGroupRow)(w, groups)
			})
		}),
	}
	ff.add(list)
	cmd.AddCommand(list)
	return cmd
}

// errorGroupRow is an error group's row in errors list.
func errorGroupRow(g engine.ErrorGroup) []string {
	return []string{g.Queue, g.Kind, fmt.Sprint(g.Count), ago(g.LastSeen), ago(g.FirstSeen),
		fmt.Sprint(g.NearSingletons), short(g.Pattern, 80), shellQuote("-q", g.Selector.String())[3:]}
}
