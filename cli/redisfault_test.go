package cli_test

// Redis fault tests at the worker-process level: the workers' connections
// cut with CLIENT KILL (on the shared server, only connections named after
// the test's own namespace) and a private redis-server of the test's own
// (backend/redis/redisserver.Private, AOF on) restarted under running
// workers, never the shared server.

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
	"github.com/sluicehq/sluice/internal/redisserver"
)

// redisStoreCase is Redis for the store-URL fault tests: a namespace of
// the test's own on the shared server, whose keys go with the test.
func redisStoreCase() storeCase {
	return storeCase{"redis", func(t *testing.T) string { return redistest.URL(t) }}
}

// redisClientName is the name a store URL's connections carry in CLIENT
// LIST (the backend names them after the namespace).
func redisClientName(t *testing.T, storeURL string) string {
	t.Helper()
	tg, err := redis.ParseURL(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	return tg.Options.ClientName
}

// TestFaultRedisRestart: a private redis-server (AOF, appendfsync
// always) is stopped under two worker processes and started again two
// seconds later, once with a SHUTDOWN (SIGTERM) and once with SIGKILL.
// The workers and the test's own engine reconnect by themselves; the AOF
// gives back every write the server acknowledged, so jobs enqueued before
// and after the restart all complete, exactly once each, none is left
// running, and no crash is charged — both processes lived.
func TestFaultRedisRestart(t *testing.T) {
	skipUnlessFault(t)
	for _, tc := range []struct {
		name string
		kill bool
	}{{"sigterm", false}, {"sigkill", true}} {
		t.Run(tc.name, func(t *testing.T) { redisRestart(t, tc.kill) })
	}
}

func redisRestart(t *testing.T, kill bool) {
	ctx := context.Background()
	srv := redisserver.Private(t, redisserver.Options{AppendFsync: "always"})
	storeURL := srv.URL() + "?ns=restart"
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

	// Two seconds without a server: past heartbeats, short of the lease.
	marks := logMarks(ws)
	atStop := countsNow(e, queue)
	halt := srv.Stop
	if kill {
		halt = srv.Kill
	}
	if err := halt(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	alive()
	t.Logf("server restarted (kill %v) with %d of %d jobs completed, %d running", kill, atStop[engine.StateCompleted], before, atStop[engine.StateRunning])
	ids = append(ids, enqueueAll(t, e, sleepJobs(t, queue, before, after, 5, 40), time.Minute)...)

	waitFor(t, "every job completed after the restart", 5*time.Minute, func() bool {
		alive()
		c := countsNow(e, queue)
		return c != nil && c[engine.StateCompleted] == before+after
	})
	for _, w := range ws {
		w.stop(t)
	}
	for _, w := range ws {
		checkOutageLines(t, w.name, "across the restart", problemLines(t, w, marks[w.name], -1))
	}
	checkLivedThrough(t, store, ids, side, "both processes lived")
}

// checkLivedThrough holds jobs whose processes all lived through a store
// fault to it: each completed with no lease, no crash charged, at most
// one accepted completion in the side table. It logs the reruns.
func checkLivedThrough(t *testing.T, store backend.Store, ids []string, side, why string) {
	t.Helper()
	ctx := context.Background()
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
			t.Errorf("job %s: crash_attempt %d, errors %+v; want no crash (%s)", id, j.CrashAttempt, j.Errors, why)
		}
		switch completions[id] {
		case 0:
			// A script that ran but whose answer the fault cut: the store
			// has it, the worker never learnt it.
			unrecorded++
		case 1:
		default:
			t.Errorf("job %s: %d completions accepted, want one", id, completions[id])
		}
		if runs[id] == 0 {
			t.Errorf("job %s: completed, and its handler never recorded a run", id)
		}
		if runs[id] > 1 {
			rerun++
		}
	}
	t.Logf("%d jobs: all completed, no crash charged; %d ran more than once (a lease lost with an answer, released uncharged); %d completions whose answer was cut",
		len(ids), rerun, unrecorded)
}

// TestFaultRedisClientKill: two worker processes on the shared Redis (a
// namespace of the test's own) have every connection of theirs ended with
// CLIENT KILL, again and again, while they work 3,000 jobs. Only
// connections named after the test's namespace are killed — never another
// test's, never the asking one (the test's own engine shares the name and
// copes: its reads and enqueues are repeated). The workers reconnect by
// themselves; every job completes once, none is left running, no crash is
// charged.
func TestFaultRedisClientKill(t *testing.T) {
	skipUnlessFault(t)
	ctx := context.Background()
	base := redistest.ServerURL(t)
	storeURL := redistest.URL(t)
	store, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	side := filepath.Join(t.TempDir(), "side.db")
	if err := chaos.CreateSideTable(side); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	queue := fmt.Sprintf("kill-%x", time.Now().UnixNano()&0xffffffff)
	ids := enqueueAll(t, e, sleepJobs(t, queue, 0, n, 5, 40), 0)
	var ws []*child
	for i := range 2 {
		ws = append(ws, startWorker(t, bin, storeURL, fmt.Sprintf("kill-%d", i+1), "--queues", queue, "--record", side,
			"--lease", "3s", "--heartbeat", "300ms", "--log-level", "info"))
	}
	name := redisClientName(t, storeURL)
	kills, rounds := 0, 0
	var last time.Time
	waitFor(t, "every job completed under CLIENT KILL", 5*time.Minute, func() bool {
		for _, w := range ws {
			if w.exited() {
				t.Fatalf("%s exited: %v", w.name, w.err)
			}
		}
		c := countsNow(e, queue)
		if c != nil && c[engine.StateCompleted] == n {
			return true
		}
		// A round of kills every 300 ms once the run is under way: often
		// enough to meet claims, completions and heartbeats in flight,
		// seldom enough that work goes on between rounds.
		if c != nil && c[engine.StateCompleted] > 0 && time.Since(last) > 300*time.Millisecond {
			last = time.Now()
			k, err := redisserver.KillClients(ctx, base, name)
			if err != nil {
				t.Fatal(err)
			}
			kills += k
			rounds++
		}
		return false
	})
	for _, w := range ws {
		w.stop(t)
	}
	if kills == 0 {
		t.Fatal("no connection was killed")
	}
	t.Logf("%d connections of the workers killed in %d rounds", kills, rounds)
	checkLivedThrough(t, store, ids, side, "both processes lived")
}
