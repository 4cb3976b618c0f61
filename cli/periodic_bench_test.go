package cli_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// TestBenchPeriodic is the schedules benchmark (BENCHMARKS.md), not part
// of any test run: SLUICE_BENCH_PERIODIC=1 runs it. Three processes
// (testworker periodic --work=false: schedulers only) declare
// SLUICE_BENCH_SCHEDULES (10,000) schedules every second on the store
// SLUICE_BENCH_STORE names (a fresh SQLite file when empty) for
// SLUICE_PERIODIC_SECONDS (60). It logs the three processes' CPU per tick
// (user and system, from their rusage, maintenance included) and the
// lateness of the enqueues (each job's created_at against its tick),
// p50, p99 and the largest; it asserts nothing but that no tick is lost.
func TestBenchPeriodic(t *testing.T) {
	if os.Getenv("SLUICE_BENCH_PERIODIC") != "1" {
		t.Skip("benchmark: set SLUICE_BENCH_PERIODIC=1 to run")
	}
	n := envInt(t, "SLUICE_BENCH_SCHEDULES", 10000)
	run := time.Duration(envInt(t, "SLUICE_PERIODIC_SECONDS", 60)) * time.Second
	storeURL := os.Getenv("SLUICE_BENCH_STORE")
	if storeURL == "" {
		storeURL = storeCases()[0].url(t)
	}
	ctx := context.Background()
	store := openStore(t, storeURL)
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	bin := testWorkerBinary(t)
	queue := fmt.Sprintf("bench-%x", time.Now().UnixNano()&0xffffffff)
	var ws []*child
	for i := range 3 {
		name := fmt.Sprintf("bench-%d", i+1)
		ws = append(ws, startChild(t, bin, name, "periodic", "--store", storeURL, "--worker-id", name, "--queue", queue,
			"--schedules", strconv.Itoa(n), "--every", "1s", "--work=false"))
	}
	time.Sleep(run)
	var cpu time.Duration
	for _, w := range ws {
		w.stop(t)
		cpu += w.cmd.ProcessState.UserTime() + w.cmd.ProcessState.SystemTime()
	}
	var late []time.Duration
	cursor := ""
	for {
		page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{Queues: []string{queue}}, Cursor: cursor, Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			i := strings.LastIndexByte(j.ID, ':')
			ms, err := strconv.ParseInt(j.ID[i+1:], 10, 64)
			if err != nil {
				t.Fatalf("job %s: %v", j.ID, err)
			}
			late = append(late, j.CreatedAt.Sub(time.UnixMilli(ms)))
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(late) == 0 {
		t.Fatal("no job enqueued")
	}
	slices.Sort(late)
	pct := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	t.Logf("%d schedules × every 1s, 3 processes, %s: %d jobs; scheduler CPU %s in all, %.1f µs a tick; lateness p50 %s, p99 %s, max %s",
		n, run, len(late), cpu.Round(time.Millisecond), float64(cpu.Microseconds())/float64(len(late)),
		pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond))
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}
