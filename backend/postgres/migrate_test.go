package postgres_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/sluicetype"
)

// tables lists the tables of a schema.
func tables(t *testing.T, s *postgres.Store) []string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// upMigrations lists the up migrations' files.
func upMigrations(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("migrations", "*.up.sql"))
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v %v", names, err)
	}
	return names
}

// TestMigrateUpDown applies the migrations to an empty schema, reverts
// them all, and applies them again; Status follows each step.
func TestMigrateUpDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, _ := pgtest.SchemaURL(t)
	s, err := postgres.OpenForMigration(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Status(ctx)
	// Counted from the files: a version left to another branch (0017
	// while 0018 is here) is a gap, not a migration.
	n := len(upMigrations(t))
	if err != nil || st.Version != 0 || st.Latest != postgres.SchemaVersion() || len(st.Pending) != n {
		t.Fatalf("empty schema: %+v %v", st, err)
	}
	for round := range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil { // idempotent
			t.Fatal(err)
		}
		st, err := s.Status(ctx)
		if err != nil || st.Version != st.Latest || len(st.Pending) != 0 {
			t.Fatalf("round %d up: %+v %v", round, st, err)
		}
		if got := strings.Join(tables(t, s), ","); !strings.Contains(got, "jobs") || !strings.Contains(got, "job_counts") {
			t.Fatalf("round %d up: tables %s", round, got)
		}
		reverted, err := s.MigrateDown(ctx, st.Latest)
		if err != nil || len(reverted) != n {
			t.Fatalf("round %d down: %v %v", round, reverted, err)
		}
		if got := tables(t, s); len(got) != 1 || got[0] != "schema_migrations" {
			t.Fatalf("round %d down: tables left %v", round, got)
		}
	}
}

// TestOpenFollowsTheCreationRule: MustExist never creates, a process not
// told to migrate refuses a schema behind or ahead naming both versions
// and the command, and one told to migrates.
func TestOpenFollowsTheCreationRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, schema := pgtest.SchemaURL(t)
	latest := postgres.SchemaVersion()

	_, err := postgres.Open(ctx, u, postgres.Options{MustExist: true, Migrate: true})
	if !errors.Is(err, postgres.ErrNoStore) || !strings.Contains(err.Error(), "sluice migrate --store") {
		t.Fatalf("MustExist on an empty schema: %v", err)
	}
	_, err = postgres.Open(ctx, u, postgres.Options{})
	if !errors.Is(err, postgres.ErrSchemaVersion) || !strings.Contains(err.Error(), "version 0, this build needs") ||
		!strings.Contains(err.Error(), "sluice migrate --store") {
		t.Fatalf("not told to migrate, empty schema: %v", err)
	}
	m, err := postgres.OpenForMigration(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if st, _ := m.Status(ctx); st.Version != 0 {
		t.Fatalf("refused opens created something: %+v", st)
	}

	s, err := postgres.Open(ctx, u+"&migrate=true", postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = postgres.Open(ctx, u, postgres.Options{MustExist: true})
	if err != nil {
		t.Fatalf("MustExist on a migrated schema: %v", err)
	}
	s.Close()

	// A schema ahead of this build.
	if _, err := m.Pool().Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+` (version, name) VALUES ($1, 'from_the_future')`, latest+1); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []postgres.Options{{}, {MustExist: true}} {
		_, err = postgres.Open(ctx, u, opts)
		if !errors.Is(err, postgres.ErrSchemaVersion) || !strings.Contains(err.Error(), "newer than this build") {
			t.Fatalf("%+v, schema ahead: %v", opts, err)
		}
	}
	if err := m.Migrate(ctx); err == nil || !errors.Is(err, postgres.ErrMigration) {
		t.Fatalf("migrating a schema ahead: %v", err)
	}
}

// TestHotColumnsCompareBytes checks that the columns the hot indexes
// order by collate "C" (migration 0007), whatever the database's
// collation: byte order, as SQLite and Redis list ids, and no strcoll in
// the btree comparisons of every claim and completion.
func TestHotColumnsCompareBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, _ := pgtest.SchemaURL(t)
	s, err := postgres.OpenForMigration(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"jobs":        {"id", "queue", "kind", "state", "error_pattern", "superseded_by"},
		"job_events":  {"job_id"},
		"job_signals": {"job_id"},
		"job_counts":  {"queue", "state"},
	}
	for table, cols := range want {
		for _, col := range cols {
			var coll *string
			err := s.Pool().QueryRow(ctx, `SELECT collation_name FROM information_schema.columns
				WHERE table_schema = $1 AND table_name = $2 AND column_name = $3`, s.Schema(), table, col).Scan(&coll)
			if err != nil {
				t.Fatalf("%s.%s: %v", table, col, err)
			}
			if coll == nil || *coll != "C" {
				t.Errorf("%s.%s collates %v, want C", table, col, coll)
			}
		}
	}
}

// TestMigration0010RegroupsOldPatterns: jobs that died under an older
// normaliser, their patterns as it wrote them, are grouped again when the
// schema is upgraded: the request ids of any letters join one group, and
// the two columns part.
func TestMigration0010RegroupsOldPatterns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, _ := pgtest.SchemaURL(t)
	s, err := postgres.OpenForMigration(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	old := backendtest.OldErrorPatterns()
	for i, j := range old {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO `+s.Schema()+`.jobs (id, queue, kind, state, scheduled_at, created_at, state_changed_at, last_error, error_pattern)
			VALUES ($1, 'q', 'k', 'archived', 1, 1, $2, $3, $4)`, j.ID, i+1, j.LastError, j.Pattern); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(ctx, `DELETE FROM `+s.Schema()+`.schema_migrations WHERE version >= 10`); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	groups, err := s.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.CheckRegrouped(t, groups)
}
