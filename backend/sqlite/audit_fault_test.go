package sqlite_test

import (
	"context"
	"os"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
)

// TestFaultAuditKilledBeforeCommit: a process killed inside an audited
// action's transaction leaves neither the action nor its record in the
// file (backendtest.RunAuditKill).
func TestFaultAuditKilledBeforeCommit(t *testing.T) {
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("SKIP: fault test; set SLUICE_FAULT_TESTS=1")
	}
	open := func(t testing.TB, path string) backend.Store {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	backendtest.RunAuditKill(t, "TestFaultAuditKilledBeforeCommit", func(t testing.TB) (backend.Store, string) {
		path := sqlitetest.Path(t)
		return open(t, path), path
	}, open)
}
