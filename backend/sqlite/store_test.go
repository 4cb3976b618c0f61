package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/sluicetype"
)

var ctx = context.Background()

func job(id, queue, kind string) *backend.JobInsertParams {
	return &backend.JobInsertParams{
		ID:            id,
		Queue:         queue,
		Kind:          kind,
		Payload:       json.RawMessage(`{"n":"` + id + `"}`),
		SchemaVersion: 1,
		MaxAttempts:   3,
		Fingerprint:   "fp-" + id,
	}
}

func insert(t testing.TB, s *sqlite.Store, jobs ...*backend.JobInsertParams) []backend.JobInsertResult {
	t.Helper()
	res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("insert %s: %v", jobs[i].ID, r.Err)
		}
	}
	return res
}

func get(t testing.TB, s *sqlite.Store, id string) *sluicetype.Job {
	t.Helper()
	j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id, IncludePayload: true})
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func ids(js []*sluicetype.Job) []string {
	out := []string{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite://sluice.db":          "sluice.db",
		"sqlite://data/sluice.db":     "data/sluice.db",
		"sqlite:///var/lib/sluice.db": "/var/lib/sluice.db",
		"sqlite:rel.db":               "rel.db",
		"sqlite://my%20file.db":       "my file.db",
		"/abs/path.db":                "/abs/path.db",
		"rel/path.db":                 "rel/path.db",
	} {
		got, err := sqlite.ParseURL(in)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"sqlite://", "sqlite:", "", "postgres://localhost/x", "sqlite://x.db?mode=ro"} {
		if got, err := sqlite.ParseURL(in); !errors.Is(err, sluicetype.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %q, %v; want an error", in, got, err)
		}
	}
}

func TestOpenMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	s1, err := sqlite.Open(ctx, "sqlite://"+path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	insert(t, s1, job("a", "q", "k"))
	// A second store on the same file, as another process would open it.
	s2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s2, "a"); j.Queue != "q" {
		t.Fatal(j)
	}
	if s1.Backend() != "sqlite" {
		t.Fatal(s1.Backend())
	}
	s1.Close()
	s2.Close()
	if _, err := s1.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "a"}); !errors.Is(err, sluicetype.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := sqlite.Open(ctx, ":memory:", sqlite.Options{}); err == nil {
		t.Fatal(":memory: accepted")
	}
}
