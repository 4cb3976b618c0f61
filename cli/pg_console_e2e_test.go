package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// TestConsolePostgresMarkTwoAndBulkRetry: the console end to end on a
// PostgreSQL store, directly and through a PgBouncer of the
// test's own in transaction pooling mode (SLUICE_TEST_PGBOUNCER=1, as
// scripts/test sets it; required with CI). The real binary runs `sluice
// demo` on a fresh schema of the shared server (migrate=true) in tmux; two archived
// jobs are marked with space and retried with r (confirmed), then a bulk
// retry runs from a filter (kind:invoice.generate) with b. The store then
// says exactly those jobs were retried: the operator's single retries on
// the two marked jobs only, and the bulk operation's retries on as many
// invoice jobs as the console reported. The schema is dropped at the end.
func TestConsolePostgresMarkTwoAndBulkRetry(t *testing.T) {
	bin := e2eBinary(t)
	for _, bouncer := range []bool{false, true} {
		name := map[bool]string{false: "direct", true: "pgbouncer"}[bouncer]
		t.Run(name, func(t *testing.T) { pgMarkTwoAndBulkRetry(t, bin, bouncer) })
	}
}

func pgMarkTwoAndBulkRetry(t *testing.T, bin string, bouncer bool) {
	storeURL, schema := pgcluster.SharedStoreURL(t)
	if bouncer {
		storeURL = e2eBouncerURL(t, schema)
	}
	storeURL = pgcluster.Migrating(storeURL)
	logFile := filepath.Join(t.TempDir(), "demo.log")
	c := startConsole(t, "pg-"+map[bool]string{false: "direct", true: "bouncer"}[bouncer], "", fmt.Sprintf("%s demo --store '%s' --trickle 0 --backlog 0 --log-file %s", bin, storeURL, logFile))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(logFile)
			t.Logf("---- demo log ----\n%s", tailText(string(out), 4000))
		}
	})
	c.waitFor(`archived ([2-9]|\d\d)`, 60*time.Second)
	c.waitFor(`(?m)^› demo-`, 30*time.Second)

	// Two marked and retried, from the top (see markFirstTwo).
	c.markFirstTwo()
	c.send("r")
	c.waitFor(`Retry 2 marked jobs\?`, 10*time.Second)
	var marked []string
	for _, m := range dialogID.FindAllStringSubmatch(c.screen(), -1) {
		marked = append(marked, m[1])
	}
	if len(marked) != 2 {
		t.Fatalf("the confirmation names %v, want two jobs:\n%s", marked, c.screen())
	}
	c.send("y")
	c.waitFor(`2 retried`, 15*time.Second)

	// A bulk retry from a filter, previewed and confirmed.
	c.send("/")
	c.typeText("kind:invoice.generate")
	c.send("Enter")
	c.waitFor(`(?m)^› demo-\S+\s+billing\s+invoice\.generate`, 30*time.Second)
	c.send("b")
	m := c.waitFor(`retry (\d+) jobs? \(state archived, kind invoice\.generate\)`, 15*time.Second)
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Fatal("the dry run matched nothing")
	}
	c.send("y")
	c.waitFor(`Bulk retry — completed`, 30*time.Second)
	c.send("Escape") // the dialog stays on the result until closed; its toast waits for it
	done := c.waitFor(`bulk retry completed: (\d+) matched, (\d+) retried, (\d+) failed`, 15*time.Second)
	c.quit()
	bulkRetried, _ := strconv.Atoi(done[2])
	if bulkRetried == 0 {
		t.Fatalf("the bulk retry retried nothing: %s", done[0])
	}

	slices.Sort(marked)
	single, bulk, ops := pgRetries(t, storeURL)
	t.Logf("store %s (%s): single retries %v (marked %v); bulk operations %v retried %d jobs (the console: %s)",
		schema, redact.URL(storeURL), single, marked, ops, len(bulk), done[0])
	if !slices.Equal(single, marked) {
		t.Errorf("jobs with an operator's single retry: %v, want exactly the marked %v", single, marked)
	}
	if len(ops) != 1 {
		t.Errorf("retries of bulk operations %v, want one operation's", ops)
	}
	if len(bulk) != bulkRetried {
		t.Errorf("the console says the bulk retry retried %d; the store shows %d jobs retried by it: %v", bulkRetried, len(bulk), bulk)
	}
	for id, kind := range bulk {
		if kind != demo.KindInvoiceGenerate {
			t.Errorf("the bulk retry retried %s, a %s: the filter was kind:invoice.generate", id, kind)
		}
	}

	// The schema goes with the test (SharedStoreURL's cleanup drops it
	// too, ignoring errors; here a failure to drop it fails the test).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cn, err := pgx.Connect(ctx, pgcluster.SharedURL())
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	if _, err := cn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// e2eBouncerURL starts a PgBouncer (transaction pooling) in front of the
// shared server for t and returns the store URL through it in schema,
// LISTEN going to the server directly. It skips unless the tests may start
// one (pgcluster.BouncerAllowed), and fails with CI when it cannot.
func e2eBouncerURL(t *testing.T, schema string) string {
	t.Helper()
	if !pgcluster.BouncerAllowed() {
		t.Skip("PgBouncer: set SLUICE_TEST_PGBOUNCER=1 to start one (scripts/test does when pgbouncer is installed)")
	}
	server := pgcluster.SharedURL()
	b, err := pgcluster.StartBouncer(context.Background(), pgcluster.BouncerOptions{Server: server})
	if err != nil {
		if _, ok := pgcluster.BouncerInstalled(); !ok && os.Getenv("CI") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- pgbouncer log ----\n%s", tailText(b.Log(), 4000))
		}
		b.Close()
	})
	return pgcluster.BouncerStoreURL(pgcluster.WithSchema(b.URL(), schema), server)
}

var bulkRetryMessage = regexp.MustCompile(`^bulk retry \(operation (\S+)\)$`)

// pgRetries opens the store and reads every job's timeline: single is the
// jobs with an operator's retry of one job (sorted), bulk the jobs a bulk
// retry retried (their kinds), ops the bulk operations that did.
func pgRetries(t *testing.T, storeURL string) (single []string, bulk map[string]string, ops []string) {
	t.Helper()
	ctx := context.Background()
	store, err := storeurl.Open(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	bulk = map[string]string{}
	cursor := ""
	for {
		page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{States: engine.AllStates}, Cursor: cursor, Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			d, err := e.GetJob(ctx, j.ID, false)
			if err != nil {
				t.Fatal(err)
			}
			one := false
			for _, ev := range d.Timeline {
				if ev.Kind != engine.EventRetried {
					continue
				}
				if m := bulkRetryMessage.FindStringSubmatch(ev.Message); m != nil {
					bulk[j.ID] = j.Kind
					if !slices.Contains(ops, m[1]) {
						ops = append(ops, m[1])
					}
					continue
				}
				if strings.HasPrefix(ev.Message, "bulk ") {
					t.Errorf("job %s: a retry event of another bulk action: %q", j.ID, ev.Message)
				}
				one = true
			}
			if one {
				single = append(single, j.ID)
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	slices.Sort(single)
	return single, bulk, ops
}
