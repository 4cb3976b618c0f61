package sqlite_test

import (
	"database/sql"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/sluicetype"
)

func countsEqual(a, b map[string]map[sluicetype.State]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[sluicetype.State]int64) bool { return maps.Equal(x, y) })
}

func listIDs(t testing.TB, s *sqlite.Store, f sluicetype.Filter) []string {
	t.Helper()
	js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: f, Limit: 1000})
	if err != nil {
		t.Fatalf("JobListPage(%s): %v", f, err)
	}
	out := ids(js)
	slices.Sort(out)
	return out
}

// TestMigration0002OnExistingJobs upgrades a file written at schema 1: the
// counters start from the jobs there, and last errors come back from the
// error lists.
func TestMigration0002OnExistingJobs(t *testing.T) {
	init1, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		string(init1),
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, 1)`,
		`INSERT INTO jobs (id, queue, kind, state, scheduled_at, created_at, state_changed_at, errors) VALUES
			('a', 'q1', 'k', 'archived', 1, 1, 1, '[{"attempt":1,"message":"first"},{"attempt":2,"message":"second"}]'),
			('b', 'q1', 'k', 'archived', 1, 1, 2, '[]'),
			('c', 'q2', 'k', 'available', 1, 1, 3, '[]')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[sluicetype.State]int64{"q1": {sluicetype.StateArchived: 2}, "q2": {sluicetype.StateAvailable: 1}}
	if !countsEqual(got, want) {
		t.Fatalf("counters after the upgrade: %v, want %v", got, want)
	}
	if ids := listIDs(t, s, sluicetype.Filter{Error: "second"}); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("last error after the upgrade: %v", ids)
	}
	if sqlite.SchemaVersion() < 2 { // later migrations add to it
		t.Fatalf("schema version %d", sqlite.SchemaVersion())
	}
}

// TestOpenMustExist: a MustExist open never creates or migrates: a missing
// file and a file behind this build's schema are ErrNoStore, naming
// `sluice migrate`, and change nothing; a migrated store opens.
func TestOpenMustExist(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, err := sqlite.Open(ctx, missing, sqlite.Options{MustExist: true}); !errors.Is(err, sqlite.ErrNoStore) || !strings.Contains(err.Error(), "sluice migrate") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a MustExist open created %s", missing)
	}
	behind := filepath.Join(dir, "behind.db")
	db, err := sql.Open("sqlite", behind)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE unrelated (x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(ctx, behind, sqlite.Options{MustExist: true}); !errors.Is(err, sqlite.ErrNoStore) || !strings.Contains(err.Error(), "version 0") {
		t.Fatalf("file behind the schema: %v", err)
	}
	if st, err := sqlite.Status(ctx, behind); err != nil || st.Version != 0 {
		t.Fatalf("a MustExist open migrated the file: %+v %v", st, err)
	}
	s, err := sqlite.Open(ctx, behind, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, behind, sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatalf("a migrated store: %v", err)
	}
	s.Close()
}

// TestMigration0008RegroupsOldPatterns: jobs that died under an older
// normaliser, their patterns as it wrote them, are grouped again when the
// file is upgraded: the request ids of any letters join one group, and
// the two columns part.
func TestMigration0008RegroupsOldPatterns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	old := backendtest.OldErrorPatterns()
	for i, j := range old {
		if _, err := db.Exec(`INSERT INTO jobs (id, queue, kind, state, scheduled_at, created_at, state_changed_at, errors, last_error, error_pattern)
			VALUES (?, 'q', 'k', 'archived', 1, 1, ?, '[]', ?, ?)`, j.ID, i+1, j.LastError, j.Pattern); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version = 8`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	groups, err := s.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.CheckRegrouped(t, groups)
}
