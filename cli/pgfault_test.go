package cli_test

// PostgreSQL fault tests on a private cluster of the test's own
// (internal/pgcluster: initdb and pg_ctl in a temp folder on a free port,
// as the postgres user when root), never the shared server: the server
// restarted under running workers, and every connection slot taken by
// another client. They skip while the PostgreSQL backend is not built
// (storeurl.Open wraps engine.ErrUnsupported), and when PostgreSQL is
// not installed, unless CI is set.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
	"github.com/sluicehq/sluice/internal/pgcluster"
)

// privateCluster starts a PostgreSQL cluster of the test's own.
func privateCluster(t *testing.T, o pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(context.Background(), o)
	if errors.Is(err, pgcluster.ErrNotInstalled) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(c.Dir(), "server.log"))
			t.Logf("---- server.log of the private cluster ----\n%s", tail(string(b), 60))
		}
		if err := c.Close(); err != nil {
			t.Errorf("close the private cluster: %v", err)
		}
	})
	return c
}

// countsNow are the queue's jobs by state, or nil while the store does
// not answer (a restart, an outage): the caller waits on.
func countsNow(e *engine.Engine, queue string) map[engine.State]int64 {
	c, err := e.Counts(context.Background(), queue)
	if err != nil {
		return nil
	}
	return c.Total
}

// TestFaultPostgresRestart: the server of a private cluster is stopped
// under two running worker processes and started again two seconds later.
// The workers and the test's own engine reconnect by themselves: jobs
// enqueued before and after the restart all complete, exactly once each,
// none is left running, and no crash is charged to any job — both
// processes lived through it.
func TestFaultPostgresRestart(t *testing.T) {
	skipUnlessFault(t)
	ctx := context.Background()
	c := privateCluster(t, pgcluster.Options{})
	storeURL := c.URL()
	store, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	side := filepath.Join(t.TempDir(), "side.db")
	if err := chaos.CreateSideTable(side); err != nil {
		t.Fatal(err)
	}
	const before, after = 3000, 1000
	queue := fmt.Sprintf("restart-%x", time.Now().UnixNano()&0xffffffff)
	ids := enqueueAll(t, e, sleepJobs(t, queue, 0, before, 5, 40), 0)
	var ws []*child
	for i := range 2 {
		ws = append(ws, startWorker(t, bin, storeURL, fmt.Sprintf("restart-%d", i+1), "--queues", queue, "--record", side,
			"--lease", "3s", "--heartbeat", "300ms", "--log-level", "info"))
	}
	alive := func() {
		for _, w := range ws {
			if w.exited() {
				t.Fatalf("%s exited: %v", w.name, w.err)
			}
		}
	}
	waitFor(t, "a fifth of the jobs completed", 5*time.Minute, func() bool {
		alive()
		c := countsNow(e, queue)
		return c != nil && c[engine.StateCompleted] >= before/5
	})

	// The restart: a fast shutdown (every session ended), two seconds
	// without a server — past heartbeats, short of the lease — and the
	// server back on the same port with its data.
	marks := logMarks(ws)
	atStop := countsNow(e, queue)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	alive()
	t.Logf("server restarted with %d of %d jobs completed, %d running", atStop[engine.StateCompleted], before, atStop[engine.StateRunning])
	// The test's engine reconnects too: it enqueues more after the
	// restart (a batch that meets a dead connection is sent again).
	ids = append(ids, enqueueAll(t, e, sleepJobs(t, queue, before, after, 5, 40), time.Minute)...)

	waitFor(t, "every job completed after the restart", 5*time.Minute, func() bool {
		alive()
		c := countsNow(e, queue)
		return c != nil && c[engine.StateCompleted] == before+after
	})
	for _, w := range ws {
		w.stop(t)
	}
	// Each worker said it lost the store, in a few lines, not one per
	// attempt.
	for _, w := range ws {
		checkOutageLines(t, w.name, "across the restart", problemLines(t, w, marks[w.name], -1))
	}
	runs, completions, _ := readSide(t, side)
	rerun, unrecorded := 0, 0
	for _, id := range ids {
		j, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if j.State != engine.StateCompleted || j.Lease != nil {
			t.Errorf("job %s: %s, lease %+v; want completed with no lease", id, j.State, j.Lease)
		}
		if j.CrashAttempt != 0 || crashErrors(j) != 0 {
			t.Errorf("job %s: crash_attempt %d, errors %+v; want no crash (both processes lived)", id, j.CrashAttempt, j.Errors)
		}
		switch completions[id] {
		case 0:
			// A commit whose answer the restart cut: the store has it, the
			// worker never learnt it.
			unrecorded++
		case 1:
		default:
			t.Errorf("job %s: %d completions accepted, want one", id, completions[id])
		}
		if runs[id] > 1 {
			rerun++
		}
	}
	t.Logf("%d jobs across a server restart on 2 processes: all completed, no crash charged; %d ran twice (lease lost in the restart, released uncharged); %d completions whose answer the restart cut",
		len(ids), rerun, unrecorded)
}

