package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestAuditRetentionSweptByMaintenance: maintenance deletes audit
// records past Config.AuditRetention, its own setting apart from the
// jobs' retention; a negative one keeps them; the default is 90 days.
func TestAuditRetentionSweptByMaintenance(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
		kept      bool
	}{
		{"short", 300 * time.Millisecond, false},
		{"forever", engine.Forever, true},
		{"default", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := engine.WithActor(context.Background(), "maya")
			e, err := engine.New(sqlitetest.New(t), engine.Config{NoMaintenance: true, AuditRetention: tc.retention})
			if err != nil {
				t.Fatal(err)
			}
			if tc.retention == 0 && e.AuditRetention() != engine.DefaultAuditRetention {
				t.Fatalf("default audit retention %v, want %v", e.AuditRetention(), engine.DefaultAuditRetention)
			}
			if err := e.PauseQueue(ctx, "billing"); err != nil {
				t.Fatal(err)
			}
			if p, err := e.Audit(ctx, engine.AuditQuery{}); err != nil || len(p.Records) != 1 {
				t.Fatalf("after a pause: %v %+v", err, p)
			}
			time.Sleep(600 * time.Millisecond)
			e.RunMaintenance(ctx)
			p, err := e.Audit(ctx, engine.AuditQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if kept := len(p.Records) == 1; kept != tc.kept {
				t.Fatalf("retention %v: after maintenance %d records, want kept %v", tc.retention, len(p.Records), tc.kept)
			}
		})
	}
}
