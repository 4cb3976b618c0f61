package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// sluice quarantine: the fingerprints whose jobs crashed their process too
// often, and their release.

func newQuarantineCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "quarantine", Short: "List quarantined fingerprints and release them",
		Long: `List the fingerprints whose jobs crashed their process too often, and
release them so their held jobs run again, on a server (--api) or directly
on a store (--store).`}
	o.addFlags(cmd)
	list := &cobra.Command{
		Use:   "list",
		Short: "List quarantined and probationary fingerprints",
		Args:  cobra.NoArgs,
		RunE: runCall(o, func(_ *cobra.Command, s *session, _ []string) ([]*engine.Fingerprint, error) {
			return s.ctl.Quarantine(s.ctx)
		}, tableOf("FINGERPRINT\tKIND\tSTATUS\tCRASHES\tHELD\tSINCE\tLAST ERROR", fingerprintRow)),
	}
	release := &cobra.Command{
		Use:   "release FINGERPRINT",
		Short: "Lift a quarantine; its held jobs go back to available (asks first unless --yes)",
		Long: `Lift the quarantine of a fingerprint: its held jobs go back to available
with their crash counters reset, and new jobs of it are accepted again.

The fingerprint goes on probation until one of its jobs completes: a crash
of any of its jobs meanwhile quarantines it again at once. A job released
alone (sluice jobs release ID) runs on probation likewise, its fingerprint
staying quarantined.`,
		Args: cobra.ExactArgs(1),
		RunE: o.withSession(func(cmd *cobra.Command, s *session, args []string) error {
			if !o.yes {
				held := "its held jobs"
				if fps, err := s.ctl.Quarantine(s.ctx); err == nil {
					for _, fp := range fps {
						if fp.Fingerprint == args[0] {
							held = fmt.Sprintf("%d held job(s)", fp.Held)
						}
					}
				}
				if !confirm(cmd, fmt.Sprintf("Release fingerprint %s and run %s again?", short(args[0], 16), held)) {
					return errAborted
				}
			}
			n, err := s.ctl.ReleaseFingerprint(s.ctx, args[0])
			return render(cmd, o, map[string]int{"released": n}, err, func(w io.Writer, _ map[string]int) error {
				fmt.Fprintf(w, "released %d job(s)\n", n)
				return nil
			})
		}),
	}
	o.addYesFlag(release)
	cmd.AddCommand(list, release)
	return cmd
}

// fingerprintRow is a fingerprint's row in quarantine list.
func fingerprintRow(fp *engine.Fingerprint) []string {
	return []string{fp.Fingerprint, fp.Kind, string(fp.Status), fmt.Sprint(fp.Crashes), fmt.Sprint(fp.Held), ago(fp.Since), short(fp.LastError, 50)}
}
