package cli_test

// The store-URL fault tests run on each store a URL can name: a SQLite
// file, the shared PostgreSQL (a schema of the test's own), and the same
// through a PgBouncer of the test's own in transaction pooling mode. A
// server that does not answer skips its case, and fails it with CI set.

import (
	"context"
	"os"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// storeCase is one store a test runs on; url makes a fresh one for t.
type storeCase struct {
	name string
	url  func(t *testing.T) string
}

func storeCases() []storeCase {
	return []storeCase{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + sqlitetest.Path(t) }},
		{"postgres", func(t *testing.T) string {
			u, _ := pgcluster.SharedStoreURL(t)
			return u
		}},
		{"postgres-pgbouncer", func(t *testing.T) string {
			if !pgcluster.BouncerAllowed() {
				t.Skip("PgBouncer: set SLUICE_TEST_PGBOUNCER=1 to start one (scripts/test does when pgbouncer is installed)")
			}
			_, schema := pgcluster.SharedStoreURL(t)
			return bouncerURL(t, pgcluster.SharedURL(), schema)
		}},
	}
}

// bouncerURL starts a PgBouncer in front of server for t and returns the
// store URL through it in schema, with LISTEN going to server directly.
func bouncerURL(t *testing.T, server, schema string) string {
	t.Helper()
	b, err := pgcluster.StartBouncer(context.Background(), pgcluster.BouncerOptions{Server: server})
	if err != nil {
		if _, ok := pgcluster.BouncerInstalled(); !ok && os.Getenv("CI") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- pgbouncer log ----\n%s", tail(b.Log(), 60))
		}
		b.Close()
	})
	return pgcluster.BouncerStoreURL(pgcluster.WithSchema(b.URL(), schema), server)
}

// urlSetup opens (creating and migrating) the store a URL names for a
// fault test, with an engine that only enqueues and reads: no queues, no
// maintenance, so every claim, crash and reap is the children's.
func urlSetup(t *testing.T, storeURL string) (store backend.Store, e *engine.Engine) {
	t.Helper()
	store = openStore(t, storeURL)
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := chaos.Register(e); err != nil {
		t.Fatal(err)
	}
	return store, e
}

// openStore opens (creating and migrating) the store a URL names, of any
// backend, closed when t ends.
func openStore(t testing.TB, storeURL string) backend.Store {
	t.Helper()
	s, err := storeurl.OpenMigrating(context.Background(), storeURL, nil)
	if err != nil {
		t.Fatalf("open store %s: %v", redact.URL(storeURL), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