// TestFaultPostgresConnectionsExhausted: another client takes every
// connection slot of a private cluster while two worker processes and
// `sluice serve` run on it. The API answers 503 (a store that does not
// answer, Retry-After), each process says so in a few log lines rather
// than one per attempt, nothing is lost, no crash is charged, and when the
// slots are freed every process recovers by itself: the jobs complete and
// the API answers 200 again.
func TestFaultPostgresConnectionsExhausted(t *testing.T) {
	skipUnlessFault(t)
	ctx := context.Background()
	c := privateCluster(t, pgcluster.Options{MaxConnections: 40})
	storeURL := c.URL()
	store, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	sluiceBin := sluiceBinary(t)
	side := filepath.Join(t.TempDir(), "side.db")
	if err := chaos.CreateSideTable(side); err != nil {
		t.Fatal(err)
	}
	const n = 4000
	queue := fmt.Sprintf("exhaust-%x", time.Now().UnixNano()&0xffffffff)
	ids := enqueueAll(t, e, sleepJobs(t, queue, 0, n, 20, 60), 0)

	port, err := pgcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1/jobs/counts?queue=%s", port, queue)
	srv := startChild(t, sluiceBin, "serve", "serve", "--store", storeURL, "--listen", "127.0.0.1:"+strconv.Itoa(port), "--log-level", "info")
	var ws []*child
	for i := range 2 {
		ws = append(ws, startWorker(t, bin, storeURL, fmt.Sprintf("exhaust-%d", i+1), "--queues", queue, "--record", side,
			"--lease", "3s", "--heartbeat", "300ms", "--log-level", "info"))
	}
	procs := append([]*child{srv}, ws...)
	alive := func() {
		for _, p := range procs {
			if p.exited() {
				t.Fatalf("%s exited: %v", p.name, p.err)
			}
		}
	}
	waitFor(t, "the API answering and a tenth of the jobs completed", 5*time.Minute, func() bool {
		alive()
		if status, _ := get(api); status != http.StatusOK {
			return false
		}
		c := countsNow(e, queue)
		return c != nil && c[engine.StateCompleted] >= n/10
	})

	// The other client takes every slot: it shuts the store's database to
	// new connections, ends the sluice processes' connections, fills every
	// slot from a database of its own and opens the store's database
	// again, so that the sluice processes are refused for want of a slot.
	marks := logMarks(procs)
	began := time.Now()
	h, err := c.Exhaust(ctx, "sluice")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	t.Logf("the other client holds %d connections of max_connections 40 (%s after it began)", h.Held(), time.Since(began).Round(time.Millisecond))

	// The outage as the API tells it: 503 with Retry-After, once the
	// server has refused it a connection (SQLSTATE 53300, too many
	// clients), not only cut the one it had.
	var body string
	waitFor(t, "the API to answer 503 for want of a connection", time.Minute, func() bool {
		alive()
		status, b := get(api)
		body = b
		return status == http.StatusServiceUnavailable && (strings.Contains(b, "53300") || strings.Contains(b, "too many clients"))
	})
	t.Logf("API during the outage: 503 %s", strings.TrimSpace(body))
	// Each process says it lost the store: at least one warning or error.
	waitFor(t, "each process to log the outage", time.Minute, func() bool {
		alive()
		for _, p := range procs {
			if len(problemLines(t, p, marks[p.name], -1)) == 0 {
				return false
			}
		}
		return true
	})
	// Past a lease: the workers must hold on to their jobs, not give them
	// up as crashed.
	time.Sleep(4 * time.Second)
	alive()
	ends := logMarks(procs)
	h.Release()
	var left map[engine.State]int64
	waitFor(t, "the test's engine to reach the store again", time.Minute, func() bool {
		left = countsNow(e, queue)
		return left != nil
	})
	t.Logf("slots freed %s after the outage began, %d of %d jobs not yet completed", time.Since(began).Round(time.Millisecond),
		n-left[engine.StateCompleted], n)

	for _, p := range procs {
		checkOutageLines(t, p.name, "during the outage", problemLines(t, p, marks[p.name], ends[p.name]))
	}

	waitFor(t, "every job completed after the slots were freed", 5*time.Minute, func() bool {
		alive()
		c := countsNow(e, queue)
		return c != nil && c[engine.StateCompleted] == n
	})
	waitFor(t, "the API answering 200 again", time.Minute, func() bool {
		status, _ := get(api)
		return status == http.StatusOK
	})
	t.Logf("every job completed and the API answers again %s after the outage began", time.Since(began).Round(time.Millisecond))
	for _, w := range ws {
		w.stop(t)
	}
	srv.stop(t)

	_, completions, _ := readSide(t, side)
	for _, id := range ids {
		j, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if j.State != engine.StateCompleted || j.Lease != nil {
			t.Errorf("job %s: %s, lease %+v; want completed with no lease", id, j.State, j.Lease)
		}
		if j.CrashAttempt != 0 || crashErrors(j) != 0 {
			t.Errorf("job %s: crash_attempt %d, errors %+v; want no crash (every process lived)", id, j.CrashAttempt, j.Errors)
		}
		if completions[id] > 1 {
			t.Errorf("job %s: %d completions accepted, want one", id, completions[id])
		}
	}
}

