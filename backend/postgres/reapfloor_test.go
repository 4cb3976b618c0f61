package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
)

// insertRunning writes n running jobs of queue q, ids prefix000001…,
// whose leases expired age ago by the server's clock, as another
// process's claims would leave them.
func insertRunning(t *testing.T, s *Store, prefix string, n int, age time.Duration) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), s.sql(`INSERT INTO {s}.jobs (id, queue, kind, payload, state, fence,
		scheduled_at, created_at, state_changed_at, attempted_at, lease_id, lease_worker, lease_expires_at)
	SELECT $1 || lpad(g::text, 6, '0'), 'q', 'k', '{}', 'running', 1, n.t, n.t, n.t, n.t, 'lease', 'gone', n.t - $3::bigint
	FROM generate_series(1, $2::int) g, (SELECT `+sqlNow+` AS t) n`), prefix, n, int64(age)); err != nil {
		t.Fatal(err)
	}
}

func expiredIDs(t *testing.T, s *Store) []string {
	t.Helper()
	out, err := s.JobListExpiredLeases(context.Background(), &backend.JobListExpiredLeasesParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range out {
		ids = append(ids, x.Job.ID)
	}
	return ids
}

// TestReapFloorSkipsDeadEntries: while an idle transaction holds an XID,
// every job that was running and finished leaves an entry in
// jobs_running that nothing can remove, at the front of the index. The
// listing of expired leases from the start reads them all; from the
// floor it reads only the margin's. Measured in buffers, by EXPLAIN
// (ANALYZE, BUFFERS) of the listing's scan after 20,000 finished jobs.
// The listings from the floor find every lease that expires after it.
func TestReapFloorSkipsDeadEntries(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "reap")
	holdXID(t, s)
	// 20,000 jobs ran, their leases long expired, and finished.
	insertRunning(t, s, "done", 20000, 10*time.Minute)
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {s}.jobs SET state = 'completed', lease_id = NULL, lease_worker = NULL,
		lease_expires_at = NULL WHERE state = 'running'`)); err != nil {
		t.Fatal(err)
	}
	if got := expiredIDs(t, s); len(got) != 0 {
		t.Fatalf("expired leases among finished jobs: %v", got)
	}
	s.reapMu.Lock()
	floor := s.reap
	s.reapMu.Unlock()
	if floor.full.IsZero() || floor.from == 0 {
		t.Fatalf("the first listing set no floor: %+v", floor)
	}

	// Expired since the first listing (a second ago, by a worker gone):
	// found from the floor, without a listing from the start.
	insertRunning(t, s, "late", 3, time.Second)
	if got := expiredIDs(t, s); len(got) != 3 || got[0] != "late000001" {
		t.Fatalf("from the floor: %v, want the three late jobs", got)
	}
	s.reapMu.Lock()
	if !s.reap.full.Equal(floor.full) {
		t.Fatal("the second listing ran from the start")
	}
	s.reapMu.Unlock()

	scan := func(from int64) int {
		t.Helper()
		return explainBuffers(t, s, `SELECT id FROM {s}.jobs
			WHERE state = 'running' AND lease_expires_at < `+sqlNow+` AND lease_expires_at >= $1::bigint
			ORDER BY lease_expires_at, id LIMIT 100`, from)
	}
	start, fromFloor := scan(0), scan(floor.from)
	t.Logf("listing after 20,000 finished jobs under an idle XID: %d buffers from the start, %d from the floor", start, fromFloor)
	if fromFloor*5 > start {
		t.Fatalf("from the floor the listing read %d buffers, from the start %d: want it to skip the dead entries", fromFloor, start)
	}
}

// TestReapFloorMissesNothing: a lease older than the floor — a writer
// that committed later than the margin after it took its clock, or a job
// the engine left — is found by the listing from the start that runs
// every reapFullEvery or so, and the floor then stays at it for as long as it
// is listed.
func TestReapFloorMissesNothing(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "reap")
	if got := expiredIDs(t, s); len(got) != 0 {
		t.Fatalf("expired leases in an empty schema: %v", got)
	}
	// Behind the floor (which is the store's now less a minute).
	insertRunning(t, s, "old", 1, 5*time.Minute)
	if got := expiredIDs(t, s); len(got) != 0 {
		t.Fatalf("from the floor the listing found %v behind it: the test does not test the floor", got)
	}
	s.reapMu.Lock()
	s.reap.full = time.Time{} // a listing from the start is due
	s.reapMu.Unlock()
	if got := expiredIDs(t, s); len(got) != 1 || got[0] != "old000001" {
		t.Fatalf("the listing from the start: %v, want old000001", got)
	}
	// Left by the engine: listed again from the floor, and again.
	for range 2 {
		if got := expiredIDs(t, s); len(got) != 1 || got[0] != "old000001" {
			t.Fatalf("from the floor after it was listed: %v, want old000001", got)
		}
	}
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {s}.jobs SET state = 'available', lease_expires_at = NULL`)); err != nil {
		t.Fatal(err)
	}
	if got := expiredIDs(t, s); len(got) != 0 {
		t.Fatalf("after the job left running: %v", got)
	}
}
