package cli

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/internal/cmdline"
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

// pgVersionBefore is the PostgreSQL schema version one migration below
// the latest, read from the source tree's file names: a version left to
// another branch is a gap, so it need not be latest-1.
func pgVersionBefore(t *testing.T) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("..", "backend", "postgres", "migrations", "*.up.sql"))
	if err != nil || len(names) < 2 {
		t.Fatalf("migrations: %v %v", names, err)
	}
	var v int
	if _, err := fmt.Sscanf(filepath.Base(names[len(names)-2]), "%04d_", &v); err != nil {
		t.Fatalf("migration %s: %v", names[len(names)-2], err)
	}
	return v
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

	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		url := redistest.URL(t) // a fresh namespace, deleted at the end
		code, out, stderr := runCLI(t, "", "migrate", "--store", url, "--dry-run")
		if code != 0 || !strings.Contains(out, "no namespace yet, schema version 0") || !strings.Contains(out, "pending: ") {
			t.Fatalf("dry run: exit %d %s %s", code, out, stderr)
		}
		// A reader refuses the namespace until it is migrated.
		if code, _, stderr := runCLI(t, "", "jobs", "list", "--store", url); code == 0 || !strings.Contains(stderr, "sluice migrate") {
			t.Fatalf("jobs list before migrate: exit %d %s", code, stderr)
		}
		if code, out, stderr := runCLI(t, "", "migrate", "--store", url); code != 0 || !strings.Contains(out, "applied ") {
			t.Fatalf("migrate: exit %d %s %s", code, out, stderr)
		}
		if code, out, stderr := runCLI(t, "", "migrate", "--store", url); code != 0 || !strings.Contains(out, "up to date: nothing to apply") {
			t.Fatalf("migrate again: exit %d %s %s", code, out, stderr)
		}
		if code, _, stderr := runCLI(t, "", "jobs", "list", "--store", url); code != 0 {
			t.Fatalf("jobs list after migrate: exit %d %s", code, stderr)
		}
		if code, _, stderr := runCLI(t, "", "migrate", "down", "1", "--store", url); code != 1 || !strings.Contains(stderr, "no down migrations") {
			t.Fatalf("down: exit %d %s", code, stderr)
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
	if code != 0 || !strings.Contains(out, fmt.Sprintf("version %d → %d", latest, pgVersionBefore(t))) || !strings.Contains(out, "reverted") {
		t.Fatalf("down 1: exit %d %s %s", code, out, stderr)
	}
	code, _, stderr = runCLI(t, "", "migrate", "down", "x", "--store", u)
	if code == 0 || !strings.Contains(stderr, "positive number") {
		t.Fatalf("down x: exit %d %s", code, stderr)
	}
}

// TestServeAndWorkerMigrate: on a PostgreSQL schema one migration behind,
// serve and worker refuse it naming both ways to migrate, and each started
// with --migrate brings it up to date as it opens it and runs.
func TestServeAndWorkerMigrate(t *testing.T) {
	u, _ := pgtest.SchemaURL(t)
	latest := postgres.SchemaVersion()
	t.Setenv("SLUICE_TOKENS", "")
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0"},
		{"worker", "--demo", "--queues", "billing"},
	} {
		t.Run(args[0], func(t *testing.T) {
			if code, out, stderr := runCLI(t, "", "migrate", "--store", u); code != 0 {
				t.Fatalf("migrate: exit %d %s %s", code, out, stderr)
			}
			if code, out, stderr := runCLI(t, "", "migrate", "down", "1", "--store", u); code != 0 {
				t.Fatalf("down 1: exit %d %s %s", code, out, stderr)
			}
			code, _, stderr := runCLI(t, "", append(args, "--store", u)...)
			if code != 1 || !strings.Contains(stderr, fmt.Sprintf("version %d, this build needs %d", pgVersionBefore(t), latest)) ||
				!strings.Contains(stderr, "sluice migrate --store") || !strings.Contains(stderr, "--migrate") {
				t.Fatalf("%s without --migrate: exit %d %s", args[0], code, stderr)
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errb syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- cmdline.Run(ctx, newRoot(), "sluice", append(args, "--store", u, "--migrate"), &out, &errb)
			}()
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, dry, _ := runCLI(t, "", "migrate", "--store", u, "--dry-run")
				if strings.Contains(dry, fmt.Sprintf("at version %d", latest)) && !strings.Contains(dry, "pending:") {
					break
				}
				select {
				case code := <-done:
					t.Fatalf("%s --migrate ended: exit %d\n%s%s", args[0], code, out.String(), errb.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s --migrate left the schema behind: %s\n%s", args[0], dry, errb.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("%s --migrate: exit %d after the signal\n%s%s", args[0], code, out.String(), errb.String())
			}
		})
	}
}
