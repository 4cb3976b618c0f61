package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cliutil"
)

type migrateOptions struct {
	store  string
	dryRun bool
	down   int // migrations to revert (PostgreSQL)
}

func newMigrateCmd(lo *logOptions) *cobra.Command {
	o := &migrateOptions{}
	cmd := &cobra.Command{
		Use:   "migrate [down N]",
		Short: "Bring a store's schema up to date, or show what is pending",
		Long: `Apply the schema migrations built into this binary that the store lacks,
and print the schema version before and after. With --dry-run, only show
the store's version and the pending migrations; nothing is changed and a
missing SQLite file is not created.

Every command that opens a store migrates it as it opens; run this to do
it ahead of a rollout, or to see where a store stands. It is idempotent
and safe while workers run: a file's migrations go in one write
transaction. A store whose schema is newer than this binary's is refused.

On PostgreSQL (postgres://…?schema=NAME, default schema sluice) processes
do not migrate by themselves: run this before rolling out a new version.
"down N" reverts the newest N migrations there.`,
		Example: `  sluice migrate --store sqlite://sluice.db --dry-run
  sluice migrate --store sqlite:///var/lib/sluice/jobs.db
  sluice migrate --store 'postgres://app@db/jobs?schema=sluice'
  sluice migrate down 1 --store 'postgres://app@db/jobs?schema=sluice'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			if len(args) != 2 || args[0] != "down" {
				return fmt.Errorf("migrate: %w: want no arguments or \"down N\"", engine.ErrInvalid)
			}
			n, err := strconv.Atoi(args[1])
			if err != nil || n <= 0 {
				return fmt.Errorf("migrate: %w: down %q: want a positive number", engine.ErrInvalid, args[1])
			}
			o.down = n
			return nil
		},
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
	if t.Backend == "postgres" {
		return runMigratePostgres(ctx, o, lo, out)
	}
	if o.down > 0 {
		return fmt.Errorf("migrate: store %s: %w: the %s backend has no down migrations", cliutil.RedactURL(o.store), engine.ErrUnsupported, t.Backend)
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

// runMigratePostgres is runMigrate on a PostgreSQL schema.
func runMigratePostgres(ctx context.Context, o *migrateOptions, lo *logOptions, out io.Writer) error {
	name := cliutil.RedactURL(o.store)
	log, closeLog, err := lo.Logger(nil)
	if err != nil {
		return err
	}
	defer closeLog()
	store, err := postgres.OpenForMigration(ctx, o.store, log)
	if err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	defer store.Close()
	before, err := store.Status(ctx)
	if err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	if o.down > 0 {
		if o.dryRun {
			fmt.Fprintf(out, "store %s: schema %s at version %d; down %d would revert the newest %d applied\n", name, store.Schema(), before.Version, o.down, o.down)
			return nil
		}
		reverted, err := store.MigrateDown(ctx, o.down)
		if err != nil {
			return fmt.Errorf("migrate: store %s: %w", name, err)
		}
		after, err := store.Status(ctx)
		if err != nil {
			return fmt.Errorf("migrate: store %s: %w", name, err)
		}
		fmt.Fprintf(out, "store %s: schema %s version %d → %d\n", name, store.Schema(), before.Version, after.Version)
		for _, m := range reverted {
			fmt.Fprintf(out, "reverted %s\n", m)
		}
		return nil
	}
	if before.Version > before.Latest {
		return fmt.Errorf("migrate: store %s: schema version %d is newer than this binary's %d: use a newer sluice",
			name, before.Version, before.Latest)
	}
	if o.dryRun {
		fmt.Fprintf(out, "store %s: schema %s at version %d; this binary's is %d\n", name, store.Schema(), before.Version, before.Latest)
		if len(before.Pending) == 0 {
			fmt.Fprintln(out, "up to date: nothing to apply")
			return nil
		}
		fmt.Fprintf(out, "pending: %s\n", strings.Join(before.Pending, ", "))
		return nil
	}
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	after, err := store.Status(ctx)
	if err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	if len(before.Pending) == 0 {
		fmt.Fprintf(out, "store %s: schema %s version %d, up to date: nothing to apply\n", name, store.Schema(), after.Version)
		return nil
	}
	fmt.Fprintf(out, "store %s: schema %s version %d → %d\n", name, store.Schema(), before.Version, after.Version)
	for _, m := range before.Pending {
		fmt.Fprintf(out, "applied %s\n", m)
	}
	return nil
}
