package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestBulkRangePlans pins the plans of a batch taken by id range: its
// count, its events and its change all walk the primary key from the
// cursor to the batch's last id, and none sorts the jobs of a state.
func TestBulkRangePlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plans.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	spec, err := backend.SpecFor(sluicetype.ActionRetry)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []sluicetype.Filter{
		{States: []sluicetype.State{sluicetype.StateArchived}},
		{States: []sluicetype.State{sluicetype.StateArchived}, Queues: []string{"q"}, Kinds: []string{"k"}, ErrorPattern: "p"},
		{Queues: []string{"q"}},
	} {
		sel, _ := spec.Narrow(f)
		op := &backend.OperationProcessBatchParams{Spec: spec, Selector: sel, Cutoff: time.Now()}
		if !byRange(&sel) {
			t.Fatalf("%s is not taken by range", f)
		}
		end := sql.NullString{String: "z", Valid: true}
		q, args, err := batchGroupsQuery(op, "a", end, 1000)
		if err != nil {
			t.Fatal(err)
		}
		w, err := batchWhere(op, "a", end)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			q    string
			args []any
		}{
			{"count", q, args},
			{"events", `INSERT OR FAIL INTO job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
				SELECT id, ?, ?, ?, state, ?, attempt, ? FROM jobs WHERE ` + w.sql(), slices.Concat([]any{1, 2, 3, 4, 5}, w.args)},
			{"retry", `UPDATE OR FAIL jobs SET ` + specSet(spec) + ` WHERE ` + w.sql(), slices.Concat([]any{1, nil}, w.args)},
			{"delete", `DELETE FROM jobs WHERE ` + w.sql(), w.args},
		} {
			p := explain(t, s, c.q, c.args...)
			if !strings.Contains(p, "sqlite_autoindex_jobs_1 (id>? AND id<?)") || strings.Contains(p, "FOR ORDER BY") ||
				strings.Contains(p, "SCAN jobs") {
				t.Errorf("%s of %s: plan\n%s", c.name, f, p)
			}
		}
	}
	// A bulk selector's count: the listing index alone, and the superseded
	// jobs from their own index.
	arch := sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}}
	p := &backend.JobCountMatchingParams{Filter: arch, Max: sluicetype.DryRunExactLimit}
	q, args, err := jobCountQuery(p)
	if err != nil {
		t.Fatal(err)
	}
	if plan := explain(t, s, q, args...); !strings.Contains(plan, "COVERING INDEX jobs_state_changed") {
		t.Errorf("count plan:\n%s", plan)
	}
	p.ExcludeSuperseded = true
	q, args, err = supersededCountQuery(p)
	if err != nil {
		t.Fatal(err)
	}
	if plan := explain(t, s, q, args...); !strings.Contains(plan, "INDEX jobs_superseded") {
		t.Errorf("superseded count plan:\n%s", plan)
	}

	for _, f := range []sluicetype.Filter{{Error: "x"}, {Tags: []string{"t"}}, {IDs: []string{"a", "b"}},
		{Payload: []sluicetype.PathMatch{{Path: "a", Value: "1"}}}, {Meta: []sluicetype.PathMatch{{Path: "a", Value: "1"}}}} {
		if byRange(&f) {
			t.Errorf("%s is taken by range; its test is not a plain column's", f)
		}
	}
}

func explain(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, q)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "\n")
}
