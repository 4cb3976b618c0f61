package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestDeepCheckpointBreaksNoListing: a waiting workflow whose checkpoint
// holds a step result nested past SQLite's 1000 JSON levels (as a replay
// could write before the engine's limit) leaves the plain job list
// answering for everyone: the row is listed, without a wait summary, and
// its neighbour keeps its own.
func TestDeepCheckpointBreaksNoListing(t *testing.T) {
	s := sqlitetest.New(t)
	ctx := context.Background()
	for _, id := range []string{"deep", "shallow"} {
		res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{
			ID: id, Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`), SchemaVersion: 1, MaxAttempts: 1,
			Fingerprint: "fp-" + id, Delay: time.Hour,
		}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("insert %s: %v %+v", id, err, res)
		}
	}
	wait := `"wait":{"kind":"signal","step":2,"name":"approve","signal":"approve"}`
	deep := strings.Repeat(`{"a":`, 1100) + "1" + strings.Repeat("}", 1100)
	db, err := sql.Open("sqlite", s.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id, cp := range map[string]string{
		"deep":    `{"version":1,"steps":[{"name":"s1","state":"completed","result":` + deep + `}],` + wait + `}`,
		"shallow": `{"version":1,"steps":[{"name":"s1","state":"completed","result":1}],` + wait + `}`,
	} {
		if _, err := db.Exec(`UPDATE jobs SET checkpoint = ? WHERE id = ?`, cp, id); err != nil {
			t.Fatal(err)
		}
	}
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateScheduled}}})
	if err != nil {
		t.Fatalf("plain list with a deep checkpoint: %v", err)
	}
	got := map[string]*sluicetype.WaitSummary{}
	for _, j := range page.Jobs {
		got[j.ID] = j.Wait
	}
	if len(got) != 2 || got["deep"] != nil || got["shallow"] == nil || got["shallow"].Signal != "approve" {
		t.Fatalf("listed %+v, want deep without a wait summary and shallow waiting for approve", got)
	}
}
