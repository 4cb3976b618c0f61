package backendtest

import (
	"context"
	"maps"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Truth is the ground truth a check needs that the Store API does not
// give: reads of the jobs themselves, not of what the store maintains
// beside them, and writes no caller may make. A backend implements it on
// its own storage (SQL on the tables, commands on the keys); it is for
// tests only.
type Truth interface {
	// JobCounts counts the jobs per queue and state from the jobs
	// themselves (a GROUP BY, a scan), never from the maintained counters
	// JobCountByQueue reads. Queues and states without jobs are absent.
	JobCounts(t testing.TB) map[string]map[engine.State]int64
	// CounterAdd adds n to the maintained counter of (queue, state),
	// creating it when missing, without touching any job: a drift, for
	// JobCountReconcile to repair.
	CounterAdd(t testing.TB, queue string, state engine.State, n int64)
}

// truth returns the harness's Truth over s; a harness must give one.
func (h Harness) truth(t testing.TB, s backend.Store) Truth {
	t.Helper()
	if h.Truth == nil {
		t.Fatalf("backendtest: the %s harness gives no Truth, which this check needs", h.Name)
	}
	return h.Truth(t, s)
}

// reopen returns a second store over the data of s; a harness must give
// one.
func (h Harness) reopen(t testing.TB, s backend.Store) backend.Store {
	t.Helper()
	if h.Reopen == nil {
		t.Fatalf("backendtest: the %s harness gives no Reopen, which this check needs", h.Name)
	}
	return h.Reopen(t, s)
}

func countsEqual(a, b map[string]map[engine.State]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[engine.State]int64) bool { return maps.Equal(x, y) })
}

// checkCounts compares the maintained counters with the jobs.
func checkCounts(t testing.TB, s backend.Store, tr Truth, step string) {
	t.Helper()
	got, err := s.JobCountByQueue(context.Background(), &backend.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	if want := tr.JobCounts(t); !countsEqual(got, want) {
		t.Fatalf("after %s: counters %v, jobs %v", step, got, want)
	}
}
