package postgres

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// analyzeBuffers runs q with args under the generic plan (as the store's
// prepared statements run) in a transaction it rolls back, and returns
// the shared buffers the whole statement read.
func analyzeBuffers(t *testing.T, s *Store, q string, args []any) int {
	t.Helper()
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	lines := explainPrepared(t, tx, "(ANALYZE, BUFFERS, FORMAT TEXT) ", q, args)
	for _, l := range lines {
		if m := buffersRx.FindStringSubmatch(l); m != nil {
			hit, _ := strconv.Atoi(m[1])
			read, _ := strconv.Atoi(m[2] + "0")
			return hit + read/10
		}
	}
	t.Fatalf("no buffers in the plan:\n%s", strings.Join(lines, "\n"))
	return 0
}

// TestBatchWritesGrowLinearly: the batched writes — claim, completion,
// lease renewal — read buffers in proportion to their batch.
// Their generic plans once probed the primary key for every id of the
// array once per item (a nested loop whose inner index scan took the
// whole = ANY($1)): 400 items cost a hundred times 40, and under a
// backlog, when batches grow, the single completer fell behind
// (scripts/bench pressure: 33 ms a completion, 87,000 buffers a renewal
// of 450 jobs).
func TestBatchWritesGrowLinearly(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "batchcost")
	insertAvailable(t, s, "q", "b", 1, 20000)
	if _, err := s.pool.Exec(ctx, s.sql(`ANALYZE {s}.jobs`)); err != nil {
		t.Fatal(err)
	}
	jobs := claimN(t, s, "q", 400)
	if len(jobs) != 400 {
		t.Fatalf("claimed %d", len(jobs))
	}
	refs := func(n int) (ids, leases []string, fences []int64, dels []bool) {
		for _, j := range jobs[:n] {
			ids, leases, fences, dels = append(ids, j.ID), append(leases, j.Lease.ID), append(fences, j.Fence), append(dels, false)
		}
		return
	}
	for _, tc := range []struct {
		name string
		q    string
		args func(n int) []any
	}{
		{"complete", s.sql(sqlCompleteOnly), func(n int) []any {
			ids, leases, fences, dels := refs(n)
			return []any{ids, leases, fences, dels, true}
		}},
		{"renew", s.sql(sqlRenew), func(n int) []any {
			ids, leases, fences, _ := refs(n)
			return []any{ids, leases, fences, int64(60e9)}
		}},
		{"claim", s.sql(sqlClaim), func(n int) []any {
			return []any{"lease", "w", int64(60e9), "q", n, 0, false,
				[]string(nil), []int32(nil), "", "", "", "", "", "", "", "", ""}
		}},
	} {
		small := analyzeBuffers(t, s, tc.q, tc.args(40))
		large := analyzeBuffers(t, s, tc.q, tc.args(400))
		t.Logf("%s: %d buffers for 40 jobs, %d for 400", tc.name, small, large)
		if large > 20*small {
			t.Errorf("%s of 400 jobs read %d buffers, of 40 %d: more than linear", tc.name, large, small)
		}
	}
}
