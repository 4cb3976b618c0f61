package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
)

// insertCompleted writes n completed jobs, ids prefix000001….
func insertCompleted(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), s.sql(`INSERT INTO {s}.jobs (id, queue, kind, payload, state,
		scheduled_at, created_at, state_changed_at, finalized_at)
	SELECT $1 || lpad(g::text, 6, '0'), 'q', 'k', '{}', 'completed', g, g, g, g
	FROM generate_series(1, $2::int) g`), prefix, n); err != nil {
		t.Fatal(err)
	}
}

// TestFirstStatsReplanHotPath: a new store's connections plan the hot
// path's statements once, generically, when the jobs table is a few
// pages, and keep those plans until its stats change. Planned then, the
// renewal scanned every job for its ids: under scripts/bench pressure
// the table grew by 2,000 jobs a second, a renewal of 3,800 leases took
// 2.3 s with their rows locked, completions waited on them, and the
// first minute fell 60,000 jobs behind, until autovacuum's first
// ANALYZE (its naptime is a minute) made every connection plan again.
// Once the table has grown past firstStatsPages, the maintenance that
// lists expired leases analyzes it, once: the cached plan is replaced.
func TestFirstStatsReplanHotPath(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "firststats")
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode")
	if _, err := conn.Exec(ctx, "PREPARE first_stats AS "+s.sql(sqlRenew)); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE first_stats")
	ids := make([]string, 400)
	for i := range ids {
		ids[i] = fmt.Sprintf("big%06d", 1+i*15)
	}
	plan := func() string {
		t.Helper()
		rows, err := conn.Query(ctx, "EXPLAIN EXECUTE first_stats($1, $2, $3, $4)", pgx.QueryExecModeSimpleProtocol,
			ids, make([]string, len(ids)), make([]int64, len(ids)), int64(time.Second))
		return planText(t, rows, err)
	}

	insertCompleted(t, s, "small", 20)
	small := plan()
	// Just past the size at which the maintenance analyzes: the plans
	// made then are the ones every session keeps.
	insertCompleted(t, s, "big", 6000)
	var pages int64
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT pg_relation_size('{s}.jobs') / 8192`)).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages < firstStatsPages {
		t.Fatalf("the table is %d pages, under firstStatsPages (%d): the test does not reach it", pages, firstStatsPages)
	}
	if _, err := s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	grown := plan()
	if strings.Contains(grown, "Seq Scan on jobs") {
		t.Fatalf("after the table grew and maintenance ran, the renewal still scans every job:\n%s\n(planned at 20 jobs:\n%s)", grown, small)
	}
	// Once: the next listings find the table analyzed.
	for range 3 {
		if _, err := s.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: 10}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond) // the statistics' flush (PGSTAT_MIN_INTERVAL)
	var after int64
	if err := s.pool.QueryRow(ctx, `SELECT analyze_count FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'`,
		s.schema).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after > 1 {
		t.Fatalf("jobs analyzed %d times by the maintenance, want once", after)
	}
	t.Logf("renewal planned at 20 jobs:\n%s\nafter 6,000 more (%d pages) and the maintenance:\n%s", small, pages, grown)
}
