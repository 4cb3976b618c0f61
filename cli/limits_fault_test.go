package cli_test

// Limits across processes: worker processes (testworker limited) share
// one store under a limit the test sets, and each handler run is recorded
// in a side table the test reads (internal/testworker/limited.go): when
// it began and ended by the process's clock, when the store says it was
// claimed, and every claim each process sent. The tests hold the side
// table to the limit — a model of what may happen, not what the engine
// says happened — and each shows its checker failing on a run without
// the limit.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/redisserver"
)

// kindLimited is the kind testworker limited runs (its KindLimited).
const kindLimited = "limits.run"

// limitedPoll is the workers' poll interval, which bounds their claims
// while every job they could take is held back (TestFaultLimitsBulkRedrive).
const limitedPoll = 50 * time.Millisecond

// limitRun is one handler run in the side table; end 0: its process died
// in it.
type limitRun struct {
	job, process     string
	attempted, start int64
	end              int64
	cancelled        bool
}

// limitClaim is one JobClaim a process sent (took ≥ 0) or one wake-up its
// store handed it (took -1).
type limitClaim struct {
	process string
	at      int64
	took    int
}

// readLimitSide reads the runs and claims of testworker limited's side
// table.
func readLimitSide(t *testing.T, path string) ([]limitRun, []limitClaim) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var runs []limitRun
	rows, err := db.Query(`SELECT job_id, process, attempted_ns, start_ns, coalesce(end_ns, 0), cancelled FROM lruns`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r limitRun
		if err := rows.Scan(&r.job, &r.process, &r.attempted, &r.start, &r.end, &r.cancelled); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	var claims []limitClaim
	rows, err = db.Query(`SELECT process, at_ns, took FROM lclaims ORDER BY at_ns`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c limitClaim
		if err := rows.Scan(&c.process, &c.at, &c.took); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return runs, claims
}

// mostAtOnce is the most runs in progress at one moment, and that
// moment, counting only runs that begin at or after from. A run without
// an end (its process was killed) lasts until diedAt[process], the
// moment the test saw the process gone: later than it truly ended,
// never earlier; one whose process lives lasts until now (a read while
// the run goes on), or is an error when now is 0 (every live process has
// stopped and so ended its runs). At equal times an end comes before a start: the store
// frees a slot only after the handler in it has returned, so a start at
// the same instant is the next job.
func mostAtOnce(t *testing.T, runs []limitRun, from, now int64, diedAt map[string]int64) (int, time.Time) {
	t.Helper()
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	for _, r := range runs {
		if r.start < from {
			continue
		}
		end := r.end
		if end == 0 {
			d, ok := diedAt[r.process]
			if !ok && now > 0 {
				d, ok = now, true
			}
			if !ok {
				t.Errorf("job %s: its run in %s has no end, and that process was not killed", r.job, r.process)
				continue
			}
			end = d
		}
		evs = append(evs, ev{r.start, 1}, ev{end, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta
	})
	in, most := 0, 0
	var at int64
	for _, e := range evs {
		in += e.delta
		if in > most {
			most, at = in, e.at
		}
	}
	return most, time.Unix(0, at)
}

// limitedJobs are n KindLimited jobs of lo..hi ms on queue, each with an
// id of its own, so that sending a batch again is harmless.
func limitedJobs(t *testing.T, queue string, n, lo, hi int) []engine.EnqueueParams {
	t.Helper()
	ps := make([]engine.EnqueueParams, n)
	for i := range ps {
		id, err := uuid.NewV7()
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = engine.EnqueueParams{ID: id.String(), Queue: queue, Kind: kindLimited,
			Args: map[string]int{"ms": lo + i*7919%(hi-lo+1), "n": i}}
	}
	return ps
}

// startLimited starts testworker limited on queue, recording in side.
func startLimited(t *testing.T, bin, storeURL, name, queue, side string, extra ...string) *child {
	t.Helper()
	args := append([]string{"limited", "--store", storeURL, "--worker-id", name, "--queue", queue, "--side", side,
		"--poll", limitedPoll.String()}, extra...)
	return startChild(t, bin, name, args...)
}

// limitStoreCase is a store for the limits fault tests, and how to
// restart its server (nil: SQLite, no server).
type limitStoreCase struct {
	name string
	url  func(t *testing.T) (string, func(ctx context.Context) error)
}

// limitStoreCases: a SQLite file; a private PostgreSQL cluster and a
// private redis-server (AOF, appendfsync always), which the concurrency
// test restarts under the workers. Private servers, never the shared
// ones: a restart must not cut another test's connections.
func limitStoreCases() []limitStoreCase {
	return []limitStoreCase{
		{"sqlite", func(t *testing.T) (string, func(context.Context) error) {
			return storeCases()[0].url(t), nil
		}},
		{"postgres", func(t *testing.T) (string, func(context.Context) error) {
			c := privateCluster(t, pgcluster.Options{})
			return c.URL(), func(ctx context.Context) error {
				if err := c.Stop(ctx); err != nil {
					return err
				}
				time.Sleep(2 * time.Second)
				return c.Resume(ctx)
			}
		}},
		{"redis", func(t *testing.T) (string, func(context.Context) error) {
			srv := redisserver.Private(t, redisserver.Options{AppendFsync: "always"})
			return srv.URL() + "?ns=limits", func(ctx context.Context) error {
				if err := srv.Stop(ctx); err != nil {
					return err
				}
				time.Sleep(2 * time.Second)
				return srv.Resume(ctx)
			}
		}},
	}
}

// TestFaultLimitsConcurrency: four worker processes of 8 slots each run
// a kind limited to 3. One process is held until it has the limit's three
// slots, then killed with SIGKILL; on PostgreSQL and Redis the server is
// then restarted (stopped, two seconds down, started again). The side
// table never shows more than three handlers at once, the killed
// process's runs counted as running until it was seen dead; the dead
// process's slots come free once the reaper takes its expired leases, and
// the three others run three at once again; every job completes, with
// exactly one completion the store accepted.
//
// The handlers honour their context: one that ran on after losing its
// lease is the documented way past a limit, not tested here. The lease
// (5 s) outlasts the restart's two seconds, so the restart costs no
// lease; the kill costs the victim's.
//
// "unlimited" runs the same on SQLite with no limit set and the kill and
// its wait left out, and requires the checker to see more than three at
// once: the check can fail.
func TestFaultLimitsConcurrency(t *testing.T) {
	skipUnlessFault(t)
	for _, sc := range limitStoreCases() {
		t.Run(sc.name, func(t *testing.T) {
			url, restart := sc.url(t)
			limitsConcurrency(t, url, restart, true)
		})
	}
	t.Run("unlimited", func(t *testing.T) {
		url, _ := limitStoreCases()[0].url(t)
		limitsConcurrency(t, url, nil, false)
	})
}

func limitsConcurrency(t *testing.T, storeURL string, restart func(context.Context) error, limit bool) {
	ctx := context.Background()
	const n, most, slots = 300, 3, 8
	store, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	side := filepath.Join(t.TempDir(), "side.db")
	if err := chaos.CreateSideTable(side); err != nil {
		t.Fatal(err)
	}
	queue := fmt.Sprintf("limits-%x", time.Now().UnixNano()&0xffffffff)
	if limit {
		if err := e.SetLimit(ctx, engine.Limit{Scope: engine.LimitKind, Name: kindLimited, Concurrency: most}); err != nil {
			t.Fatal(err)
		}
	}
	ids := enqueueAll(t, e, limitedJobs(t, queue, n, 20, 60), 0)
	hold := filepath.Join(t.TempDir(), "hold")
	start := func(name string, extra ...string) *child {
		return startLimited(t, bin, storeURL, name, queue, side,
			append([]string{"--concurrency", strconv.Itoa(slots), "--lease", "5s"}, extra...)...)
	}
	t0 := time.Now()
	ws := []*child{start("lim-1", "--hold-file", hold), start("lim-2"), start("lim-3"), start("lim-4")}
	victim := ws[0]
	alive := func(ws []*child) {
		for _, w := range ws {
			if w.exited() {
				t.Fatalf("%s exited: %v", w.name, w.err)
			}
		}
	}
	completed := func() int64 {
		c := countsNow(e, queue)
		if c == nil {
			return -1 // the store is restarting
		}
		return c[engine.StateCompleted]
	}
	waitFor(t, "a fifth of the jobs completed", 2*time.Minute, func() bool {
		alive(ws)
		return completed() >= n/5
	})
	if !limit {
		// No limit to hold slots of: let the run end and show the checker
		// what an unlimited kind does.
		waitFor(t, "every job completed", 2*time.Minute, func() bool { alive(ws); return completed() == n })
		for _, w := range ws {
			w.stop(t)
		}
		runs, _ := readLimitSide(t, side)
		if m, _ := mostAtOnce(t, runs, 0, 0, nil); m <= most {
			t.Fatalf("without a limit at most %d ran at once: the checker cannot tell an unlimited kind from a limit of %d", m, most)
		} else {
			t.Logf("without a limit %d ran at once: the checker fails such a run (limit %d)", m, most)
		}
		return
	}

	// The victim's handlers now block until it dies: it keeps every slot
	// it claims, and once the others' jobs end it holds the limit's three.
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("%s to hold the limit's %d slots", victim.name, most), time.Minute, func() bool {
		alive(ws)
		return len(runningUnder(t, e, store, queue, victim.name)) == most
	})
	victim.kill(t)
	killed := time.Now()
	diedAt := map[string]int64{victim.name: killed.UnixNano()}
	atKill := completed()
	t.Logf("killed %s holding %d slots of %d, %d of %d jobs completed", victim.name, most, most, atKill, n)

	// Its slots come free when the reaper takes its jobs back, once their
	// leases have expired; until then nothing of the kind runs.
	waitFor(t, fmt.Sprintf("%s's jobs reaped", victim.name), time.Minute, func() bool {
		alive(ws[1:])
		return len(runningUnder(t, e, store, queue, victim.name)) == 0
	})
	reaped := time.Now()
	t.Logf("%s's jobs reaped %s after the kill", victim.name, reaped.Sub(killed).Round(time.Millisecond))
	// And the three others run at the limit again: three at once, in runs
	// begun after the reap.
	waitFor(t, fmt.Sprintf("the others to run %d at once after the reap", most), time.Minute, func() bool {
		alive(ws[1:])
		runs, _ := readLimitSide(t, side)
		m, _ := mostAtOnce(t, runs, reaped.UnixNano(), time.Now().UnixNano(), diedAt)
		return m == most || completed() == n
	})
	if restart != nil {
		atRestart := completed()
		if err := restart(ctx); err != nil {
			t.Fatal(err)
		}
		alive(ws[1:])
		t.Logf("server restarted with %d of %d jobs completed", atRestart, n)
	}
	waitFor(t, "every job completed", 3*time.Minute, func() bool {
		alive(ws[1:])
		return completed() == n
	})
	took := time.Since(t0)
	for _, w := range ws[1:] {
		w.stop(t)
	}

	runs, _ := readLimitSide(t, side)
	m, at := mostAtOnce(t, runs, 0, 0, diedAt)
	if m > most {
		t.Errorf("%d handlers ran at once (at %s) under a limit of %d", m, at.Format(time.RFC3339Nano), most)
	}
	after, _ := mostAtOnce(t, runs, reaped.UnixNano(), 0, diedAt)
	if after != most {
		t.Errorf("after the reap at most %d ran at once, want the limit's %d: the dead process's slots did not come free", after, most)
	}
	ok := map[string]int{}
	cancelled, victimRuns := 0, 0
	for _, r := range runs {
		switch {
		case r.end == 0:
			victimRuns++
		case r.cancelled:
			cancelled++
		default:
			ok[r.job]++
		}
	}
	if victimRuns < most {
		t.Errorf("%d runs without an end in the side table, want at least the %d %s held", victimRuns, most, victim.name)
	}
	_, completions, lastRun := readSide(t, side)
	unrecorded := 0
	for _, id := range ids {
		j, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if j.State != engine.StateCompleted || j.Lease != nil {
			t.Errorf("job %s: %s, lease %+v; want completed with no lease", id, j.State, j.Lease)
		}
		if ok[id] == 0 {
			t.Errorf("job %s: completed, and no handler run of it ended in the side table", id)
		}
		switch completions[id] {
		case 1:
		case 0:
			// A completion the store committed and whose answer the
			// restart cut, or the victim's last: never on SQLite without
			// a restart, but for the victim's.
			unrecorded++
			if restart == nil && lastRun[id].process != victim.name {
				t.Errorf("job %s: no accepted completion recorded", id)
			}
		default:
			t.Errorf("job %s: %d completions accepted, want exactly one", id, completions[id])
		}
	}
	t.Logf("%d jobs on 4 processes (one killed holding %d slots) in %s: at most %d ran at once (limit %d), %d at once after the reap; "+
		"%d runs ended by a cancelled context, %d completions whose answer was cut",
		n, most, took.Round(time.Millisecond), m, most, after, cancelled, unrecorded)
}

// TestFaultLimitsRate: three worker processes run 40 jobs of a kind
// limited to 10 starts a second. By the store's clock (each job's
// attempted_at, the clock the limit counts by, the same for every
// process) no window of one second holds more than 10 starts: tolerance
// none. Every window is checked, each beginning at a start (the window a
// start could break first). The handlers' own clocks (one machine, one
// clock) see the starts later, each after its claim by the time it took
// to reach a slot, so their count per window may exceed the rate; it is
// logged, not held to it.
//
// "unlimited" runs the same on SQLite with no limit and requires the
// check to fail.
func TestFaultLimitsRate(t *testing.T) {
	skipUnlessFault(t)
	for _, sc := range limitStoreCases() {
		t.Run(sc.name, func(t *testing.T) {
			url, _ := sc.url(t)
			limitsRate(t, url, true)
		})
	}
	t.Run("unlimited", func(t *testing.T) {
		url, _ := limitStoreCases()[0].url(t)
		limitsRate(t, url, false)
	})
}

func limitsRate(t *testing.T, storeURL string, limit bool) {
	ctx := context.Background()
	const n, rate = 40, 10
	_, e := urlSetup(t, storeURL)
	bin := testWorkerBinary(t)
	side := filepath.Join(t.TempDir(), "side.db")
	if err := chaos.CreateSideTable(side); err != nil {
		t.Fatal(err)
	}
	queue := fmt.Sprintf("rate-%x", time.Now().UnixNano()&0xffffffff)
	if limit {
		if err := e.SetLimit(ctx, engine.Limit{Scope: engine.LimitKind, Name: kindLimited, Rate: rate, RateWindow: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	var ws []*child
	for i := range 3 {
		ws = append(ws, startLimited(t, bin, storeURL, fmt.Sprintf("rate-%d", i+1), queue, side, "--concurrency", "8"))
	}
	t0 := time.Now()
	enqueueAll(t, e, limitedJobs(t, queue, n, 0, 5), 0)
	waitFor(t, "every job completed", 2*time.Minute, func() bool {
		for _, w := range ws {
			if w.exited() {
				t.Fatalf("%s exited: %v", w.name, w.err)
			}
		}
		c := countsNow(e, queue)
		return c != nil && c[engine.StateCompleted] == n
	})
	took := time.Since(t0)
	for _, w := range ws {
		w.stop(t)
	}
	runs, _ := readLimitSide(t, side)
	if len(runs) != n {
		t.Fatalf("%d handler runs in the side table, want %d (one each: no process died)", len(runs), n)
	}
	var byStore, byHandler []int64
	procs := map[string]int{}
	var lag int64
	for _, r := range runs {
		byStore = append(byStore, r.attempted)
		byHandler = append(byHandler, r.start)
		procs[r.process]++
		lag = max(lag, r.start-r.attempted)
	}
	inStore, atStore := mostInWindow(byStore, time.Second)
	inHandler, _ := mostInWindow(byHandler, time.Second)
	if !limit {
		if inStore <= rate {
			t.Fatalf("without a limit at most %d started in a second: the checker cannot tell an unlimited kind from a rate of %d", inStore, rate)
		}
		t.Logf("without a limit %d started in one second: the checker fails such a run (rate %d/s)", inStore, rate)
		return
	}
	if inStore > rate {
		t.Errorf("%d starts by the store's clock in the second from %s, under a rate of %d a second", inStore, atStore.Format(time.RFC3339Nano), rate)
	}
	if len(procs) < 2 {
		t.Errorf("the jobs started in %d process(es), want several: %v", len(procs), procs)
	}
	t.Logf("%d jobs on 3 processes %v in %s: at most %d starts in any second by the store's clock (rate %d/s), %d by the handlers' clock, "+
		"whose entry lagged its claim by up to %s", n, procs, took.Round(time.Millisecond), inStore, rate, inHandler, time.Duration(lag).Round(time.Millisecond))
}

// mostInWindow is the most times of ts in any window [t, t+w), t one of
// them, and that window's start.
func mostInWindow(ts []int64, w time.Duration) (int, time.Time) {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	most, at := 0, int64(0)
	j := 0
	for i := range ts {
		for j < len(ts) && ts[j]-ts[i] < int64(w) {
			j++
		}
		if j-i > most {
			most, at = j-i, ts[i]
		}
	}
	return most, time.Unix(0, at)
}
