package cli_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
)

// TestFaultFourProcesses: four worker processes (testworker, each with its
// handler runs and fenced writes recorded in a side table of its own
// SQLite file) share 10,000 jobs on one store; one is killed with SIGKILL
// mid-run. Every job completes exactly once — one accepted completion in
// the side table and completed in the store — none is lost, and the other
// three reclaim the dead process's leases: each job it held is charged
// exactly one crash and runs again elsewhere, and no job it did not hold
// is charged anything.
//
// On each store a URL can name (storeCases): SQLite, PostgreSQL,
// PostgreSQL through PgBouncer, and Redis (a namespace of the test's own). SLUICE_FOURPROC_JOBS=100000 makes the
// one-off larger run; the test logs its rate (jobs/s) as a figure, never
// asserts one.
func TestFaultFourProcesses(t *testing.T) {
	skipUnlessFault(t)
	n := 10000
	if s := os.Getenv("SLUICE_FOURPROC_JOBS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 100 {
			t.Fatalf("SLUICE_FOURPROC_JOBS=%q: want a number of jobs, at least 100", s)
		}
		n = v
	}
	for _, sc := range append(storeCases(), redisStoreCase()) {
		t.Run(sc.name, func(t *testing.T) {
			fourProcesses(t, sc.url(t), n)
		})
	}
}

func fourProcesses(t *testing.T, storeURL string, n int) {
	ctx := context.Background()
	store, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	side := filepath.Join(t.TempDir(), "side.db")
	if err := chaos.CreateSideTable(side); err != nil {
		t.Fatal(err)
	}
	queue := fmt.Sprintf("four-%x", time.Now().UnixNano()&0xffffffff)
	ids := enqueueBatched(t, e, queue, n)

	// A lease of 3 s renewed every 300 ms: a loaded machine does not lose
	// a live process's lease, so a second run is the kill's doing.
	// On Redis each handler run is also counted in a side key of the
	// test's namespace (testworker --count-redis), a second account.
	var count []string
	if strings.HasPrefix(storeURL, "redis://") {
		count = []string{"--count-redis", storeURL}
	}
	// The victim's handlers block while hold exists (testworker
	// --hold-file), so that the kill lands with jobs surely held: no-op
	// handlers otherwise finish all the victim holds between a look and
	// the kill, and then the kill proves nothing.
	hold := filepath.Join(t.TempDir(), "hold")
	const concurrency = 8
	start := func(name string, extra ...string) *child {
		args := append([]string{"--queues", queue, "--record", side, "--concurrency", strconv.Itoa(concurrency),
			"--lease", "3s", "--heartbeat", "300ms", "--log-level", "info"}, count...)
		return startWorker(t, bin, storeURL, name, append(args, extra...)...)
	}
	t0 := time.Now()
	ws := []*child{start("four-1", "--hold-file", hold), start("four-2"), start("four-3"), start("four-4")}
	victim := ws[0]
	alive := func() {
		for _, w := range ws {
			if w.exited() {
				t.Fatalf("%s exited early: %v", w.name, w.err)
			}
		}
	}

	// Mid-run: at least a fifth done; then the victim is held until each
	// of its workers is inside a job.
	waitFor(t, "the run to be under way", 5*time.Minute, func() bool {
		alive()
		return counts(t, e, queue)[engine.StateCompleted] >= int64(n/5)
	})
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("%s to hold %d jobs", victim.name, concurrency), time.Minute, func() bool {
		alive()
		return len(runningUnder(t, e, store, queue, victim.name)) >= concurrency
	})
	victim.kill(t)
	// What the store shows running under the victim's leases once it is
	// gone. On SQLite that is all it held: its writes died with it. A
	// server may still finish a statement the victim sent before it died —
	// a claim (more jobs under its lease) or a completion (one fewer) —
	// so on PostgreSQL and Redis the jobs it held are those the reaper charged, and
	// the snapshot differs from them only by such statements.
	snap := runningUnder(t, e, store, queue, victim.name)
	atKill := counts(t, e, queue)[engine.StateCompleted]
	t.Logf("killed %s with %d jobs running under its leases, %d of %d completed", victim.name, len(snap), atKill, n)

	waitFor(t, "every job completed", 5*time.Minute+time.Duration(n)*20*time.Millisecond, func() bool {
		for _, w := range ws[1:] {
			if w.exited() {
				t.Fatalf("%s exited: %v", w.name, w.err)
			}
		}
		return counts(t, e, queue)[engine.StateCompleted] == int64(n)
	})
	took := time.Since(t0)
	for _, w := range ws[1:] {
		w.stop(t)
	}

	// The side table: each handler run, and the completions the store
	// accepted, by job.
	runs, completions, lastRun := readSide(t, side)
	c := counts(t, e, queue)
	for _, st := range engine.AllStates {
		if st != engine.StateCompleted && c[st] != 0 {
			t.Errorf("%d jobs %s after the run, want none", c[st], st)
		}
	}
	held := map[string]bool{}
	var rerun, unrecorded, lateClaims, lateCompletions int
	for _, id := range ids {
		j, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if j.State != engine.StateCompleted || j.Lease != nil {
			t.Errorf("job %s: %s, lease %+v; want completed with no lease", id, j.State, j.Lease)
		}
		switch completions[id] {
		case 1:
		case 0:
			// The victim's completion committed and the victim died before
			// writing the side-table row: only its jobs may lack one.
			unrecorded++
			if lastRun[id].process != victim.name {
				t.Errorf("job %s: no accepted completion recorded, and its last run was in %s, which lived", id, lastRun[id].process)
			}
		default:
			t.Errorf("job %s: %d completions accepted, want exactly one", id, completions[id])
		}
		if runs[id] == 0 {
			t.Errorf("job %s: completed, and its handler never recorded a run", id)
		}
		if runs[id] > 1 {
			rerun++
		}
		// Every crash on record is the victim's, charged by a living
		// process's reaper: no process that lived is charged anything.
		for _, er := range j.Errors {
			if !er.Crash {
				continue
			}
			if m := reapedRx.FindStringSubmatch(er.Message); m == nil || incarnationOf(m[1]) != victim.name {
				t.Errorf("job %s: a crash not charged for the killed %s: %+v", id, victim.name, er)
			}
			held[id] = true
		}
		switch {
		case held[id]:
			if j.CrashAttempt != 1 || crashErrors(j) != 1 {
				t.Errorf("job %s was held by the killed process: crash_attempt %d, %d crash errors; want one crash", id, j.CrashAttempt, crashErrors(j))
			}
			if lr := lastRun[id]; lr.process == victim.name || lr.crashAttempt != 1 {
				t.Errorf("job %s was held by the killed process: its last run was in %s at crash_attempt %d; want another process, after the crash", id, lr.process, lr.crashAttempt)
			}
			if !snap[id] {
				lateClaims++
			}
		case snap[id]:
			// Running under the victim's lease after its death, and never
			// charged: the victim's completion of it landed late.
			lateCompletions++
			if lr := lastRun[id]; lr.process != victim.name || j.CrashAttempt != 0 {
				t.Errorf("job %s ran under the killed process's lease at its death and was not charged a crash; its last run: %s at crash_attempt %d", id, lr.process, j.CrashAttempt)
			}
		case j.CrashAttempt != 0:
			t.Errorf("job %s: crash_attempt %d, and no crash on record", id, j.CrashAttempt)
		}
	}
	if len(held) == 0 {
		t.Errorf("the kill of %s charged no crash: no lease of its was reclaimed", victim.name)
	}
	if count != nil {
		checkRedisRuns(t, storeURL, side, victim.name, ids, runs)
	}
	if strings.HasPrefix(storeURL, "sqlite:") && (lateClaims > 0 || lateCompletions > 0) {
		t.Errorf("SQLite: %d claims and %d completions of the killed process landed after its death", lateClaims, lateCompletions)
	}
	t.Logf("%d jobs on 4 processes (one killed) in %s: %.0f jobs/s; %d held by the killed process, each charged one crash and run again elsewhere "+
		"(%d of them claimed by a statement the server finished after the kill), %d completed by such a statement; %d ran more than once; %d completions unrecorded (the victim's last)",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), len(held), lateClaims, lateCompletions, rerun, unrecorded)
}

