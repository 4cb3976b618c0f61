package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestAuditRecordsAppendOnly: no route changes a record, and the table
// refuses it too: an UPDATE of audit_log, by hand or by a bug, fails.
func TestAuditRecordsAppendOnly(t *testing.T) {
	s := pgtest.New(t)
	ctx := context.Background()
	if _, err := s.AuditAppend(ctx, &backend.AuditAppendParams{Record: sluicetype.AuditRecord{
		Actor: "maya", Action: "retry", JobID: "j1", Result: sluicetype.AuditOK}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Pool().Exec(ctx, `UPDATE `+pgx.Identifier{s.Schema(), "audit_log"}.Sanitize()+` SET actor = 'someone else'`)
	if err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("an UPDATE of the trail: %v, want refused as append-only", err)
	}
}
