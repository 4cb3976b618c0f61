package cli

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
)

// migrationFiles are the embedded migrations' file names, oldest first,
// read from the source tree.
func migrationFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("..", "backend", "sqlite", "migrations", "*.sql"))
	if err != nil || len(names) < 2 {
		t.Fatalf("migrations: %v %v", names, err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}

// oldStore writes a SQLite file that has only the first migration, as a
// store made by an older sluice would.
func oldStore(t *testing.T) string {
	t.Helper()
	first := migrationFiles(t)[0]
	ddl, err := os.ReadFile(filepath.Join("..", "backend", "sqlite", "migrations", first))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)`,
		string(ddl),
		`INSERT INTO schema_migrations (version, applied_at) VALUES (1, 0)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("old store: %v", err)
		}
	}
	return path
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	files := migrationFiles(t)
	latest := sqlite.SchemaVersion()

	t.Run("new file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "new.db")
		url := "sqlite://" + path
		code, out, stderr := runCLI(t, "", "migrate", "--store", url, "--dry-run")
		if code != 0 || !strings.Contains(out, "no file yet, schema version 0") || !strings.Contains(out, "pending: "+strings.Join(files, ", ")) {
			t.Fatalf("dry run: exit %d %s %s", code, out, stderr)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("the dry run created the file: %v", err)
		}
		code, out, stderr = runCLI(t, "", "migrate", "--store", url)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("schema version 0 → %d", latest)) {
			t.Fatalf("migrate: exit %d %s %s", code, out, stderr)
		}
		for _, f := range files {
			if !strings.Contains(out, "applied "+f) {
				t.Errorf("migrate did not say it applied %s:\n%s", f, out)
			}
		}
		st, err := sqlite.Status(context.Background(), path)
		if err != nil || st.Version != latest || len(st.Pending) != 0 {
			t.Fatalf("status after: %+v %v", st, err)
		}
		code, out, _ = runCLI(t, "", "migrate", "--store", url)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("schema version %d, up to date", latest)) {
			t.Fatalf("second migrate: exit %d %s", code, out)
		}
		code, out, _ = runCLI(t, "", "migrate", "--store", path, "--dry-run")
		if code != 0 || !strings.Contains(out, "up to date: nothing to apply") {
			t.Fatalf("dry run when up to date: exit %d %s", code, out)
		}
	})

	t.Run("older file", func(t *testing.T) {
		t.Parallel()
		path := oldStore(t)
		code, out, stderr := runCLI(t, "", "migrate", "--store", path, "--dry-run")
		if code != 0 || !strings.Contains(out, "schema version 1;") || !strings.Contains(out, "pending: "+strings.Join(files[1:], ", ")) {
			t.Fatalf("dry run: exit %d %s %s", code, out, stderr)
		}
		if st, err := sqlite.Status(context.Background(), path); err != nil || st.Version != 1 {
			t.Fatalf("the dry run changed the file: %+v %v", st, err)
		}
		code, out, stderr = runCLI(t, "", "migrate", "--store", "sqlite://"+path)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("schema version 1 → %d", latest)) ||
			strings.Contains(out, "applied "+files[0]) || !strings.Contains(out, "applied "+files[len(files)-1]) {
			t.Fatalf("migrate: exit %d %s %s", code, out, stderr)
		}
		// The store works at the new version.
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	})

	t.Run("newer file", func(t *testing.T) {
		t.Parallel()
		path := sqlitetest.Path(t)
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		for _, extra := range [][]string{nil, {"--dry-run"}} {
			code, _, stderr := runCLI(t, "", append([]string{"migrate", "--store", path}, extra...)...)
			if code != 1 || !strings.Contains(stderr, "schema version 9999 is newer than this binary's") {
				t.Fatalf("migrate %v: exit %d %s", extra, code, stderr)
			}
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		// Nothing listens on port 1: the error names the store, never its password.
		code, _, stderr := runCLI(t, "", "migrate", "--store", "postgres://u:secret@127.0.0.1:1/x?connect_timeout=2")
		if code != 1 || !strings.Contains(stderr, "127.0.0.1:1") || strings.Contains(stderr, "secret") {
			t.Fatalf("postgres: exit %d %s", code, stderr)
		}
	})
}

// TestMigratePostgres: on a fresh schema, --dry-run lists the pending
// migrations and changes nothing, a read-only command refuses the empty
// schema naming `sluice migrate`, migrate applies them all, a second run
// has nothing to apply, and down 1 reverts the newest.
func TestMigratePostgres(t *testing.T) {
	t.Parallel()
	u, _ := pgtest.SchemaURL(t)
	latest := postgres.SchemaVersion()
	code, out, stderr := runCLI(t, "", "migrate", "--store", u, "--dry-run")
	if code != 0 || !strings.Contains(out, "at version 0") || !strings.Contains(out, "pending: 0001_init") {
		t.Fatalf("dry run: exit %d %s %s", code, out, stderr)
	}
	code, _, stderr = runCLI(t, "", "jobs", "list", "--store", u)
	if code == 0 || !strings.Contains(stderr, "sluice migrate --store") {
		t.Fatalf("jobs list on an empty schema: exit %d %s", code, stderr)
	}
	code, out, stderr = runCLI(t, "", "migrate", "--store", u)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("version 0 → %d", latest)) || !strings.Contains(out, "applied 0001_init") {
		t.Fatalf("migrate: exit %d %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "migrate", "--store", u)
	if code != 0 || !strings.Contains(out, "nothing to apply") {
		t.Fatalf("migrate again: exit %d %s %s", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, "", "jobs", "list", "--store", u); code != 0 {
		t.Fatalf("jobs list: exit %d %s", code, stderr)
	}
	code, out, stderr = runCLI(t, "", "migrate", "down", "1", "--store", u)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("version %d → %d", latest, latest-1)) || !strings.Contains(out, "reverted") {
		t.Fatalf("down 1: exit %d %s %s", code, out, stderr)
	}
	code, _, stderr = runCLI(t, "", "migrate", "down", "x", "--store", u)
	if code == 0 || !strings.Contains(stderr, "positive number") {
		t.Fatalf("down x: exit %d %s", code, stderr)
	}
}
