package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version  int
	name     string
	up, down string
}

// migrations lists the embedded migrations, oldest first. Each version has
// NNNN_name.up.sql and NNNN_name.down.sql.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*migration{}
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		dir := ""
		switch {
		case strings.HasSuffix(rest, ".up.sql"):
			dir = "up"
		case strings.HasSuffix(rest, ".down.sql"):
			dir = "down"
		}
		v, err := strconv.Atoi(num)
		if !ok || dir == "" || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration %s: name is not NNNN_name.up.sql or .down.sql", name)
		}
		b, err := fs.ReadFile(migrationFS, "migrations/"+name)
		if err != nil {
			return nil, err
		}
		m := byVersion[v]
		if m == nil {
			m = &migration{version: v, name: strings.TrimSuffix(strings.TrimSuffix(name, ".up.sql"), ".down.sql")}
			byVersion[v] = m
		}
		if dir == "up" {
			m.up = string(b)
		} else {
			m.down = string(b)
		}
	}
	out := make([]migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.up == "" || m.down == "" {
			return nil, fmt.Errorf("postgres: migration %s lacks its up or down file", m.name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// SchemaVersion is the newest migration this build knows.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// applied reads the versions in schema_migrations; none when the table
// (or the schema) does not exist.
func (s *Store) applied(ctx context.Context, q querier) (map[int]bool, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`,
		pgx.Identifier{s.schema, "schema_migrations"}.Sanitize()).Scan(&exists); err != nil {
		return nil, fmt.Errorf("postgres: %s: migration status: %w", s.url, err)
	}
	have := map[int]bool{}
	if !exists {
		return have, nil
	}
	rows, err := q.Query(ctx, s.sql(`SELECT version FROM {s}.schema_migrations`))
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: migration status: %w", s.url, err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: migration status: %w", s.url, err)
	}
	for _, v := range vs {
		have[v] = true
	}
	return have, nil
}

// ErrMigration marks a failed or refused migration.
var ErrMigration = errors.New("migration")

// migrateTx runs fn in one transaction holding the schema's migration
// lock (an advisory lock on the schema's name), so processes migrating
// at once apply each migration once.
func (s *Store) migrateTx(ctx context.Context, fn func(tx pgx.Tx, have map[int]bool) error) error {
	if s.closed.Load() {
		return fmt.Errorf("postgres: migrate: store closed")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %s: migrate: %w", s.url, err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sluice-migrate:' || $1))`, s.schema); err != nil {
		return fmt.Errorf("postgres: %s: migrate: lock: %w", s.url, err)
	}
	if _, err := tx.Exec(ctx, s.sql(`CREATE SCHEMA IF NOT EXISTS {s}`)); err != nil {
		return fmt.Errorf("postgres: %s: migrate: %w", s.url, err)
	}
	if _, err := tx.Exec(ctx, s.sql(`CREATE TABLE IF NOT EXISTS {s}.schema_migrations (
		version    integer NOT NULL PRIMARY KEY,
		name       text    NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`)); err != nil {
		return fmt.Errorf("postgres: %s: migrate: %w", s.url, err)
	}
	have, err := s.applied(ctx, tx)
	if err != nil {
		return err
	}
	if err := fn(tx, have); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: %s: migrate: commit: %w", s.url, err)
	}
	return nil
}

// Migrate creates the schema when missing and applies the migrations it
// lacks, all in one transaction; idempotent and safe to run from several
// processes at once. A schema newer than this build is refused.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var applied []string
	regrouped := 0
	migrate := func(tx pgx.Tx, have map[int]bool) error {
		applied, regrouped = applied[:0], 0
		newest := 0
		for v := range have {
			newest = max(newest, v)
		}
		if latest := ms[len(ms)-1].version; newest > latest {
			return fmt.Errorf("postgres: %s: %w: schema %q is at version %d, newer than this build's %d", s.url, ErrMigration, s.schema, newest, latest)
		}
		for _, m := range ms {
			if have[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, s.sql(m.up)); err != nil {
				return fmt.Errorf("postgres: %s: migration %s: %w", s.url, m.name, err)
			}
			if m.version == renormalizeVersion {
				n, err := s.renormalizeErrorPatterns(ctx, tx)
				if err != nil {
					return fmt.Errorf("postgres: %s: migration %s: %w", s.url, m.name, err)
				}
				regrouped = n
			}
			if _, err := tx.Exec(ctx, s.sql(`INSERT INTO {s}.schema_migrations (version, name) VALUES ($1, $2)`), m.version, m.name); err != nil {
				return fmt.Errorf("postgres: %s: migration %s: %w", s.url, m.name, err)
			}
			applied = append(applied, m.name)
		}
		return nil
	}
	// A connection the server ended (a restart, an operator's
	// pg_terminate_backend) rolled the whole migration back: it is run
	// again, on a new connection.
	for attempt := 1; ; attempt++ {
		err = s.migrateTx(ctx, migrate)
		if err == nil || attempt == 3 || !connectionLost(err) {
			break
		}
		s.log.Warn("postgres: migration interrupted, running it again", "store", s.url, "err", err)
	}
	if err != nil {
		return err
	}
	for _, name := range applied {
		s.log.Info("postgres: migration applied", "store", s.url, "schema", s.schema, "migration", name)
	}
	if regrouped > 0 {
		s.log.Info("postgres: error patterns normalised again", "store", s.url, "schema", s.schema, "jobs", regrouped)
	}
	return nil
}

// MigrateDown reverts the newest n applied migrations, newest first, in
// one transaction, and returns their names.
func (s *Store) MigrateDown(ctx context.Context, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	var reverted []string
	err = s.migrateTx(ctx, func(tx pgx.Tx, have map[int]bool) error {
		for i := len(ms) - 1; i >= 0 && len(reverted) < n; i-- {
			m := ms[i]
			if !have[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, s.sql(m.down)); err != nil {
				return fmt.Errorf("postgres: %s: migration %s down: %w", s.url, m.name, err)
			}
			if _, err := tx.Exec(ctx, s.sql(`DELETE FROM {s}.schema_migrations WHERE version = $1`), m.version); err != nil {
				return fmt.Errorf("postgres: %s: migration %s down: %w", s.url, m.name, err)
			}
			reverted = append(reverted, m.name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, name := range reverted {
		s.log.Info("postgres: migration reverted", "store", s.url, "schema", s.schema, "migration", name)
	}
	return reverted, nil
}

// connectionLost reports an error that ended the connection (and with it
// any open transaction) rather than a statement.
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || strings.HasPrefix(pe.Code, "08")
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.ErrUnexpectedEOF)
}
