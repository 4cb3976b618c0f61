package sqlite_test

import (
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
)

// TestConformance runs the backend conformance suite on a fresh SQLite
// file per check.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Name:     "sqlite",
		NewStore: func(t testing.TB) backend.Store { return sqlitetest.New(t) },
		Truth:    func(t testing.TB, s backend.Store) backendtest.Truth { return sqlitetest.NewTruth(t, s) },
		Reopen:   sqlitetest.Reopen,
	})
}
