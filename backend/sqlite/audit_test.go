package sqlite_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestAuditRecordsAppendOnly: no route changes a record, and the table
// refuses it too: an UPDATE of audit_log, by hand or by a bug, fails.
func TestAuditRecordsAppendOnly(t *testing.T) {
	s := sqlitetest.New(t)
	if _, err := s.AuditAppend(context.Background(), &backend.AuditAppendParams{Record: sluicetype.AuditRecord{
		Actor: "maya", Action: "retry", JobID: "j1", Result: sluicetype.AuditOK}}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", s.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`UPDATE audit_log SET actor = 'someone else'`)
	if err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("an UPDATE of the trail: %v, want refused as append-only", err)
	}
}