// incarnationOf is the --worker-id a worker id was started with: the
// engine adds /<8 hex> per incarnation.
func incarnationOf(workerID string) string {
	if i := strings.LastIndexByte(workerID, '/'); i >= 0 {
		return workerID[:i]
	}
	return workerID
}

// reapedRx is a crash the reaper charged: the worker whose heartbeat
// stopped.
var reapedRx = regexp.MustCompile(`worker (\S+) stopped heartbeating`)

// sleepJobs are n chaos.sleep jobs of lo..hi ms on queue, numbered from
// first, each payload its own (so each its own fingerprint), each with an
// id of its own, so that enqueueing them again is harmless.
func sleepJobs(t *testing.T, queue string, first, n, lo, hi int) []engine.EnqueueParams {
	t.Helper()
	r := rand.New(rand.NewPCG(17, uint64(first)))
	ps := make([]engine.EnqueueParams, n)
	for i := range ps {
		id, err := uuid.NewV7()
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = engine.EnqueueParams{ID: id.String(), Queue: queue, Kind: chaos.KindSleep,
			Args: chaos.Sleep{MS: lo + r.IntN(hi-lo+1), N: first + i, Run: queue}}
	}
	return ps
}

// enqueueAll enqueues ps in batches of 1,000. A batch that fails is sent
// again (the ids make that harmless) until retryFor has passed: a store
// that is coming back is given that long.
func enqueueAll(t *testing.T, e *engine.Engine, ps []engine.EnqueueParams, retryFor time.Duration) []string {
	t.Helper()
	ids := make([]string, 0, len(ps))
	for len(ids) < len(ps) {
		batch := ps[len(ids):min(len(ps), len(ids)+1000)]
		deadline := time.Now().Add(retryFor)
		for {
			res, err := e.EnqueueMany(context.Background(), batch)
			if err == nil {
				for _, x := range res {
					if x.Err != nil {
						err = x.Err
					}
				}
			}
			if err == nil {
				for _, x := range res {
					ids = append(ids, x.Job.ID)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("enqueue %d jobs: %v", len(batch), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return ids
}

// enqueueBatched enqueues n chaos.sleep jobs of 0-20 ms on queue. A batch
// is sent again for up to a minute: a shared server busy with other
// tests' work (a cleanup's SCAN of a large keyspace) can time a batch out,
// and the ids make sending it again harmless.
func enqueueBatched(t *testing.T, e *engine.Engine, queue string, n int) []string {
	t.Helper()
	return enqueueAll(t, e, sleepJobs(t, queue, 0, n, 0, 20), time.Minute)
}

// counts are the queue's jobs by state, from the maintained counters.
func counts(t *testing.T, e *engine.Engine, queue string) map[engine.State]int64 {
	t.Helper()
	c, err := e.Counts(context.Background(), queue)
	if err != nil {
		t.Fatalf("counts: %v", err)
	}
	return c.Total
}

// runningUnder are the queue's jobs running under a lease of worker.
func runningUnder(t *testing.T, e *engine.Engine, store backend.Store, queue, worker string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	out := map[string]bool{}
	p := engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateRunning}, Queues: []string{queue}}, Limit: 200}
	for {
		page, err := e.ListJobs(ctx, p)
		if err != nil {
			t.Fatalf("list running jobs: %v", err)
		}
		for _, s := range page.Jobs {
			j, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: s.ID})
			if err != nil {
				t.Fatalf("job %s: %v", s.ID, err)
			}
			if j.State == engine.StateRunning && j.Lease != nil && strings.HasPrefix(j.Lease.WorkerID, worker+"/") {
				out[j.ID] = true
			}
		}
		if page.Next == "" {
			return out
		}
		p.Cursor = page.Next
	}
}

