package sqlite_test

import (
	"database/sql"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// kill claims the given jobs of queue (all of its available jobs must be
// these) and finishes each in state to with an error message of msg(i).
func kill(t testing.TB, s *sqlite.Store, queue string, n int, to engine.State, msg func(i int) string) []*engine.Job {
	t.Helper()
	res := claim(t, s, engine.JobClaimParams{Queue: queue, Limit: n})
	if len(res.Jobs) != n {
		t.Fatalf("kill: claimed %d jobs of %s, want %d", len(res.Jobs), queue, n)
	}
	out := make([]*engine.Job, n)
	for i, j := range res.Jobs {
		m := msg(i)
		reason := engine.ReasonAttemptsExhausted
		if to == engine.StateUndecodable {
			reason = engine.ReasonUndecodable
		}
		d, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: to, Reason: reason,
			Charge: engine.ChargeAttempt, Error: &engine.AttemptError{Message: m},
			ErrorPattern: engine.NormalizeError(m), Event: engine.EventArchived, Actor: "w1"})
		if err != nil {
			t.Fatalf("kill %s: %v", j.ID, err)
		}
		out[i] = d
	}
	return out
}

// rawDB is the ground truth of the conformance suite on s's file: counts
// from the jobs themselves.
func rawDB(t testing.TB, s *sqlite.Store) *sqlitetest.Truth {
	t.Helper()
	return sqlitetest.NewTruth(t, s)
}

func countsEqual(a, b map[string]map[engine.State]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[engine.State]int64) bool { return maps.Equal(x, y) })
}

// checkCounts compares the maintained counters with the jobs.
func checkCounts(t testing.TB, s *sqlite.Store, db *sqlitetest.Truth, step string) {
	t.Helper()
	got, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	if want := db.JobCounts(t); !countsEqual(got, want) {
		t.Fatalf("after %s: counters %v, jobs %v", step, got, want)
	}
}

func listIDs(t testing.TB, s *sqlite.Store, f engine.Filter) []string {
	t.Helper()
	js, err := s.JobList(ctx, &engine.JobListParams{Filter: f, Limit: 1000})
	if err != nil {
		t.Fatalf("JobList(%s): %v", f, err)
	}
	out := ids(js)
	slices.Sort(out)
	return out
}

// runOperation claims the operation and runs its batches of limit jobs to
// the end.
func runOperation(t testing.TB, s *sqlite.Store, id string, limit int) *engine.Operation {
	t.Helper()
	lease, err := s.OperationClaim(ctx, &engine.OperationClaimParams{Holder: "runner", TTL: time.Minute})
	if err != nil || lease == nil || lease.Operation.ID != id {
		t.Fatalf("claim operation %s: %+v %v", id, lease, err)
	}
	for range 10_000 {
		op, err := s.OperationProcessBatch(ctx, &engine.OperationProcessBatchParams{
			ID: id, Holder: lease.Holder, Fence: lease.Fence, Limit: limit, TTL: time.Minute})
		if err != nil {
			t.Fatalf("operation %s: %v", id, err)
		}
		if op.Status != engine.OperationRunning {
			return op
		}
	}
	t.Fatalf("operation %s does not end", id)
	return nil
}

// TestMigration0002OnExistingJobs upgrades a file written at schema 1: the
// counters start from the jobs there, and last errors come back from the
// error lists.
func TestMigration0002OnExistingJobs(t *testing.T) {
	init1, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		string(init1),
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, 1)`,
		`INSERT INTO jobs (id, queue, kind, state, scheduled_at, created_at, state_changed_at, errors) VALUES
			('a', 'q1', 'k', 'archived', 1, 1, 1, '[{"attempt":1,"message":"first"},{"attempt":2,"message":"second"}]'),
			('b', 'q1', 'k', 'archived', 1, 1, 2, '[]'),
			('c', 'q2', 'k', 'available', 1, 1, 3, '[]')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[engine.State]int64{"q1": {engine.StateArchived: 2}, "q2": {engine.StateAvailable: 1}}
	if !countsEqual(got, want) {
		t.Fatalf("counters after the upgrade: %v, want %v", got, want)
	}
	if ids := listIDs(t, s, engine.Filter{Error: "second"}); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("last error after the upgrade: %v", ids)
	}
	if sqlite.SchemaVersion() < 2 { // later migrations add to it
		t.Fatalf("schema version %d", sqlite.SchemaVersion())
	}
}
