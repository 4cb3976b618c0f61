package sqlite_test

import (
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// The operator-surface benchmarks share one fixture: 100,000 jobs of
// queue default archived by direct SQL (five error patterns, distinct
// state_changed_at), built once per test binary and copied per benchmark.
const fixtureJobs = 100_000

var (
	fixtureOnce  sync.Once
	fixtureBytes []byte
	fixtureErr   error
)

// sqlArchiveAll archives every available job as if it had died after one
// attempt, with one of five error messages. ?1 is now.
const sqlArchiveAll = `UPDATE jobs SET state = 'archived', terminal_reason = 'attempts_exhausted',
	attempt = 1, max_attempts = 1, finalized_at = ?1 + rowid, state_changed_at = ?1 + rowid,
	scheduled_at = ?1, attempted_at = ?1, attempted_by = 'bench',
	last_error = 'dial tcp 10.0.' || (rowid % 5) || '.' || (rowid % 250) || ':5432: connection refused (' || (rowid % 5) || ')',
	error_pattern = 'dial tcp <addr>: connection refused (' || (rowid % 5) || ')',
	errors = json_array(json_object('attempt', 1, 'at', '2026-11-29T00:00:00Z', 'message', 'connection refused'))
	WHERE state = 'available'`

// archiveAll runs sqlArchiveAll on the file at path through its own
// connection, then recounts the counters.
func archiveAll(tb testing.TB, s *sqlite.Store) {
	tb.Helper()
	db, err := sql.Open("sqlite", s.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(sqlArchiveAll, time.Now().Add(-time.Hour).UnixNano()); err != nil {
		tb.Fatal(err)
	}
	if err := s.JobCountReconcile(ctx); err != nil {
		tb.Fatal(err)
	}
}

func buildFixture() {
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		fixtureErr = err
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "fixture.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		fixtureErr = err
		return
	}
	for off := 0; off < fixtureJobs; off += 1000 {
		res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: benchJobs(1000, off), RefuseQuarantined: true})
		if err != nil {
			fixtureErr = err
			s.Close()
			return
		}
		for _, r := range res {
			if r.Err != nil {
				fixtureErr = r.Err
				s.Close()
				return
			}
		}
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err == nil {
		_, err = db.Exec(sqlArchiveAll, time.Now().Add(-time.Hour).UnixNano())
		db.Close()
	}
	if err == nil {
		err = s.JobCountReconcile(ctx)
	}
	if err == nil {
		err = s.Checkpoint(ctx)
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fixtureErr = err
		return
	}
	fixtureBytes, fixtureErr = os.ReadFile(path)
}

// fixture opens a copy of the 100k-archived-jobs file.
func fixture(b *testing.B) *sqlite.Store {
	b.Helper()
	fixtureOnce.Do(buildFixture)
	if fixtureErr != nil {
		b.Fatalf("fixture: %v", fixtureErr)
	}
	path := filepath.Join(b.TempDir(), "sluice.db")
	if err := os.WriteFile(path, fixtureBytes, 0o600); err != nil {
		b.Fatal(err)
	}
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkBulkRetry retries 100k archived jobs through one operation, in
// batches of 1000 (OperationProcessBatch, as the engine's runner calls
// it). Each round re-archives the jobs first, untimed.
func BenchmarkBulkRetry(b *testing.B) {
	s := fixture(b)
	total := 0
	first := true
	var ops int
	var cpu time.Duration
	runner, err := engine.New(s, engine.Config{NoMaintenance: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if !first {
			b.StopTimer()
			archiveAll(b, s)
			b.StartTimer()
		}
		first = false
		ops++
		op, err := s.OperationInsert(ctx, &backend.OperationInsertParams{
			ID: fmt.Sprintf("op-%d", ops), Action: sluicetype.ActionRetry, CreatedBy: "bench",
			Selector: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}, Queues: []string{"default"}},
		})
		if err != nil {
			b.Fatal(err)
		}
		c0 := cpuTime()
		if did, err := runner.RunOperation(ctx); err != nil || !did {
			b.Fatalf("run operation: %v %v", did, err)
		}
		cpu += cpuTime() - c0
		if op, err = s.OperationGet(ctx, &backend.OperationGetParams{ID: op.ID}); err != nil {
			b.Fatal(err)
		}
		if op.Status != sluicetype.OperationCompleted || op.Succeeded != fixtureJobs {
			b.Fatalf("operation: %+v", op)
		}
		total += int(op.Succeeded)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(total), "cpu-µs/job")
}

