package postgres_test

import (
	"testing"

	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/engine"
)

// TestConformance runs the backend conformance suite on the test server,
// each check in a fresh schema of its own.
func TestConformance(t *testing.T) {
	pgtest.ServerURL(t)
	backendtest.Run(t, backendtest.Harness{
		Name:     "postgres",
		NewStore: func(t testing.TB) engine.Store { return pgtest.New(t) },
		Truth:    func(t testing.TB, s engine.Store) backendtest.Truth { return pgtest.NewTruth(t, s) },
		Reopen:   pgtest.Reopen,
	})
}

// TestConformanceSimpleProtocol runs the suite with every statement in
// pgx's simple protocol (values inlined, no prepared statements), as it
// must run through PgBouncer in transaction mode.
func TestConformanceSimpleProtocol(t *testing.T) {
	pgtest.ServerURL(t)
	const simple = "default_query_exec_mode=simple_protocol"
	backendtest.Run(t, backendtest.Harness{
		Name:     "postgres-simple-protocol",
		NewStore: func(t testing.TB) engine.Store { return pgtest.New(t, simple) },
		Truth:    func(t testing.TB, s engine.Store) backendtest.Truth { return pgtest.NewTruth(t, s) },
		Reopen:   pgtest.Reopen,
	})
}
