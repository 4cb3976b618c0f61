package sqlitetest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/sluicetype"
)

// Truth reads and writes a store's file on a connection of its own, for
// the conformance suite's ground truth (backendtest.Truth): counts from
// the jobs table itself, and drifts of the job_counts table.
type Truth struct {
	db *sql.DB
}

// NewTruth opens a Truth over s, which must be a *sqlite.Store (as New
// returns), and closes it when tb ends.
func NewTruth(tb testing.TB, s backend.Store) *Truth {
	tb.Helper()
	db, err := sql.Open("sqlite", file(tb, s)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		tb.Fatalf("sqlitetest: truth: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return &Truth{db: db}
}

// Reopen opens a second store on the file of s (a *sqlite.Store), as
// another process would, and closes it when tb ends.
func Reopen(tb testing.TB, s backend.Store) backend.Store {
	tb.Helper()
	s2, err := sqlite.Open(context.Background(), file(tb, s), sqlite.Options{})
	if err != nil {
		tb.Fatalf("sqlitetest: reopen: %v", err)
	}
	tb.Cleanup(func() { s2.Close() })
	return s2
}

func file(tb testing.TB, s backend.Store) string {
	tb.Helper()
	ss, ok := s.(*sqlite.Store)
	if !ok {
		tb.Fatalf("sqlitetest: %T is not a *sqlite.Store", s)
	}
	return ss.Path()
}

// JobCounts counts the jobs per queue and state with GROUP BY.
func (tr *Truth) JobCounts(tb testing.TB) map[string]map[sluicetype.State]int64 {
	tb.Helper()
	rows, err := tr.db.Query(`SELECT queue, state, count(*) FROM jobs GROUP BY queue, state`)
	if err != nil {
		tb.Fatalf("sqlitetest: truth: %v", err)
	}
	defer rows.Close()
	out := map[string]map[sluicetype.State]int64{}
	for rows.Next() {
		var q, st string
		var n int64
		if err := rows.Scan(&q, &st, &n); err != nil {
			tb.Fatalf("sqlitetest: truth: %v", err)
		}
		if out[q] == nil {
			out[q] = map[sluicetype.State]int64{}
		}
		out[q][sluicetype.State(st)] = n
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("sqlitetest: truth: %v", err)
	}
	return out
}

// CounterAdd adds n to the job_counts row of (queue, state), creating it.
func (tr *Truth) CounterAdd(tb testing.TB, queue string, state sluicetype.State, n int64) {
	tb.Helper()
	if _, err := tr.db.Exec(`INSERT INTO job_counts (queue, state, n) VALUES (?, ?, ?)
		ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n`, queue, string(state), n); err != nil {
		tb.Fatalf("sqlitetest: counter drift: %v", err)
	}
}
