package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// sluice limits: concurrency limits across processes, listed and set.

func newLimitsCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "limits", Short: "List and set concurrency limits across processes",
		Long: `List and set concurrency limits that hold across every process on a store:
at most N running jobs of a kind, or of a queue. A job held back by a limit
stays available. A limit set here holds in every process within a second,
on a server (--api) or directly on a store (--store).`}
	o.addFlags(cmd)
	var key string
	var rate int
	var per time.Duration
	list := &cobra.Command{
		Use:   "list",
		Short: "List limits with the jobs each counts running",
		Args:  cobra.NoArgs,
		RunE: runCall(o, func(_ *cobra.Command, s *session, _ []string) ([]engine.Limit, error) {
			return s.ctl.ListLimits(s.ctx)
		}, tableOf("SCOPE\tNAME\tLIMIT\tPER\tRUNNING\tRATE\tSTARTS\tUPDATED BY", limitRow)),
	}
	set := &cobra.Command{
		Use:   "set kind|queue NAME N",
		Short: "Set a kind's or a queue's limit: N running at once (0: none), --rate starts per --per",
		Args:  cobra.ExactArgs(3),
		RunE: runCall(o, func(c *cobra.Command, s *session, args []string) (limitChange, error) {
			n, err := strconv.Atoi(args[2])
			if err != nil || n < 0 {
				return limitChange{}, fmt.Errorf("%w: limit %q: want a whole number, 0 or more", engine.ErrInvalid, args[2])
			}
			want := engine.Limit{Scope: engine.LimitScope(args[0]), Name: args[1], Concurrency: n, Key: key,
				Rate: rate, RateWindow: per}
			ch := limitChange{Scope: want.Scope, Name: want.Name, New: n}
			ls, err := s.ctl.ListLimits(s.ctx)
			if err != nil {
				return ch, err
			}
			for _, l := range ls {
				if l.Scope != want.Scope || l.Name != want.Name {
					continue
				}
				// A set writes the whole limit: what no flag names
				// stays as it is (a new count keeps the rate).
				ch.Old = l.Concurrency
				if !c.Flags().Changed("key") {
					want.Key = l.Key
				}
				if !c.Flags().Changed("rate") && !c.Flags().Changed("per") {
					want.Rate, want.RateWindow = l.Rate, l.RateWindow
				}
			}
			ch.Key = want.Key
			return ch, s.ctl.SetLimit(s.ctx, want)
		}, func(w io.Writer, ch limitChange) error {
			fmt.Fprintf(w, "limit %s: %s -> %s\n", engine.Limit{Scope: ch.Scope, Name: ch.Name, Key: ch.Key}, limitText(ch.Old), limitText(ch.New))
			return nil
		}),
	}
	set.Flags().IntVar(&rate, "rate", 0, "also at most this many starts per --per (0: no rate; unset: the limit's rate stays)")
	set.Flags().DurationVar(&per, "per", time.Second, "the rate's window")
	set.Flags().StringVar(&key, "key", "", "partition a kind's limit by this top-level payload field: N per value (per customer; unset: the limit's stays)")
	cmd.AddCommand(list, set)
	return cmd
}

// limitChange is what limits set did: the old value and the new (0: none).
type limitChange struct {
	Scope engine.LimitScope `json:"scope"`
	Name  string            `json:"name"`
	Key   string            `json:"key,omitempty"`
	Old   int               `json:"old"`
	New   int               `json:"new"`
}

func limitText(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

func limitRow(l engine.Limit) []string {
	rate := ""
	if l.Rate > 0 {
		rate = fmt.Sprintf("%d/%s", l.Rate, l.Window())
	}
	return []string{string(l.Scope), l.Name, limitText(l.Concurrency), l.Key, fmt.Sprint(l.Running), rate, fmt.Sprint(l.Starts), l.UpdatedBy}
}
