package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

func TestScratchVariants(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	s, err := Open(ctx, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < 100000; off += 1000 {
		js := make([]*engine.JobInsertParams, 1000)
		for i := range js {
			id := fmt.Sprintf("%036d", off+i)
			js[i] = &engine.JobInsertParams{ID: id, Queue: "default", Kind: "email", SchemaVersion: 1, MaxAttempts: 25,
				Payload: json.RawMessage(`{"to":"someone@example.com"}`), Fingerprint: "fp" + id}
		}
		if _, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: js}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Add(-time.Hour).UnixNano()
	if _, err := s.w.Exec(`UPDATE jobs SET state = 'archived', terminal_reason = 'attempts_exhausted',
	attempt = 1, max_attempts = 1, finalized_at = ?1 + rowid, state_changed_at = ?1 + rowid,
	last_error = 'dial tcp 10.0.0.1:5432: connection refused', error_pattern = 'dial tcp <addr>: connection refused (' || (rowid % 5) || ')' WHERE state = 'available'`, now); err != nil {
		t.Fatal(err)
	}
	s.JobCountReconcile(ctx)
	s.Checkpoint(ctx)
	s.Close()
	raw, _ := os.ReadFile(src)
	variants := map[string]string{
		"orig":     "",
		"noeg":     "DROP INDEX jobs_error_groups",
		"noevents": "",
	}
	names := []string{"orig", "noeg"}
	res := map[string][]time.Duration{}
	for rep := range 4 {
		for _, name := range names {
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.db", name, rep))
			os.WriteFile(path, raw, 0o600)
			s, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if v := variants[name]; v != "" {
				if _, err := s.w.Exec(v); err != nil {
					t.Fatal(err)
				}
			}
			if name == "noevents" {
				s.w.Exec(`CREATE TRIGGER x BEFORE INSERT ON job_events BEGIN SELECT RAISE(IGNORE); END`)
			}
			op, _ := s.OperationInsert(ctx, &engine.OperationInsertParams{ID: "op", Action: engine.ActionRetry,
				Selector: engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"default"}}})
			l, _ := s.OperationClaim(ctx, &engine.OperationClaimParams{Holder: "h", TTL: time.Minute})
			for range 30 {
				start := time.Now()
				op, err = s.OperationProcessBatch(ctx, &engine.OperationProcessBatchParams{ID: op.ID, Holder: "h", Fence: l.Fence, Limit: 1000, TTL: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				res[name] = append(res[name], time.Since(start))
			}
			s.Close()
		}
	}
	for _, name := range names {
		d := res[name]
		slices.Sort(d)
		t.Logf("%-9s per batch: p10 %v median %v n=%d", name, d[len(d)/10], d[len(d)/2], len(d))
	}
}
