package postgres

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/engine"
)

// insertAvailable writes n available jobs of queue q at priority prio,
// ids prefix000001…, scheduled half a millisecond apart up to the
// server's now, as a stream of 2,000 jobs/s would be.
func insertAvailable(t *testing.T, s *Store, q, prefix string, prio, n int) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), s.sql(`INSERT INTO {s}.jobs (id, queue, kind, payload, state, priority,
		scheduled_at, created_at, state_changed_at)
	SELECT $1 || lpad(g::text, 6, '0'), $2, 'k', '{}', 'available', $3, n.t - ($4::int - g)::bigint * 500000, n.t, n.t
	FROM generate_series(1, $4::int) g, (SELECT `+sqlNow+` AS t) n`), prefix, q, prio, n); err != nil {
		t.Fatal(err)
	}
}

func claimN(t *testing.T, s *Store, q string, limit int) []*engine.Job {
	t.Helper()
	res, err := s.JobClaim(context.Background(), &engine.JobClaimParams{Queue: q, WorkerID: "w", LeaseID: uuid.NewString(),
		Limit: limit, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return res.Jobs
}

var buffersRx = regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)

// TestClaimCursorSkipsDeadEntries: while an idle transaction holds an
// XID, every claimed job leaves an entry in jobs_claim that nothing can
// remove; a claim from the start of the index reads them all, a claim
// from the cursor does not. Measured in buffers, by EXPLAIN (ANALYZE,
// BUFFERS) of the claim's pick after 20,000 claims.
func TestClaimCursorSkipsDeadEntries(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "cursor")
	idle, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Release()
	if _, err := idle.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	defer idle.Exec(context.Background(), "ROLLBACK")
	if _, err := idle.Exec(ctx, "SELECT txid_current()"); err != nil {
		t.Fatal(err)
	}
	insertAvailable(t, s, "q", "a", 1, 20000)
	for range 40 {
		if got := claimN(t, s, "q", 500); len(got) != 500 {
			t.Fatalf("claimed %d, want 500", len(got))
		}
	}
	insertAvailable(t, s, "q", "b", 1, 100)
	c := s.cursors["q"]
	pick := func(bound string, args ...any) int {
		t.Helper()
		q := `EXPLAIN (ANALYZE, BUFFERS) SELECT c.id FROM {s}.jobs c
			WHERE c.state = 'available' AND c.crash_attempt = 0 AND c.queue = 'q'` + bound + `
			ORDER BY c.priority, c.scheduled_at, c.id LIMIT 100`
		rows, err := s.pool.Query(ctx, s.sql(q), args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			if m := buffersRx.FindStringSubmatch(line); m != nil && n == 0 {
				hit, _ := strconv.Atoi(m[1])
				read, _ := strconv.Atoi(m[2] + "0")
				n = hit + read/10
			}
		}
		return n
	}
	full := pick("")
	from := pick(" AND (c.priority, c.scheduled_at) >= ($1::int, $2::bigint)", c.priority, c.scheduled)
	t.Logf("pick of 100 after 20,000 claims under an idle XID: %d buffers from the start, %d from the cursor", full, from)
	if from*10 > full {
		t.Fatalf("the cursor's pick read %d buffers, the start's %d: want it to skip the dead entries", from, full)
	}
}

// TestClaimCursorMissesNothing: in cursor mode a job behind the cursor —
// a higher priority than the cursor's — is claimed by a claim from the
// start, once the queue has caught up; new jobs are claimed from the
// cursor meanwhile, and the order of what a claim takes is unchanged.
func TestClaimCursorMissesNothing(t *testing.T) {
	s := schemaStore(t, "cursor")
	s.claimSlowOverride = time.Nanosecond // every queue in cursor mode
	insertAvailable(t, s, "q", "a", 2, 10)
	if got := claimN(t, s, "q", 5); len(got) != 5 || got[0].ID != "a000001" {
		t.Fatalf("first claim: %v", ids(got))
	}
	if _, from := s.claimFrom("q", time.Now()); !from {
		t.Fatal("after a full claim slower than the override, the next claim does not start at the cursor")
	}
	// Ahead of the cursor: taken from it, in order.
	if got := claimN(t, s, "q", 5); len(got) != 5 || got[0].ID != "a000006" {
		t.Fatalf("second claim: %v", ids(got))
	}
	// Behind it: a higher priority.
	insertAvailable(t, s, "q", "p", 0, 3)
	insertAvailable(t, s, "q", "z", 2, 2)
	var taken []string
	for deadline := time.Now().Add(10 * time.Second); len(taken) < 5 && time.Now().Before(deadline); {
		taken = append(taken, ids(claimN(t, s, "q", 10))...)
		time.Sleep(20 * time.Millisecond)
	}
	want := map[string]bool{"p000001": true, "p000002": true, "p000003": true, "z000001": true, "z000002": true}
	if len(taken) != 5 {
		t.Fatalf("claimed %v, want the three of priority 0 and the two new ones", taken)
	}
	for _, id := range taken {
		if !want[id] {
			t.Fatalf("claimed %v: %s is not one of the five", taken, id)
		}
	}
}

func ids(js []*engine.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
