package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// migrateFlagUsage is the help of --migrate on the processes that open a
// store for their whole life (serve, worker).
const migrateFlagUsage = "bring a PostgreSQL schema or Redis namespace that is behind this build up to date as it opens (as sluice migrate; a SQLite file always is)"

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

A SQLite file is migrated by the processes that own it as they open it
(serve, worker, demo, tui --worker); the console without --worker and the
operator commands (jobs, errors, bulk, ...) never create or migrate a
store. A PostgreSQL schema (postgres://…?schema=NAME, default
schema sluice) and a Redis namespace (redis://…?ns=NAME, default namespace
sluice) are migrated only when told: by this command, by serve or worker
started with --migrate, or by a PostgreSQL URL's migrate=true; a process
not told refuses a schema behind it, naming this command. Run it ahead of
a rollout, or to see where a store stands. It is idempotent and safe
while workers run: a store's migrations go in one transaction (SQLite,
PostgreSQL) or resume where they stopped (Redis). A store whose schema is
newer than this binary's is refused.

"down N" reverts the newest N migrations on PostgreSQL. A Redis
namespace's layout only grows, so it has no down steps.`,
		Example: `  sluice migrate --store sqlite://sluice.db --dry-run
  sluice migrate --store sqlite:///var/lib/sluice/jobs.db
  sluice migrate --store 'postgres://app@db/jobs?schema=sluice'
  sluice migrate down 1 --store 'postgres://app@db/jobs?schema=sluice'
  sluice migrate --store 'redis://127.0.0.1:6379/0?ns=sluice'`,
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
	t, err := storeurl.Parse(o.store)
	if err != nil {
		return err
	}
	switch t.Backend {
	case "postgres":
		return runMigratePostgres(ctx, o, lo, out)
	case "redis":
		return runMigrateRedis(ctx, o, lo, out)
	}
	if o.down > 0 {
		return fmt.Errorf("migrate: store %s: %w: the %s backend has no down migrations", redact.URL(o.store), engine.ErrUnsupported, t.Backend)
	}
	name := redact.URL(o.store)
	st, err := sqlite.Status(ctx, t.Path)
	if err != nil {
		return err
	}
	before := schemaStatus{Exists: st.Exists, Version: st.Version, Latest: st.Latest, Pending: st.Pending}
	if err := before.refuseNewer(name); err != nil {
		return err
	}
	if o.dryRun {
		before.printPending(out, name, "no file yet")
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
	before.printApplied(out, name, after.Version)
	return nil
}

// runMigratePostgres is runMigrate on a PostgreSQL schema.
func runMigratePostgres(ctx context.Context, o *migrateOptions, lo *logOptions, out io.Writer) error {
	name := redact.URL(o.store)
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

// runMigrateRedis is runMigrate on a Redis namespace (no down steps: a
// namespace's layout only grows).
func runMigrateRedis(ctx context.Context, o *migrateOptions, lo *logOptions, out io.Writer) error {
	name := redact.URL(o.store)
	if o.down > 0 {
		return fmt.Errorf("migrate: store %s: %w: the redis backend has no down migrations", name, engine.ErrUnsupported)
	}
	st, err := redis.Status(ctx, o.store)
	if err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	before := schemaStatus{Exists: st.Exists, Version: st.Version, Latest: st.Latest, Pending: st.Pending}
	if err := before.refuseNewer(name); err != nil {
		return err
	}
	if o.dryRun {
		before.printPending(out, name, "no namespace yet")
		return nil
	}
	log, closeLog, err := lo.Logger(nil)
	if err != nil {
		return err
	}
	defer closeLog()
	store, err := redis.Open(ctx, o.store, redis.Options{Logger: log, Migrate: true})
	if err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("migrate: store %s: %w", name, err)
	}
	before.printApplied(out, name, before.Latest)
	return nil
}

// schemaStatus is where a SQLite file's or a Redis namespace's schema
// stands, as `sluice migrate` reports it.
type schemaStatus struct {
	Exists          bool
	Version, Latest int
	Pending         []string
}

func (st schemaStatus) refuseNewer(name string) error {
	if st.Version > st.Latest {
		return fmt.Errorf("migrate: store %s: schema version %d is newer than this binary's %d: use a newer sluice",
			name, st.Version, st.Latest)
	}
	return nil
}

// printPending is the dry run's answer; missing says how a store that does
// not exist yet is named ("no file yet").
func (st schemaStatus) printPending(out io.Writer, name, missing string) {
	where := fmt.Sprintf("schema version %d", st.Version)
	if !st.Exists {
		where = missing + ", schema version 0"
	}
	fmt.Fprintf(out, "store %s: %s; this binary's is %d\n", name, where, st.Latest)
	if len(st.Pending) == 0 {
		fmt.Fprintln(out, "up to date: nothing to apply")
		return
	}
	fmt.Fprintf(out, "pending: %s\n", strings.Join(st.Pending, ", "))
}

// printApplied reports a run that brought the store from st to version.
func (st schemaStatus) printApplied(out io.Writer, name string, version int) {
	if len(st.Pending) == 0 {
		fmt.Fprintf(out, "store %s: schema version %d, up to date: nothing to apply\n", name, version)
		return
	}
	fmt.Fprintf(out, "store %s: schema version %d → %d\n", name, st.Version, version)
	for _, m := range st.Pending {
		fmt.Fprintf(out, "applied %s\n", m)
	}
}