// maxOutageLines bounds the warnings and errors one process may log in
// one store outage: one line per outage and loop is the aim, and a process
// has a handful of loops that meet it (claims per queue, completions,
// heartbeat, maintenance tasks, operations, the listener) — not one line
// per attempt, which at the fault tests' timings is hundreds.
const maxOutageLines = 12

// enforceOutageLines makes more than maxOutageLines a failure: the
// engine reports store errors through outage.Outage, one WARN per outage
// and loop (before it, some 130 lines per worker across a 2 s restart).
const enforceOutageLines = true

// checkOutageLines holds one process's warnings and errors in one outage
// to the bound: at least one (it fails clearly), at most a few.
func checkOutageLines(t *testing.T, who, when string, lines []string) {
	t.Helper()
	t.Logf("%s logged %d warnings/errors %s; the first: %s", who, len(lines), when, first(lines))
	switch {
	case len(lines) == 0:
		t.Errorf("%s logged no warning or error %s: it must say it lost the store", who, when)
	case len(lines) > maxOutageLines && enforceOutageLines:
		t.Errorf("%s logged %d warnings/errors %s, want a few (one per outage and loop):\n%s", who, len(lines), when, strings.Join(lines, "\n"))
	case len(lines) > maxOutageLines:
		t.Logf("NOT YET KEPT (enforceOutageLines is off): %s logged %d warnings/errors %s, want one per outage and loop (at most %d)", who, len(lines), when, maxOutageLines)
	}
}

// get is a GET's status and body; 0 when no answer came.
func get(url string) (int, string) {
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		return -1, "503 without Retry-After: " + string(b)
	}
	return resp.StatusCode, string(b)
}

// logMarks are the sizes of the processes' logs now.
func logMarks(ps []*child) map[string]int64 {
	m := map[string]int64{}
	for _, p := range ps {
		if fi, err := os.Stat(p.logPath); err == nil {
			m[p.name] = fi.Size()
		}
	}
	return m
}

var problemRx = regexp.MustCompile(`level=(WARN|ERROR)`)

// problemLines are the warnings and errors in p's log between two
// offsets (to < 0: the end).
func problemLines(t *testing.T, p *child, from, to int64) []string {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if to < 0 || to > int64(len(b)) {
		to = int64(len(b))
	}
	var out []string
	for _, l := range strings.Split(string(b[min(from, to):to]), "\n") {
		if problemRx.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

func first(ls []string) string {
	if len(ls) == 0 {
		return "(none)"
	}
	return ls[0]
}
