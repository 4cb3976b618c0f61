package postgres

import (
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// planURL is the test server (pgtest cannot be imported here: it imports
// this package).
func planURL(t *testing.T) string {
	u := os.Getenv("SLUICE_TEST_POSTGRES")
	if u == "" {
		u = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s does not answer (CI is set): %v", u, err)
		}
		t.Skipf("SKIPPED — PostgreSQL at %s does not answer: %v", u, err)
	}
	c.Close(ctx)
	return u
}

// schemaStore opens a store in a new schema of the test server, named
// from prefix, dropped when the test ends.
func schemaStore(t *testing.T, prefix string) *Store {
	t.Helper()
	base := planURL(t)
	ctx := context.Background()
	schema := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	s, err := Open(ctx, base+"&schema="+schema, Options{Migrate: true, MaxConns: 2, NoListen: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.pool.Exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		s.Close()
	})
	return s
}

// TestQueryPlans pins the plans of the hot path and the operator's first
// reads on a table with stats (ANALYZE) and no running job — the state
// in which a batched UPDATE … FROM unnest() of hundreds of ids was seen to
// flip to a sequential scan of jobs. Each query is planned four ways: as
// pgx sends it by default (extended protocol), as a generic plan (what a
// cached prepared statement runs after five executions), as a custom plan
// (what the simple protocol gets, with the values inlined), and through
// pgx's simple protocol itself (PgBouncer's transaction mode). None may
// scan every job.
func TestQueryPlans(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "plan")
	// 60,000 jobs: a tenth available, a tenth archived, the rest
	// completed; none running.
	if _, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {s}.jobs (id, queue, kind, payload, metadata, state, scheduled_at,
		created_at, state_changed_at, finalized_at, error_pattern, last_error, fingerprint)
	SELECT 'j' || lpad(g::text, 6, '0'), 'q' || (g % 3), 'k', jsonb_build_object('n', g, 'user', jsonb_build_object('id', g % 500)),
		jsonb_build_object('tenant', 't' || (g % 50)),
		CASE g % 10 WHEN 0 THEN 'available' WHEN 1 THEN 'archived' ELSE 'completed' END, g, g, g,
		CASE WHEN g % 10 IN (0) THEN NULL ELSE g END,
		CASE WHEN g % 10 = 1 THEN 'boom <n>' ELSE '' END, CASE WHEN g % 10 = 1 THEN 'boom 1' ELSE '' END,
		md5((g % 20000)::text)
	FROM generate_series(1, 60000) g`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`ANALYZE {s}.jobs`)); err != nil {
		t.Fatal(err)
	}

	ids := make([]string, maxCompleteBatch)
	leases := make([]string, maxCompleteBatch)
	fences := make([]int64, maxCompleteBatch)
	dels := make([]bool, maxCompleteBatch)
	cps := make([]string, maxCompleteBatch)
	for i := range ids {
		ids[i], leases[i], fences[i], cps[i] = fmt.Sprintf("j%06d", 1+i*37), "lease", 1, `{}`
	}
	listQ := func(p *backend.JobListPageParams) (string, []any) {
		q, a, err := s.jobListQuery(p)
		if err != nil {
			t.Fatal(err)
		}
		return q, a
	}
	arch := []sluicetype.State{sluicetype.StateArchived}
	fp := fmt.Sprintf("%x", md5.Sum([]byte("7")))
	cases := []struct {
		name string
		q    string
		args []any
		want string // an index the plan must use
	}{
		// (The store runs filter reads with payload or meta conditions
		// in pgx's exec mode, planned for their values: the generic
		// plan is checked for scans only.)
		{"claim", s.sql(sqlClaim), []any{"lease", "w", int64(time.Second), "q1", 100, 10, true,
			[]string{"k"}, []int32{1}, "archived", "deadline_exceeded", "", "", "x", "", "", "", ""}, "jobs_claim"},
		{"claim any kind", s.sql(sqlClaim), []any{"lease", "w", int64(time.Second), "q1", 100, 0, false,
			[]string(nil), []int32(nil), "", "", "", "", "", "", "", "", ""}, "jobs_claim"},
		{"claim from a cursor", s.sql(sqlClaimFrom), []any{"lease", "w", int64(time.Second), "q1", 100, 0, false,
			[]string(nil), []int32(nil), "", "", "", "", "", "", "", "", "", int32(0), int64(3000)}, "jobs_claim"},
		// Under one limit: the claim's index, and the running jobs the
		// room counts under the partial index of running jobs.
		{"claim under a kind's limit", s.sql(sqlClaimUnderKind), []any{"lease", "w", int64(time.Second), "q1", 100, 0, false,
			[]string{"k"}, []int32{1}, "", "", "", "", "", "", "", "", "", int64(1000), "k"}, "jobs_claim"},
		{"claim under a queue's limit from a cursor", s.sql(sqlClaimUnderQueueFrom), []any{"lease", "w", int64(time.Second), "q1", 100, 0, false,
			[]string(nil), []int32(nil), "", "", "", "", "", "", "", "", "", int32(0), int64(3000), int64(1000), "q1"}, "jobs_claim"},
		// Retention runs every second: a range of the state's listing.
		{"retention sweep", s.sql(sqlDeleteExpired), []any{"completed", int64(3000), nil, []string{}, 1000}, "jobs_state_changed"},
		{"retention sweep, archiving", s.sql(sqlDeleteExpiredArchiving), []any{"completed", int64(3000), nil, []string{}, 1000,
			int64(3000), []string{"q1"}}, "jobs_state_changed"},
		{"claim probe", s.sql(sqlClaimProbe), []any{"q1", []string{"k"}, []int32{1}}, "jobs_claim"},
		// The reaper, once a second, from its floor or from the start.
		{"expired leases from the floor", s.sql(sqlExpiredLeases), []any{100, int64(3000)}, "jobs_running"},
		{"expired leases from the start", s.sql(sqlExpiredLeases), []any{100, int64(0)}, "jobs_running"},
		// The primary key, never jobs_running: that index keeps an entry
		// for every job claimed since the last VACUUM (see completeSQL).
		{"batched ack", s.sql(sqlComplete), []any{ids, leases, fences, dels, true}, "jobs_pkey"},
		{"batched ack, completions only", s.sql(sqlCompleteOnly), []any{ids, leases, fences, dels, true}, "jobs_pkey"},
		{"batched ack, deletions only", s.sql(sqlCompleteDelete), []any{ids, leases, fences, dels, true}, "jobs_pkey"},
		{"lease renew", s.sql(sqlRenew), []any{ids, leases, fences, int64(time.Second)}, "jobs_pkey"},
		{"checkpoint", s.sql(sqlCheckpoint), []any{ids, leases, fences, cps}, "jobs_pkey"},
		// A fingerprint's jobs, by their ids in job_fingerprints (0008).
		{"quarantine", s.sql(sqlQuarantine), []any{fp, "k", int64(1), "boom", "j000007", 1}, "job_fingerprints_pkey"},
		{"hold a fingerprint's jobs", s.sql(sqlHold), []any{fp, int64(1), []string{"available"}, "quarantined", "quarantined",
			"quarantined", "sluice", "held"}, "job_fingerprints_pkey"},
		// (With no quarantined job here, the planner counts them by
		// jobs_error_groups, rightly: no scan is all this checks.)
		{"fingerprint record", s.sql(`SELECT ` + fingerprintColumns + ` FROM {s}.fingerprints f WHERE f.fingerprint = $1`),
			[]any{fp}, ""},
	}
	q, a := listQ(&backend.JobListPageParams{Filter: sluicetype.Filter{States: arch}, Limit: 51})
	cases = append(cases, struct {
		name, q string
		args    []any
		want    string
	}{"list first page of a state", q, a, "jobs_state_changed"})
	q, a = listQ(&backend.JobListPageParams{Filter: sluicetype.Filter{Fingerprint: fp}, Limit: 51})
	cases = append(cases, struct {
		name, q string
		args    []any
		want    string
	}{"list a fingerprint's jobs", q, a, "job_fingerprints_pkey"})
	q, a = listQ(&backend.JobListPageParams{Limit: 51})
	cases = append(cases, struct {
		name, q string
		args    []any
		want    string
	}{"list first page of every state", q, a, "jobs_state_changed"})
	q, a = listQ(&backend.JobListPageParams{Filter: sluicetype.Filter{Payload: []sluicetype.PathMatch{{Path: "user.id", Value: "7"}}}, Limit: 51})
	cases = append(cases, struct {
		name, q string
		args    []any
		want    string
	}{"payload filter", q, a, ""})
	q, a = listQ(&backend.JobListPageParams{Filter: sluicetype.Filter{Payload: []sluicetype.PathMatch{{Path: "n", Value: "12345"}}}, Limit: 51})
	cases = append(cases, struct {
		name, q string
		args    []any
		want    string
	}{"selective payload filter", q, a, "jobs_payload"})
	q, a = listQ(&backend.JobListPageParams{Filter: sluicetype.Filter{Meta: []sluicetype.PathMatch{{Path: "tenant", Value: "t7"}}}, Limit: 51})
	cases = append(cases, struct {
		name, q string
		args    []any
		want    string
	}{"meta filter", q, a, ""})

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range cases {
		for _, mode := range []string{"extended", "generic", "custom", "simple"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				p := explain(t, conn, mode, c.q, c.args)
				if os.Getenv("SLUICE_PLAN_DUMP") == c.name {
					t.Logf("%s:\n%s", mode, p)
				}
				if strings.Contains(p, "Seq Scan on jobs") {
					t.Errorf("plan scans every job:\n%s", p)
				}
				if c.want == "jobs_pkey" && strings.Contains(p, "jobs_running") {
					t.Errorf("plan reads jobs_running:\n%s", p)
				}
				if c.want != "" && !strings.Contains(p, c.want) && !(mode == "generic" && strings.Contains(c.name, "filter")) {
					t.Errorf("plan does not use %s:\n%s", c.want, p)
				}
			})
		}
	}
}

// explain returns the plan of q with args, planned as mode says.
func explain(t *testing.T, conn *pgxpool.Conn, mode, q string, args []any) string {
	t.Helper()
	ctx := context.Background()
	var rows pgx.Rows
	var err error
	switch mode {
	case "extended":
		rows, err = conn.Query(ctx, "EXPLAIN "+q, args...)
	case "simple":
		rows, err = conn.Query(ctx, "EXPLAIN "+q, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	default: // generic, custom: a prepared statement, its args inlined into EXECUTE
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_"+mode+"_plan"); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(ctx, "RESET plan_cache_mode")
		return strings.Join(explainPrepared(t, conn, "", q, args), "\n")
	}
	return planText(t, rows, err)
}

// planText is the text of an EXPLAIN's answer (rows, err), one line a row.
func planText(t *testing.T, rows pgx.Rows, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// explainPrepared prepares stmt on q, returns the lines of EXPLAIN with
// options (e.g. "(ANALYZE, BUFFERS) ") of its EXECUTE with args inlined
// (EXPLAIN EXECUTE takes no bind parameters of its own), and deallocates
// it: a prepared statement is the session's, not a transaction's.
func explainPrepared(t *testing.T, q querier, options, stmt string, args []any) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := q.Exec(ctx, "PREPARE plan_test AS "+stmt); err != nil {
		t.Fatal(err)
	}
	defer q.Exec(ctx, "DEALLOCATE plan_test")
	ph := make([]string, len(args))
	for i := range args {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	rows, err := q.Query(ctx, "EXPLAIN "+options+"EXECUTE plan_test("+strings.Join(ph, ", ")+")",
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestClaimPlanUnderBacklog plans the claim over a backlog: most of the
// table available in the claimed queue. Over such a backlog the generic
// plan once joined the picked ids to a scan of every job (a merge join over
// the whole primary key, or a sequential scan)
// (seconds per claim at a million rows, measured by scripts/bench
// pressure), because it joined the jobs to the picked set instead of
// probing the primary key for each picked id.
func TestClaimPlanUnderBacklog(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "planbl")
	// 200,000 jobs, nine in ten available in q1, the rest completed.
	if _, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {s}.jobs (id, queue, kind, payload, metadata, state, scheduled_at,
		created_at, state_changed_at, finalized_at)
	SELECT 'j' || lpad(g::text, 7, '0'), 'q1', 'k', '{}', '{}',
		CASE WHEN g % 10 = 0 THEN 'completed' ELSE 'available' END, g, g, g,
		CASE WHEN g % 10 = 0 THEN g END
	FROM generate_series(1, 200000) g`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`ANALYZE {s}.jobs`)); err != nil {
		t.Fatal(err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	args := []any{"lease", "w", int64(time.Second), "q1", 100, 10, true,
		[]string{"k"}, []int32{1}, "archived", "deadline_exceeded", "", "", "x", "", "", "", ""}
	for _, mode := range []string{"extended", "generic", "custom", "simple"} {
		t.Run(mode, func(t *testing.T) {
			p := explain(t, conn, mode, s.sql(sqlClaim), args)
			if strings.Contains(p, "Seq Scan on jobs") {
				t.Errorf("plan scans every job:\n%s", p)
			}
			if n := widestJobsScan(p); n > 20000 {
				t.Errorf("plan reads about %d jobs for a claim of 100:\n%s", n, p)
			}
		})
	}
}

// widestJobsScan is the largest row estimate of a scan of the jobs the
// claim's UPDATEs write (alias j: "on jobs j", "on jobs j_1"): probing the
// primary key for each picked id estimates one row a probe, joining
// against the whole table the table's size. (The picks, aliases c and d,
// stop at their LIMIT: their estimates are the index's before it.)
func widestJobsScan(plan string) int {
	widest := 0
	for _, line := range strings.Split(plan, "\n") {
		if !strings.Contains(line, " on jobs j ") && !strings.Contains(line, " on jobs j_") {
			continue
		}
		i := strings.Index(line, "rows=")
		if i < 0 {
			continue
		}
		var n int
		fmt.Sscanf(line[i+len("rows="):], "%d", &n)
		widest = max(widest, n)
	}
	return widest
}