var archivedFilter = sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}}

// BenchmarkListFirstPage reads the newest page of archived jobs (the
// engine asks for 51 rows for a page of 50).
func BenchmarkListFirstPage(b *testing.B) {
	s := fixture(b)
	for b.Loop() {
		js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: archivedFilter, Limit: 51})
		if err != nil || len(js) != 51 {
			b.Fatalf("%d rows, %v", len(js), err)
		}
	}
}

// BenchmarkListDeepPage reads a page 90,000 rows deep, by its keyset
// cursor.
func BenchmarkListDeepPage(b *testing.B) {
	s := fixture(b)
	// The cursor of row 90,000: walk there once, untimed.
	var after *sluicetype.Cursor
	for seen := 0; seen < 90_000; {
		js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: archivedFilter, After: after, Limit: 200})
		if err != nil || len(js) == 0 {
			b.Fatalf("walk: %d rows, %v", len(js), err)
		}
		last := js[len(js)-1]
		after = &sluicetype.Cursor{At: last.StateChangedAt, ID: last.ID}
		seen += len(js)
	}
	b.ResetTimer()
	for b.Loop() {
		js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: archivedFilter, After: after, Limit: 51})
		if err != nil || len(js) != 51 {
			b.Fatalf("%d rows, %v", len(js), err)
		}
	}
}

// sqlTwentyErrors gives the newest 1,000 jobs the error list of a job that
// exhausted the default 25 attempts: sluicetype.MaxKeptErrors errors, each as
// json.Marshal writes an sluicetype.AttemptError.
const sqlTwentyErrors = `UPDATE jobs SET errors = (
	WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20)
	SELECT json_group_array(json_object('attempt', i, 'crash', json('false'), 'at', '2026-11-29T00:00:00.123456789Z',
		'worker', 'host-7/4242/9f86d081', 'message', 'dial tcp 10.0.3.17:5432: connect: connection refused')) FROM n)
	WHERE rowid > (SELECT max(rowid) - 1000 FROM jobs)`

// BenchmarkListFirstPageTwentyErrors is BenchmarkListFirstPage on jobs
// that carry twenty errors each: a listed row decodes only the latest.
func BenchmarkListFirstPageTwentyErrors(b *testing.B) {
	s := fixture(b)
	db, err := sql.Open("sqlite", s.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	_, err = db.Exec(sqlTwentyErrors)
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: archivedFilter, Limit: 51})
		if err != nil || len(js) != 51 || len(js[0].Errors) != 1 || js[0].Errors[0].Attempt != 20 {
			b.Fatalf("%d rows, %v", len(js), err)
		}
	}
}

// BenchmarkCounts reads the maintained counters (Counts, the state tabs),
// and for comparison counts archived jobs exactly (a bulk dry run) and
// groups them by error.
func BenchmarkCounts(b *testing.B) {
	s := fixture(b)
	b.Run("maintained", func(b *testing.B) {
		for b.Loop() {
			c, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
			if err != nil || c["default"][sluicetype.StateArchived] != fixtureJobs {
				b.Fatalf("%v %v", c, err)
			}
		}
	})
	b.Run("exact", func(b *testing.B) {
		for b.Loop() {
			n, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: archivedFilter, Max: sluicetype.DryRunExactLimit})
			if err != nil || n != fixtureJobs {
				b.Fatalf("%d %v", n, err)
			}
		}
	})
	b.Run("error_groups", func(b *testing.B) {
		for b.Loop() {
			gs, err := s.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: archivedFilter, Limit: 200})
			if err != nil || len(gs) != 5 {
				b.Fatalf("%d groups, %v", len(gs), err)
			}
		}
	})
}
