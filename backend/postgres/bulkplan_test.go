package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestBulkPlansWithoutStats plans the statements of a bulk retry and its
// dry run over a mass death that no ANALYZE has seen (autovacuum off, or
// not yet run): 60,000 jobs of one queue, all archived, none analyzed.
// There every condition gets the planner's default selectivity — state =
// 'archived' AND queue = $n looks like a handful of rows, a non-empty
// superseded_by like nearly all — and the batch's pick, the dry run's count and
// its sample each once read every dead job (jobs_error_groups, or a
// sequential scan) on every call: a batch cost the whole state's size
// (1 s a batch at a million), the dry run 1.3–1.7 s. Each statement must
// read only its own rows: the window's ids, the end of a listing index.
func TestBulkPlansWithoutStats(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "planbulk")
	if _, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {s}.jobs (id, queue, kind, payload, state, scheduled_at,
		created_at, state_changed_at, finalized_at, fingerprint, error_pattern, last_error)
	SELECT 'j' || lpad(g::text, 6, '0'), 'bench', 'k' || (g % 3), '{}', 'archived', g, g, g, g, md5(g::text),
		'boom <n>', 'boom 1'
	FROM generate_series(1, 60000) g`)); err != nil {
		t.Fatal(err)
	}
	spec, err := backend.SpecFor(sluicetype.ActionRetry)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := spec.Narrow(sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}, Queues: []string{"bench"}})
	cutoff := time.Unix(0, 70000)
	end := "j001000"
	b := &batch{s: s, tx: &wtx{s: s}, limit: 1000, p: &backend.OperationProcessBatchParams{
		After: "j000000", Spec: spec, Selector: sel, Cutoff: cutoff}}
	pickQ, pickA, err := b.pickQuery(&end)
	if err != nil {
		t.Fatal(err)
	}
	b.p.After = "j059500"
	lastQ, lastA, err := b.pickQuery(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The change of an unlocked batch (one state): a thousand ids, each
	// tested again in the UPDATE.
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("j%06d", 1000+i)
	}
	ub := &batch{s: s, tx: &wtx{s: s}, limit: 1000, unlocked: true, p: &backend.OperationProcessBatchParams{
		After: "j000999", Spec: spec, Selector: sel, Cutoff: cutoff,
		Event: backend.EventWrite{Kind: spec.Event, Actor: "t", To: spec.To, Message: "bulk retry"}}}
	changeQ, changeA, err := ub.unlockedQuery(ids)
	if err != nil {
		t.Fatal(err)
	}
	ub.unlocked = false
	lockedQ, lockedA := ub.lockedQuery(ids)
	// The dry run: its count as of the cutoff without the superseded
	// jobs, and its sample, newest first from the cutoff.
	countP := &backend.JobCountMatchingParams{Filter: sel, ExcludeSuperseded: true, AsOf: &cutoff, Max: sluicetype.DryRunExactLimit}
	countQ, countA, err := s.countByCountersQuery(countP, countCorrectionCap)
	if err != nil {
		t.Fatal(err)
	}
	listP := &backend.JobListPageParams{Filter: sel, ExcludeSuperseded: true,
		After: &sluicetype.Cursor{At: cutoff.Add(time.Nanosecond), Dir: sluicetype.CursorNext}, Limit: sluicetype.BulkSampleSize}
	listQ, listA, err := s.jobListQuery(listP)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.JobCountReconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if wide, err := s.listWide(ctx, &listP.Filter); err != nil || !wide {
		t.Fatalf("the sample of a queue holding every dead job is not read in index order (%v, %v)", wide, err)
	}
	if n, _, err := s.JobCountMatching(ctx, countP); err != nil || n != 60000 {
		t.Fatalf("dry run count: %d, %v; want 60000", n, err)
	}
	cases := []struct {
		name    string
		q       string
		args    []any
		want    string
		inOrder bool // run as listInOrder runs it
	}{
		{"batch pick", pickQ, pickA, "jobs_pkey", false},
		{"last batch pick", lastQ, lastA, "jobs_pkey", false},
		{"unlocked batch change", changeQ, changeA, "jobs_pkey", false},
		{"locked batch change", lockedQ, lockedA, "jobs_pkey", false},
		{"dry run count", countQ, countA, "Index Cond: ((state = 'archived'::text) AND (state_changed_at > ", false},
		{"dry run sample", listQ, listA, "jobs_state_changed", true},
	}

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range cases {
		for _, mode := range []string{"extended", "generic", "custom", "simple"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				if c.inOrder {
					if _, err := conn.Exec(ctx, "SET enable_sort = off"); err != nil {
						t.Fatal(err)
					}
					defer conn.Exec(ctx, "RESET enable_sort")
				}
				p := explain(t, conn, mode, c.q, c.args)
				bads := []string{"Seq Scan on jobs", "jobs_error_groups"}
				if c.name != "dry run count" {
					// (The count may sort the few jobs past its cutoff.)
					bads = append(bads, "Sort Key: jobs.state_changed_at", "Sort Key: state_changed_at")
				}
				for _, bad := range bads {
					if strings.Contains(p, bad) {
						t.Errorf("plan reads every dead job (%s):\n%s", bad, p)
					}
				}
				if c.want != "" && !strings.Contains(p, c.want) {
					t.Errorf("plan does not use %s:\n%s", c.want, p)
				}
			})
		}
	}
}
