package postgres_test

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
)

// TestFaultAuditKilledBeforeCommit: a process killed inside an audited
// action's transaction leaves neither the action nor its record: the
// server rolls back the transaction of the connection that went away
// (backendtest.RunAuditKill).
func TestFaultAuditKilledBeforeCommit(t *testing.T) {
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("SKIP: fault test; set SLUICE_FAULT_TESTS=1")
	}
	backendtest.RunAuditKill(t, "TestFaultAuditKilledBeforeCommit", func(t testing.TB) (backend.Store, string) {
		s := pgtest.New(t)
		return s, pgtest.URL(t, s)
	}, func(t testing.TB, url string) backend.Store {
		return pgtest.Open(t, url, postgres.Options{MaxConns: 2})
	})
}