type sideRun struct {
	process      string
	crashAttempt int
}

// readSide reads the side table: handler runs by job, completions the
// store accepted by job, and each job's last run.
func readSide(t *testing.T, path string) (runs, completions map[string]int, last map[string]sideRun) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, completions, last = map[string]int{}, map[string]int{}, map[string]sideRun{}
	rows, err := db.Query(`SELECT job_id, process, crash_attempt FROM executions ORDER BY at_ns, rowid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var r sideRun
		if err := rows.Scan(&id, &r.process, &r.crashAttempt); err != nil {
			t.Fatal(err)
		}
		runs[id]++
		last[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	rows, err = db.Query(`SELECT job_id, count(*) FROM writes WHERE op = ? AND accepted = 1 GROUP BY job_id`, chaos.OpComplete)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var k int
		if err := rows.Scan(&id, &k); err != nil {
			t.Fatal(err)
		}
		completions[id] = k
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return runs, completions, last
}

// checkRedisRuns holds the side key's count of handler runs
// ({NS}:side:runs, written by testworker --count-redis) to the side
// table's: equal for every job, but one fewer where the killed process
// ran the job (it may have died between the two records); every job
// counted at least once.
func checkRedisRuns(t *testing.T, storeURL, side, victim string, ids []string, runs map[string]int) {
	t.Helper()
	tg, err := redis.ParseURL(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(tg.Options)
	defer c.Close()
	m, err := c.HGetAll(context.Background(), "{"+tg.Namespace+"}:side:runs").Result()
	if err != nil {
		t.Fatal(err)
	}
	byVictim := map[string]bool{}
	db, err := sql.Open("sqlite", side)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT DISTINCT job_id FROM executions WHERE process = ?`, victim)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		byVictim[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	once, short := 0, 0
	for _, id := range ids {
		k, _ := strconv.Atoi(m[id])
		switch {
		case k == runs[id]:
		case k == runs[id]-1 && byVictim[id]:
			short++
		default:
			t.Errorf("job %s: the side key counts %d handler runs, the side table %d", id, k, runs[id])
		}
		if k == 0 {
			t.Errorf("job %s: completed, and the side key counts no handler run", id)
		}
		if k == 1 {
			once++
		}
	}
	if len(m) != len(ids) {
		t.Errorf("the side key counts runs of %d jobs, want %d", len(m), len(ids))
	}
	t.Logf("side key: %d of %d jobs run exactly once; %d runs of the killed process counted in the side table only", once, len(ids), short)
}
