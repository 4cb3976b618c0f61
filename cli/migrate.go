package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cliutil"
)

type migrateOptions struct {
	store  string
	dryRun bool
}

func newMigrateCmd(lo *logOptions) *cobra.Command {
	o := &migrateOptions{}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Bring a store's schema up to date, or show what is pending",
		Long: `Apply the schema migrations built into this binary that the store lacks,
and print the schema version before and after. With --dry-run, only show
the store's version and the pending migrations; nothing is changed and a
missing SQLite file is not created.

Every command that opens a store migrates it as it opens; run this to do
it ahead of a rollout, or to see where a store stands. It is idempotent
and safe while workers run: a file's migrations go in one write
transaction. A store whose schema is newer than this binary's is refused.`,
		Example: `  sluice migrate --store sqlite://sluice.db --dry-run
  sluice migrate --store sqlite:///var/lib/sluice/jobs.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMigrate(cmd.Context(), o, lo, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "sqlite://sluice.db", "store URL (env SLUICE_STORE)")
	f.BoolVar(&o.dryRun, "dry-run", false, "only show the schema version and the pending migrations")
	return cmd
}

func runMigrate(ctx context.Context, o *migrateOptions, lo *logOptions, out io.Writer) error {
	t, err := cliutil.ParseStoreURL(o.store)
	if err != nil {
		return err
	}
	if t.Backend != "sqlite" {
		return fmt.Errorf("migrate: store %s: %s backend not built yet: %w", cliutil.RedactURL(o.store), t.Backend, engine.ErrUnsupported)
	}
	name := cliutil.RedactURL(o.store)
	before, err := sqlite.Status(ctx, t.Path)
	if err != nil {
		return err
	}
	if before.Version > before.Latest {
		return fmt.Errorf("migrate: store %s: schema version %d is newer than this binary's %d: use a newer sluice",
			name, before.Version, before.Latest)
	}
	if o.dryRun {
		where := fmt.Sprintf("schema version %d", before.Version)
		if !before.Exists {
			where = "no file yet, schema version 0"
		}
		fmt.Fprintf(out, "store %s: %s; this binary's is %d\n", name, where, before.Latest)
		if len(before.Pending) == 0 {
			fmt.Fprintln(out, "up to date: nothing to apply")
			return nil
		}
		fmt.Fprintf(out, "pending: %s\n", strings.Join(before.Pending, ", "))
		return nil
	}

	log, closeLog, err := lo.Logger(nil)
	if err != nil {
		return err
	}
	defer closeLog()
	// Open applies what is missing, in one transaction.
	store, err := sqlite.Open(ctx, t.Path, sqlite.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	after, err := sqlite.Status(ctx, t.Path)
	if err != nil {
		return err
	}
	if len(after.Pending) > 0 {
		return fmt.Errorf("migrate: store %s: still pending after migrating: %s", name, strings.Join(after.Pending, ", "))
	}
	applied := before.Pending
	if len(applied) == 0 {
		fmt.Fprintf(out, "store %s: schema version %d, up to date: nothing to apply\n", name, after.Version)
		return nil
	}
	fmt.Fprintf(out, "store %s: schema version %d → %d\n", name, before.Version, after.Version)
	for _, m := range applied {
		fmt.Fprintf(out, "applied %s\n", m)
	}
	return nil
}
