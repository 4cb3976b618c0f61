package cli_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chaos"
	"github.com/sluicehq/sluice/internal/pgcluster"
)

// TestFaultChaos is the chaos harness (internal/chaos.Run, which
// scripts/chaos runs for longer): real `testworker worker` processes on a
// private SQLite file work a stream of jobs while, at seeded random
// moments, one is killed with SIGKILL (and replaced), frozen with SIGSTOP
// past its lease and then thawed (a zombie that wakes up holding stale
// leases), or stopped with SIGTERM (and replaced); the store is locked
// against every writer past a lease; a job that panics or a poison pill
// that kills its process is enqueued; and, on a clock of its own, an
// operator releases a quarantined poison job (or its fingerprint). The
// workers have the engine's real crash limit. After a drain the checker
// holds the jobs to the invariants (see chaos.Run): one terminal state
// each, with a reason; no lease left; no success under two live fences;
// fences one per claim; attempts and crashes as recorded; counters as the
// jobs; no innocent quarantined; a released job quarantined again by its
// first crash on probation, and never run before its release.
//
// SLUICE_CHAOS_SEED fixes the random choices (a failure prints its seed);
// SLUICE_CHAOS_DURATION (default 8s) and SLUICE_CHAOS_JOBS (default 1500)
// make a longer run.
func TestFaultChaos(t *testing.T) {
	o := chaosOptions(t)
	rep := runChaos(t, o)
	if len(rep.Violations) > 0 {
		t.Fatalf("chaos seed %d: %d invariants broken, the first: %s (rerun with SLUICE_CHAOS_SEED=%d)",
			o.Seed, len(rep.Violations), rep.Violations[0], o.Seed)
	}
}

// TestFaultChaosPostgres is the same short seeded run on PostgreSQL, with
// its faults: on the shared server (a schema and a queue of the run's
// own) the workers' connections are cut (pg_terminate_backend of every
// connection of theirs, named by an application_name of the run's own,
// never the asking one nor anyone else's), and on a cluster of the
// harness's own (--private) the server is also restarted.
func TestFaultChaosPostgres(t *testing.T) {
	o := chaosOptions(t)
	shared, _ := pgcluster.SharedStoreURL(t)
	// The shared case's schema, created and migrated before the run.
	pgcluster.OpenStore(t, shared)
	cases := []struct {
		name    string
		store   string
		private bool
	}{
		{"shared", shared, false},
		{"private", "postgres://", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := o
			o.Store, o.Private = tc.store, tc.private
			// Eight seconds see a store fault or two at the usual weights;
			// these runs are about the store's faults.
			o.Weights = map[string]int{chaos.FaultCut: 3, chaos.FaultOutage: 2}
			o.Ensure = []string{chaos.FaultCut, chaos.FaultOutage}
			rep := runChaos(t, o)
			if len(rep.Violations) > 0 {
				t.Fatalf("chaos on PostgreSQL (%s) seed %d: %d invariants broken, the first: %s (rerun with SLUICE_CHAOS_SEED=%d)",
					tc.name, o.Seed, len(rep.Violations), rep.Violations[0], o.Seed)
			}
			if rep.Cuts == 0 || (tc.private && rep.Outages == 0) {
				t.Errorf("seed %d drove %d cuts and %d server restarts; want each PostgreSQL fault the store offers at least once", o.Seed, rep.Cuts, rep.Outages)
			}
		})
	}
}

// TestFaultChaosRelease is the short run with poison enough to release:
// panics weighed up (half of them poison, quarantined in a few tenths of a
// second) and an operator's release every second on average, among all
// the other faults. A released job runs on probation, and the checker
// holds it there: quarantined again by its first crash, never run before
// its release (chaos.Run). A seed whose poison came too late for a release
// is given another try, a few times: the test is about releases.
func TestFaultChaosRelease(t *testing.T) {
	o := chaosOptions(t)
	o.Weights = map[string]int{chaos.FaultPanic: 12}
	o.ReleaseEvery = time.Second
	const tries = 3
	for try := 1; try <= tries; try++ {
		rep := runChaos(t, o)
		if len(rep.Violations) > 0 {
			t.Fatalf("chaos with releases, seed %d: %d invariants broken, the first: %s (rerun with SLUICE_CHAOS_SEED=%d)",
				o.Seed, len(rep.Violations), rep.Violations[0], o.Seed)
		}
		if rep.Releases > 0 {
			return
		}
		o.Seed++
	}
	t.Fatalf("%d runs and no quarantined poison job was released", tries)
}

