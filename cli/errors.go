package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// newErrorsCmd is `sluice errors`: the dead jobs grouped by queue, kind and
// normalised error, as the console's :errors screen shows them, and an
// operator's verdicts on a group (resolve, ignore, unignore).
func newErrorsCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{
		Use:   "errors",
		Short: "List, resolve and ignore error groups: dead jobs by queue, kind and normalised error",
		Long: `Group dead jobs by queue, kind and normalised error (ids, addresses,
numbers and times masked), on a server (--api) or directly on a store
(--store). Resolve a group with a note once its cause is fixed: it reopens
by itself when one of its jobs dies after the resolution. Ignore a group
that does not matter: its jobs still die, are archived and counted, but
the listings leave it out until it is un-ignored.`,
	}
	o.addFlags(cmd)

	var ff filterFlags
	var ignored bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List error groups, largest first, each with the query that selects it",
		Long: `List error groups, largest first, with the columns of the console's
:errors screen. The QUERY column is the group's selector, quoted for the
shell: paste it after -q to act on the group, as

  sluice bulk retry -q 'state:archived queue:billing kind:charge errgroup:"card declined"' --dry-run

The groups are of archived jobs unless --state or -q names other states.
ID is what resolve, ignore and unignore take. STATUS is open, resolved,
reopened (resolved, then one of its jobs died after: since when) or
ignored; ignored groups are listed with --ignored only. NEAR counts the
groups of one job beside a group whose error differs from its own in a
single word: most likely the same failure with an id the normaliser did
not recognise, which the group's query leaves out.`,
		Example: `  sluice errors list --api http://127.0.0.1:8080
  sluice errors list --store sqlite://sluice.db --queue billing -o json
  sluice errors list --ignored`,
		Args: cobra.NoArgs,
		RunE: o.withSession(func(cmd *cobra.Command, s *session, _ []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			groups, err := s.ctl.ListErrorGroups(s.ctx, engine.ListErrorGroupsParams{Filter: f, Ignored: ignored})
			if groups == nil {
				groups = []engine.ErrorGroup{}
			}
			return render(cmd, o, groups, err, func(w io.Writer, groups []engine.ErrorGroup) error {
				if len(groups) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no dead jobs match: no error groups")
					return nil
				}
				return tableOf("ID\tQUEUE\tKIND\tSTATUS\tJOBS\tLAST\tFIRST\tNEAR\tERROR\tQUERY", errorGroupRow)(w, groups)
			})
		}),
	}
	ff.add(list)
	list.Flags().BoolVar(&ignored, "ignored", false, "list the ignored groups too")
	var note string
	verdict := func(verb, short, long string, call func(c engine.Control, s *session, id string) (*engine.ErrorGroup, error)) *cobra.Command {
		c := &cobra.Command{
			Use:   verb + " ID",
			Short: short,
			Long:  long,
			Args:  cobra.ExactArgs(1),
			RunE: runCall(o, func(_ *cobra.Command, s *session, args []string) (*engine.ErrorGroup, error) {
				return call(s.ctl, s, args[0])
			}, func(w io.Writer, g *engine.ErrorGroup) error {
				fmt.Fprintf(w, "error group %s (%s %s, %d job(s)): %s\n", g.ID, g.Queue, g.Kind, g.Count, groupStatus(*g))
				return nil
			}),
		}
		if verb != "unignore" {
			c.Flags().StringVar(&note, "note", "", fmt.Sprintf("why, in at most %d characters", engine.MaxErrorGroupNote))
		}
		return c
	}
	cmd.AddCommand(list,
		verdict("resolve", "Resolve an error group, with a note; it reopens when one of its jobs dies after",
			`Resolve the error group of ID (errors list's ID column), with a note
saying what fixed it. The group stays listed, resolved, until one of its
jobs dies after the resolution: then it reads reopened, with when.`,
			func(c engine.Control, s *session, id string) (*engine.ErrorGroup, error) {
				return c.ResolveErrorGroup(s.ctx, engine.ErrorGroupResolveParams{ID: id, Note: note})
			}),
		verdict("ignore", "Ignore an error group: counted as ever, left out of the listings",
			`Ignore the error group of ID, with a note saying why. Its jobs still
die, are archived and counted (the metrics count them under status
ignored), and a filter still finds them; errors list and the console's
:errors leave the group out unless asked (--ignored).`,
			func(c engine.Control, s *session, id string) (*engine.ErrorGroup, error) {
				return c.IgnoreErrorGroup(s.ctx, engine.ErrorGroupIgnoreParams{ID: id, Note: note})
			}),
		verdict("unignore", "Bring an ignored error group back to the listings, open",
			`Bring the ignored error group of ID back to the listings, open. A group
that is not ignored is left as it is.`,
			func(c engine.Control, s *session, id string) (*engine.ErrorGroup, error) {
				return c.UnignoreErrorGroup(s.ctx, engine.ErrorGroupUnignoreParams{ID: id})
			}),
	)
	return cmd
}

// errorGroupRow is an error group's row in errors list.
func errorGroupRow(g engine.ErrorGroup) []string {
	return []string{g.ID, g.Queue, g.Kind, groupStatus(g), fmt.Sprint(g.Count), ago(g.LastSeen), ago(g.FirstSeen),
		fmt.Sprint(g.NearSingletons), short(g.Pattern, 80), shellQuote("-q", g.Selector.String())[3:]}
}

// groupStatus is a group's status in a word, and since when it came back
// for a reopened one ("reopened 5m ago").
func groupStatus(g engine.ErrorGroup) string {
	if g.Status == engine.GroupReopened && g.ReopenedAt != nil {
		return string(g.Status) + " " + ago(*g.ReopenedAt)
	}
	if g.Status == "" {
		return string(engine.GroupOpen)
	}
	return string(g.Status)
}
