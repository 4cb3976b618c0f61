package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// TestConsoleRedisMarkTwoAndGroupBulkRetry: the console end to end on a
// Redis store. The real binary runs `sluice demo` on a fresh
// namespace of the shared server in tmux; two archived jobs are marked
// with space and retried with r (confirmed), then `:errors` lists the
// error groups and b on the bad-data group ("invalid currency") runs a
// bulk retry of that group. The store then says exactly those jobs were
// retried: the operator's single retries on the two marked jobs only,
// and one bulk operation's retries on as many jobs as the console
// reported, each an invoice job that died of invalid currency. The
// namespace's keys go with the test.
func TestConsoleRedisMarkTwoAndGroupBulkRetry(t *testing.T) {
	bin := e2eBinary(t)
	storeURL := redistest.URL(t)
	logFile := filepath.Join(t.TempDir(), "demo.log")
	c := startConsole(t, "redis", "", fmt.Sprintf("%s demo --store '%s' --trickle 0 --backlog 0 --log-file %s", bin, storeURL, logFile))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(logFile)
			t.Logf("---- demo log ----\n%s", tailText(string(out), 4000))
		}
	})
	c.waitFor(`archived ([2-9]|\d\d)`, 60*time.Second)
	c.waitFor(`(?m)^› demo-`, 30*time.Second)
	marked := c.markTwoRetried()

	// The error groups, and a bulk retry of one of them.
	c.command("errors")
	c.waitFor(`Error groups of .* — the jobs tab and filter scope them`, 15*time.Second)
	c.waitFor(`(?m)^. billing\s+invoice\.generate\s+(?:open\s+)?\d+ .*invalid currency "<str>"`, 60*time.Second)
	c.cursorTo(`invalid currency`, 15*time.Second)
	c.send("b")
	m := c.waitFor(`retry (\d+) jobs? \(state archived, queue billing, kind invoice\.generate, error group "invoice INV-`, 15*time.Second)
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Fatal("the group's dry run matched nothing")
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

	single, bulk, ops := pgRetries(t, storeURL)
	t.Logf("single retries %v (marked %v); bulk operations %v retried %d jobs (the console: %s; its preview: %s)",
		single, marked, ops, len(bulk), done[0], m[0])
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
			t.Errorf("the bulk retry retried %s, a %s: the group is invoice.generate's", id, kind)
		}
	}
	for id, msg := range firstErrors(t, storeURL, bulk) {
		if !strings.Contains(msg, "invalid currency") {
			t.Errorf("the bulk retry retried %s, which died of %q: the group is invalid currency", id, msg)
		}
	}
}

// markTwoRetried marks the first two rows, retries them (confirmed) and
// returns their ids, sorted.
func (c *tmuxConsole) markTwoRetried() []string {
	c.t.Helper()
	// Two marked and retried, from the top (see markFirstTwo).
	c.markFirstTwo()
	c.send("r")
	c.waitFor(`Retry 2 marked jobs\?`, 10*time.Second)
	var marked []string
	for _, m := range dialogID.FindAllStringSubmatch(c.screen(), -1) {
		marked = append(marked, m[1])
	}
	if len(marked) != 2 {
		c.t.Fatalf("the confirmation names %v, want two jobs:\n%s", marked, c.screen())
	}
	c.send("y")
	c.waitFor(`2 retried`, 15*time.Second)
	slices.Sort(marked)
	return marked
}

// firstErrors are the message of each job's first error on record (the
// death a group is made of: a retried job keeps its errors).
func firstErrors(t *testing.T, storeURL string, ids map[string]string) map[string]string {
	t.Helper()
	ctx := context.Background()
	store, err := storeurl.Open(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	out := map[string]string{}
	for id := range ids {
		j, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if len(j.Errors) == 0 {
			t.Errorf("job %s: retried by the group's bulk retry, and no error on record", id)
			continue
		}
		out[id] = j.Errors[0].Message
	}
	return out
}