// TestFaultChaosDefeatedFencing proves that the checker can fail: the same
// short run of zombies (SIGSTOP past the lease, then SIGCONT) twice, once
// on the real store, which must pass, and once with the workers' store
// wrapped so that every lease reference is rewritten to the job's current
// lease (testworker worker --defeat-fencing), where a zombie's late write
// lands and the checker must say so.
func TestFaultChaosDefeatedFencing(t *testing.T) {
	o := chaosOptions(t)
	o.Duration = 8 * time.Second
	o.Faults = []string{chaos.FaultStall}
	// Few jobs, long runs, a stall every 3 s on average: the zombie holds
	// a few jobs, and the other workers, nearly idle, take them up again
	// at once (whatever the rule that admits suspects) and are still
	// running them when the zombie wakes — which is when a defeated fence
	// lets its late write land. (On a busy store its jobs wait as suspects
	// and the zombie's writes find no lease to borrow.)
	o.Jobs = 30
	o.SleepMS = [2]int{1000, 2500}
	o.FaultEvery = 3 * time.Second
	// Stalls on runs that long would quarantine innocent jobs by chance
	// (see chaos.AllFaults); quarantine is not what this test is about,
	// fencing is.
	o.CrashLimit = 1000

	honest := runChaos(t, o)
	if len(honest.Violations) > 0 {
		t.Fatalf("seed %d: on the real store the run broke %d invariants, the first: %s", o.Seed, len(honest.Violations), honest.Violations[0])
	}

	o.DefeatFencing = true
	// A zombie's write lands only when it wakes while its job runs under
	// another's lease; a seed whose stalls all miss that is given another
	// try, a few times, before the checker is called blind.
	const tries = 4
	for try := 1; try <= tries; try++ {
		rep := runChaos(t, o)
		for _, v := range rep.Violations {
			if strings.Contains(v, "superseded holder") {
				t.Logf("with fencing defeated the checker reports (the first of %d): %s", len(rep.Violations), v)
				return
			}
		}
		if len(rep.Violations) > 0 {
			t.Fatalf("fencing defeated: violations, but none names a late write: %q", rep.Violations)
		}
		o.Seed++
	}
	t.Fatalf("fencing defeated: %d runs and the checker reported no zombie's late write", tries)
}

func chaosOptions(t *testing.T) chaos.Options {
	t.Helper()
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("fault test: set SLUICE_FAULT_TESTS=1 to run (scripts/test does)")
	}
	o := chaos.Options{Private: true, Duration: 8 * time.Second, Jobs: 1500, Seed: uint64(time.Now().UnixNano())}
	if s := os.Getenv("SLUICE_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_CHAOS_SEED: %v", err)
		}
		o.Seed = n
	}
	if s := os.Getenv("SLUICE_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SLUICE_CHAOS_DURATION: %v", err)
		}
		o.Duration = d
	}
	if s := os.Getenv("SLUICE_CHAOS_JOBS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("SLUICE_CHAOS_JOBS: %q", s)
		}
		o.Jobs = v
	}
	o.Bin = testWorkerBinary(t)
	return o
}

// runChaos runs the harness and logs its progress and report.
func runChaos(t *testing.T, o chaos.Options) *chaos.Report {
	t.Helper()
	o.Log = testWriter{t}
	t.Logf("chaos seed %d (SLUICE_CHAOS_SEED=%d repeats the choices), %d jobs, %s of chaos, defeat fencing %v",
		o.Seed, o.Seed, o.Jobs, o.Duration, o.DefeatFencing)
	rep, err := chaos.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("chaos seed %d: the run failed: %v", o.Seed, err)
	}
	t.Log(rep.Line())
	return rep
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
