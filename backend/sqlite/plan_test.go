package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestQueryPlans pins the indexes the operator queries and the hot-path
// queries that moved with migration 0002 use: a plan that falls back to a
// scan of every job, or sorts a whole state, would pass the functional
// tests and fail at a million rows.
func TestQueryPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plans.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan := func(t *testing.T, q string, args ...any) string {
		t.Helper()
		return explain(t, s, q, args...)
	}
	expect := func(t *testing.T, p string, want []string, not []string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(p, w) {
				t.Errorf("plan lacks %q:\n%s", w, p)
			}
		}
		for _, n := range not {
			if strings.Contains(p, n) {
				t.Errorf("plan has %q:\n%s", n, p)
			}
		}
		for line := range strings.SplitSeq(p, "\n") {
			if strings.HasPrefix(line, "SCAN jobs") && !strings.Contains(line, "INDEX") {
				t.Errorf("plan scans every job:\n%s", p)
			}
		}
	}
	at := time.Now()
	arch := []sluicetype.State{sluicetype.StateArchived}
	group := sluicetype.Filter{States: arch, Queues: []string{"q"}, Kinds: []string{"k"}, ErrorPattern: "p"}
	list := func(p *backend.JobListPageParams) string {
		q, args, err := jobListQuery(p)
		if err != nil {
			t.Fatal(err)
		}
		return plan(t, q, args...)
	}
	count := func(p *backend.JobCountMatchingParams) string {
		q, args, err := jobCountQuery(p)
		if err != nil {
			t.Fatal(err)
		}
		return plan(t, q, args...)
	}
	sorted := []string{"TEMP B-TREE"}
	t.Run("list a state", func(t *testing.T) {
		expect(t, list(&backend.JobListPageParams{Filter: sluicetype.Filter{States: arch}, Limit: 51}), []string{"jobs_state_changed (state=?)"}, sorted)
		expect(t, list(&backend.JobListPageParams{Filter: sluicetype.Filter{States: arch}, Limit: 51, After: &sluicetype.Cursor{At: at, ID: "x"}}),
			[]string{"(state_changed_at,id)<(?,?)"}, sorted)
		expect(t, list(&backend.JobListPageParams{Filter: sluicetype.Filter{States: arch}, Limit: 51, After: &sluicetype.Cursor{At: at, ID: "x"}, Reverse: true}),
			[]string{"(state_changed_at,id)>(?,?)"}, sorted)
	})
	t.Run("list an error group", func(t *testing.T) {
		expect(t, list(&backend.JobListPageParams{Filter: group, Limit: 51}), []string{"jobs_error_groups"}, sorted)
	})
	t.Run("list every state", func(t *testing.T) {
		expect(t, list(&backend.JobListPageParams{Limit: 51}), []string{"MERGE (UNION ALL)", "jobs_claim", "jobs_claim_suspect", "jobs_running"}, nil)
	})
	t.Run("list ids", func(t *testing.T) {
		expect(t, list(&backend.JobListPageParams{Filter: sluicetype.Filter{IDs: []string{"a", "b"}}, Limit: 51}), []string{"sqlite_autoindex_jobs_1 (id=?)"}, nil)
	})
	t.Run("count", func(t *testing.T) {
		expect(t, count(&backend.JobCountMatchingParams{Filter: sluicetype.Filter{States: arch}, Max: 10}), []string{"COVERING INDEX jobs_state_changed"}, nil)
		expect(t, count(&backend.JobCountMatchingParams{Filter: group}), []string{"COVERING INDEX jobs_error_groups"}, nil)
		expect(t, count(&backend.JobCountMatchingParams{Filter: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateAvailable}}}), []string{"jobs_claim"}, nil)
	})
	t.Run("error groups", func(t *testing.T) {
		q, args, err := errorGroupsQuery(&backend.JobErrorGroupsParams{Filter: sluicetype.Filter{States: arch}})
		if err != nil {
			t.Fatal(err)
		}
		expect(t, plan(t, q, args...), []string{"COVERING INDEX jobs_error_groups (state=?)"}, nil)
	})
	t.Run("operation batch", func(t *testing.T) {
		spec, err := backend.SpecFor(sluicetype.ActionRetry)
		if err != nil {
			t.Fatal(err)
		}
		sel, _ := spec.Narrow(sluicetype.Filter{States: arch, Queues: []string{"q"}})
		op := &backend.OperationProcessBatchParams{Spec: spec, Selector: sel, Cutoff: at}
		q, args, err := batchQuery(op, "", sql.NullString{String: "z", Valid: true}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, plan(t, q, args...), []string{"sqlite_autoindex_jobs_1 (id>? AND id<?)"}, sorted)
		op.Selector, _ = spec.Narrow(group)
		q, args, err = batchQuery(op, "", sql.NullString{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, plan(t, q, args...), []string{"sqlite_autoindex_jobs_1 (id>?)"}, sorted)
		expect(t, plan(t, sqlOperationWindowEnd, "", 9999), []string{"COVERING INDEX sqlite_autoindex_jobs_1"}, nil)
	})
	t.Run("hot path", func(t *testing.T) {
		expect(t, plan(t, sqlDeleteExpired, "archived", 1, "[]", 10), []string{"jobs_state_changed (state=? AND state_changed_at<?)"}, nil)
		expect(t, plan(t, `SELECT id FROM jobs INDEXED BY jobs_running WHERE state = 'running' AND lease_expires_at < ?1 LIMIT 10`, 1),
			[]string{"jobs_running (lease_expires_at<?)"}, nil)
		expect(t, plan(t, sqlComplete, 1, "[]"), []string{"sqlite_autoindex_jobs_1 (id=?)"}, nil)
	})
}
