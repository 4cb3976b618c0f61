package postgres_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/pgcluster"
)

// TestConformance runs the backend conformance suite on the test server,
// each check in a fresh schema of its own.
func TestConformance(t *testing.T) {
	pgtest.ServerURL(t)
	backendtest.Run(t, backendtest.Harness{
		Name:     "postgres",
		NewStore: func(t testing.TB) backend.Store { return pgtest.New(t) },
		Truth:    func(t testing.TB, s backend.Store) backendtest.Truth { return pgtest.NewTruth(t, s) },
		Reopen:   pgtest.Reopen,
	})
}

// TestConformanceSimpleProtocol runs the suite with every statement in
// pgx's simple protocol (values inlined, no prepared statements), as it
// must run through PgBouncer in transaction mode, and with every queue's
// claims in cursor mode after its first claim (claim_cursor=1ns), which
// a busy server or a pinned snapshot turns on (see claimCursor): the
// suite's claims must see what the store wrote as they do without it.
//
// It runs through a PgBouncer in transaction pooling mode in front of
// the test server (one for the whole test): each check's store is a
// fresh schema reached through the bouncer, with its LISTEN connection
// going to the server directly (listen_url), as an install behind
// PgBouncer runs. That needs SLUICE_TEST_PGBOUNCER=1 (scripts/test sets
// it when pgbouncer is installed); without it, or without pgbouncer
// outside CI, the suite runs in the simple protocol straight to the
// server, and says so. With CI set the bouncer always runs, and a
// missing pgbouncer fails it. One run covers both doors: the simple
// protocol through the bouncer is the simple protocol, and a second run
// of the suite on the server cost the CI stage minutes.
func TestConformanceSimpleProtocol(t *testing.T) {
	server := pgtest.ServerURL(t)
	const simple, cursor = "default_query_exec_mode=simple_protocol", "claim_cursor=1ns"
	direct := func(reason string) {
		t.Logf("the simple protocol straight to the server, not through PgBouncer: %s", reason)
		backendtest.Run(t, backendtest.Harness{
			Name:     "postgres-simple-protocol",
			NewStore: func(t testing.TB) backend.Store { return pgtest.New(t, simple, cursor) },
			Truth:    func(t testing.TB, s backend.Store) backendtest.Truth { return pgtest.NewTruth(t, s) },
			Reopen:   pgtest.Reopen,
		})
	}
	if !pgcluster.BouncerAllowed() {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs the suite through PgBouncer: set SLUICE_TEST_PGBOUNCER=1 (scripts/test does when pgbouncer is installed)")
		}
		direct("SLUICE_TEST_PGBOUNCER is not set (scripts/test sets it when pgbouncer is installed)")
		return
	}
	// The checks run in parallel, each with a pool of 4 (and a second
	// store in the checks of two stores): a pool of 40 server connections
	// keeps a transaction that waits on another's row from waiting on a
	// server connection as well.
	b, err := pgcluster.StartBouncer(context.Background(), pgcluster.BouncerOptions{Server: server, PoolSize: 40})
	if err != nil {
		if errors.Is(err, pgcluster.ErrNotInstalled) && os.Getenv("CI") == "" {
			direct(err.Error())
			return
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			log := b.Log()
			if len(log) > 8000 {
				log = "…" + log[len(log)-8000:]
			}
			t.Logf("---- pgbouncer log ----\n%s", log)
		}
		b.Close()
	})
	directURL := pgcluster.WithAppName(server, "sluice_test")
	through := func(schema string) string {
		return pgcluster.BouncerStoreURL(pgcluster.WithAppName(pgcluster.WithSchema(b.URL(), schema), "sluice_test"), directURL) + "&" + cursor
	}
	backendtest.Run(t, backendtest.Harness{
		Name: "postgres-pgbouncer",
		NewStore: func(t testing.TB) backend.Store {
			_, schema := pgtest.SchemaURL(t)
			return pgtest.Open(t, through(schema), postgres.Options{Migrate: true, MaxConns: 4})
		},
		Truth: func(t testing.TB, s backend.Store) backendtest.Truth { return pgtest.NewTruth(t, s) },
		Reopen: func(t testing.TB, s backend.Store) backend.Store {
			ps, ok := s.(*postgres.Store)
			if !ok {
				t.Fatalf("%T is not a *postgres.Store", s)
			}
			return pgtest.Open(t, through(ps.Schema()), postgres.Options{MaxConns: 4})
		},
	})
}
