package cli_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// TestFaultChaos is the chaos harness: real `testworker worker` processes on
// one SQLite file work a stream of jobs while, at random moments, one is
// killed with SIGKILL (and replaced), frozen with SIGSTOP past its lease
// and then thawed (a zombie that wakes up holding stale leases), or
// stopped with SIGTERM (and replaced); or the store is locked against
// every writer for longer than a lease, as a store that goes away and
// comes back. Afterwards every job must be
// completed (a completion is fenced: a job completes once), each crash
// must be on the job's record, the counters must agree with the jobs,
// and no job may be left running or holding a lease.
//
// SLUICE_CHAOS_SEED fixes the random choices (a failure prints its seed);
// SLUICE_CHAOS_DURATION (default 8s) and SLUICE_CHAOS_JOBS (default 1500)
// make a longer run.
func TestFaultChaos(t *testing.T) {
	bin, dbPath, store, e := faultSetup(t)
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_CHAOS_SEED: %v", err)
		}
		seed = n
	}
	duration := 8 * time.Second
	if s := os.Getenv("SLUICE_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SLUICE_CHAOS_DURATION: %v", err)
		}
		duration = d
	}
	n := 1500
	if s := os.Getenv("SLUICE_CHAOS_JOBS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("SLUICE_CHAOS_JOBS: %q", s)
		}
		n = v
	}
	t.Logf("chaos seed %d (SLUICE_CHAOS_SEED=%d repeats the choices), %d jobs, %s of chaos", seed, seed, n, duration)
	r := rand.New(rand.NewPCG(seed, 0x5107ce))

	ids := enqueueSleeps(t, e, n, 50, 300)

	// Crashes here are the harness's doing, not poison: no quarantine.
	extra := []string{"--crash-limit", "1000000"}
	var workers []*child
	spawned := 0
	spawn := func() *child {
		spawned++
		c := startWorker(t, bin, dbPath, fmt.Sprintf("chaos-%d", spawned), extra...)
		workers = append(workers, c)
		return c
	}
	live := func() []*child {
		var out []*child
		for _, c := range workers {
			if !c.exited() {
				out = append(out, c)
			}
		}
		return out
	}
	for range 3 {
		spawn()
	}

	var kills, stops, terms, locks int
	thawed := make(chan struct{}, 64)
	frozen := 0
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(300+r.IntN(600)) * time.Millisecond)
		ws := live()
		if len(ws) == 0 {
			spawn()
			continue
		}
		w := ws[r.IntN(len(ws))]
		switch a := r.IntN(11); {
		case a == 10: // every writer blocked past the lease, then let go
			lockStore(t, dbPath, time.Duration(1200+r.IntN(1500))*time.Millisecond)
			locks++
		case a < 4: // SIGKILL, and a replacement
			w.kill(t)
			kills++
			spawn()
		case a < 7: // SIGSTOP past the lease (1s), then SIGCONT
			if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				continue
			}
			stops++
			frozen++
			pause := time.Duration(1500+r.IntN(1500)) * time.Millisecond
			go func(w *child) {
				time.Sleep(pause)
				_ = w.cmd.Process.Signal(syscall.SIGCONT)
				thawed <- struct{}{}
			}(w)
		default: // SIGTERM, and a replacement
			if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				continue
			}
			terms++
			spawn()
		}
	}
	for range frozen {
		<-thawed
	}
	t.Logf("chaos: %d SIGKILL, %d SIGSTOP/SIGCONT, %d SIGTERM, %d store locks, %d worker processes in all", kills, stops, terms, locks, spawned)
	for len(live()) < 2 {
		spawn()
	}

	var final map[string]*engine.Job
	waitFor(t, "every job to complete after the chaos", 120*time.Second, func() bool {
		final = jobs(t, store, ids)
		return countStates(final)[engine.StateCompleted] == n
	})
	for _, w := range live() {
		w.stop(t)
	}

	crashed := 0
	for _, id := range ids {
		j := final[id]
		if j.CrashAttempt > 0 {
			crashed++
		}
		if got := crashErrors(j); got != j.CrashAttempt {
			t.Errorf("job %s: crash_attempt %d but %d crash errors", id, j.CrashAttempt, got)
		}
		if j.Lease != nil {
			t.Errorf("job %s: completed with a lease %+v", id, j.Lease)
		}
	}
	if kills+stops > 0 && crashed == 0 {
		t.Error("the chaos crashed no job: nothing was tested")
	}

	// The maintained counters agree with the jobs.
	c, err := e.Counts(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for st, want := range map[engine.State]int64{engine.StateCompleted: int64(n), engine.StateRunning: 0, engine.StateAvailable: 0, engine.StateRetryable: 0} {
		if got := c.Total[st]; got != want {
			t.Errorf("counters say %d %s, the jobs %d", got, st, want)
		}
	}

	refused := 0
	rx := regexp.MustCompile(`refused: lease lost`)
	for _, w := range workers {
		b, _ := os.ReadFile(w.logPath)
		refused += len(rx.FindAll(b, -1))
	}
	t.Logf("%d of %d jobs crashed at least once and completed once; %d late writes refused (lease lost)", crashed, n, refused)
	if t.Failed() {
		t.Logf("chaos seed %d: rerun with SLUICE_CHAOS_SEED=%d", seed, seed)
	}
}

// lockStore holds the SQLite file's write lock for d from a connection of
// its own (BEGIN EXCLUSIVE), so every worker's writes wait — heartbeats,
// claims, completions, the reaper — and then lets go.
func lockStore(t *testing.T, dbPath string, d time.Duration) {
	t.Helper()
	db, err := sql.Open("sqlite", dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatalf("lock the store: %v", err)
	}
	time.Sleep(d)
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatalf("unlock the store: %v", err)
	}
}
