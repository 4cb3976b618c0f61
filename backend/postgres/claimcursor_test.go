package postgres

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
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

func claimN(t *testing.T, s *Store, q string, limit int) []*sluicetype.Job {
	t.Helper()
	res, err := s.JobClaim(context.Background(), &backend.JobClaimParams{Queue: q, WorkerID: "w", LeaseID: uuid.NewString(),
		Limit: limit, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return res.Jobs
}

var buffersRx = regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)

// holdXID pins a snapshot, as an idle transaction holding an XID does,
// until the test ends: no row version the test's writes leave dead can be
// vacuumed or marked dead in an index meanwhile.
func holdXID(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	idle, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		idle.Exec(context.Background(), "ROLLBACK")
		idle.Release()
	})
	if _, err := idle.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Exec(ctx, "SELECT txid_current()"); err != nil {
		t.Fatal(err)
	}
}

// explainBuffers returns the shared buffers (hit and read) that q (with
// {s}) read with args, by EXPLAIN (ANALYZE, BUFFERS): its top node's.
func explainBuffers(t *testing.T, s *Store, q string, args ...any) int {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), s.sql("EXPLAIN (ANALYZE, BUFFERS) "+q), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		if m := buffersRx.FindStringSubmatch(line); m != nil {
			hit, _ := strconv.Atoi(m[1])
			read, _ := strconv.Atoi(m[2] + "0")
			return hit + read/10
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestClaimCursorSkipsDeadEntries: while an idle transaction holds an
// XID, every claimed job leaves an entry in jobs_claim that nothing can
// remove; a claim from the start of the index reads them all, a claim
// from the cursor does not. Measured in buffers, by EXPLAIN (ANALYZE,
// BUFFERS) of the claim's pick after 20,000 claims.
func TestClaimCursorSkipsDeadEntries(t *testing.T) {
	s := schemaStore(t, "cursor")
	holdXID(t, s)
	insertAvailable(t, s, "q", "a", 1, 20000)
	for range 40 {
		if got := claimN(t, s, "q", 500); len(got) != 500 {
			t.Fatalf("claimed %d, want 500", len(got))
		}
	}
	insertAvailable(t, s, "q", "b", 1, 100)
	s.cursorMu.Lock() // a probe may be writing it
	c := s.cursors[cursorKey{queue: "q"}]
	s.cursorMu.Unlock()
	pick := func(bound string, args ...any) int {
		t.Helper()
		return explainBuffers(t, s, `SELECT c.id FROM {s}.jobs c
			WHERE c.state = 'available' AND c.crash_attempt = 0 AND c.queue = 'q'`+bound+`
			ORDER BY c.priority, c.scheduled_at, c.id LIMIT 100`, args...)
	}
	full := pick("")
	from := pick(" AND (c.priority, c.scheduled_at) >= ($1::int, $2::bigint)", c.priority, c.scheduled)
	t.Logf("pick of 100 after 20,000 claims under an idle XID: %d buffers from the start, %d from the cursor", full, from)
	// The cursor's margin (claimCursorMargin, a second: 2,000 of these
	// jobs) is walked; the 18,000 dead entries before it are not.
	if from*5 > full {
		t.Fatalf("the cursor's pick read %d buffers, the start's %d: want it to skip the dead entries", from, full)
	}
}

// TestClaimCursorMissesNothing: in cursor mode a job another process puts
// behind the cursor — a higher priority than the cursor's — is found by
// the probe, off the claim path, and claimed from the cursor it moved
// back; new jobs are claimed from the cursor meanwhile, the order of what
// a claim takes is unchanged, and no claim runs from the start again.
func TestClaimCursorMissesNothing(t *testing.T) {
	s := schemaStore(t, "cursor")
	s.claimCursorAfter = time.Nanosecond // every queue in cursor mode
	insertAvailable(t, s, "q", "a", 2, 10)
	if got := claimN(t, s, "q", 5); len(got) != 5 || got[0].ID != "a000001" {
		t.Fatalf("first claim: %v", ids(got))
	}
	if _, from, _, _ := s.claimFrom(cursorKey{queue: "q"}, time.Now()); !from {
		t.Fatal("after a full claim slower than the override, the next claim does not start at the cursor")
	}
	// Ahead of the cursor: taken from it, in order.
	if got := claimN(t, s, "q", 5); len(got) != 5 || got[0].ID != "a000006" {
		t.Fatalf("second claim: %v", ids(got))
	}
	// Behind it: a higher priority, written by raw SQL as another
	// process would (this Store's own inserts move the cursor back).
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
	if n := s.fullClaims.Load(); n != 1 {
		t.Fatalf("%d claims ran from the start of the index, want only the first", n)
	}
}

// TestClaimCursorOwnWritesSeenAtOnce: a job this Store puts behind a
// cursor — an insert of a higher priority or an earlier scheduled_at, a
// retry by the operator, a due job promoted — is taken by the very next
// claim, and a claim filtered by kind keeps its cursor to itself, so a
// claim of other kinds is not started past jobs the filter passed by
// (seen in CI: the conformance check ClaimOrderKindsAndLease, whose
// first claim took 25 ms under -race).
func TestClaimCursorOwnWritesSeenAtOnce(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "cursor")
	s.claimCursorAfter = time.Nanosecond // every queue in cursor mode
	insert := func(id, kind string, prio int, at *time.Time) {
		t.Helper()
		res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{
			ID: id, Queue: "q", Kind: kind, Payload: []byte(`{}`), Priority: prio, MaxAttempts: 3, ScheduledAt: at}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("insert %s: %v %v", id, err, res[0].Err)
		}
	}
	claim := func(kinds map[string]int) []string {
		t.Helper()
		res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: uuid.NewString(),
			Limit: 10, LeaseDuration: time.Minute, Kinds: kinds})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		return ids(res.Jobs)
	}
	want := func(got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("claimed %v, want %v", got, want)
		}
	}
	// Kinds: a claim of k passes "o" by; a claim of any kind takes it.
	insert("k1", "k", 5, nil)
	insert("o1", "o", 0, nil)
	want(claim(map[string]int{"k": 1}), "k1")
	insert("k2", "k", 5, nil)
	want(claim(map[string]int{"k": 1}), "k2") // from the k cursor
	if _, from, _, _ := s.claimFrom(cursorKeyOf("q", []string{"k"}, []int32{1}), time.Now()); !from {
		t.Fatal("the k claims are not in cursor mode")
	}
	want(claim(nil), "o1")
	// An insert of a higher priority than the cursor's.
	insert("n1", "k", 5, nil)
	want(claim(nil), "n1")
	insert("hi", "k", 1, nil)
	want(claim(nil), "hi")
	// An insert scheduled in the past, at the cursor's priority.
	past := time.Now().Add(-time.Hour)
	insert("n2", "k", 5, nil)
	want(claim(nil), "n2")
	insert("old", "k", 5, &past)
	want(claim(nil), "old")
	// A due job promoted keeps its scheduled_at, behind the cursor.
	soon := time.Now().Add(300 * time.Millisecond)
	insert("due", "k", 5, &soon)
	insert("n3", "k", 5, nil)
	want(claim(nil), "n3")
	time.Sleep(time.Until(soon) + 10*time.Millisecond)
	if _, err := s.JobScheduleDue(ctx, &backend.JobScheduleDueParams{From: []sluicetype.State{sluicetype.StateScheduled},
		To: sluicetype.StateAvailable}); err != nil {
		t.Fatal(err)
	}
	insert("n4", "k", 5, nil) // moves the cursor past "due" if it is taken from it
	want(claim(nil), "due", "n4")
	// A running job handed back by its finish (another write than an
	// insert) is available again at its old place.
	insert("n5", "k", 9, nil)
	want(claim(nil), "n5")
	j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "n5"})
	if err != nil {
		t.Fatal(err)
	}
	insert("n6", "k", 9, nil)
	want(claim(nil), "n6")
	if _, err := s.JobFinish(ctx, &backend.JobFinishParams{JobRef: backend.JobRef{ID: "n5", LeaseID: j.Lease.ID, Fence: j.Fence},
		To: sluicetype.StateAvailable, Schedule: backend.ScheduleKeep}); err != nil {
		t.Fatalf("hand back: %v", err)
	}
	want(claim(nil), "n5")
}

func ids(js []*sluicetype.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
