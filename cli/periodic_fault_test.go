package cli_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// TestFaultPeriodicThreeProcesses: three processes (testworker periodic)
// declare the same 1,000 schedules firing every second on one store and
// work their queue, each handler run recorded in a side table; one
// process is killed with SIGKILL midway. Every tick from each schedule's
// creation to its last mark has its one job (none lost), every job is a
// tick on the one-second grid (none made up or doubled under another
// id), and a job ran more than once only when a crash was charged for
// the killed process. On SQLite, PostgreSQL and Redis, for
// SLUICE_PERIODIC_SECONDS (10) each; the benchmark runs a minute.
func TestFaultPeriodicThreeProcesses(t *testing.T) {
	skipUnlessFault(t)
	run := 10 * time.Second
	if s := os.Getenv("SLUICE_PERIODIC_SECONDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 4 {
			t.Fatalf("SLUICE_PERIODIC_SECONDS=%q: want a number of seconds, at least 4", s)
		}
		run = time.Duration(v) * time.Second
	}
	cases := append(storeCases()[:2], redisStoreCase())
	for _, sc := range cases {
		t.Run(sc.name, func(t *testing.T) {
			periodicProcesses(t, sc.url(t), 1000, run)
		})
	}
}

func periodicProcesses(t *testing.T, storeURL string, n int, run time.Duration) {
	ctx := context.Background()
	store := openStore(t, storeURL)
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := backend.ScheduleStoreOf(store)
	if err != nil {
		t.Fatal(err)
	}
	bin := testWorkerBinary(t)
	side := filepath.Join(t.TempDir(), "side.db")
	queue := fmt.Sprintf("periodic-%x", time.Now().UnixNano()&0xffffffff)
	start := func(name string) *child {
		return startChild(t, bin, name, "periodic", "--store", storeURL, "--worker-id", name, "--queue", queue,
			"--side", side, "--schedules", strconv.Itoa(n), "--every", "1s")
	}
	ws := []*child{start("per-1"), start("per-2"), start("per-3")}
	alive := func() {
		for _, w := range ws {
			if w.exited() {
				t.Fatalf("%s exited early: %v", w.name, w.err)
			}
		}
	}
	rows := func() []*backend.ScheduleRow {
		var out []*backend.ScheduleRow
		after := ""
		for {
			page, err := ss.ScheduleList(ctx, &backend.ScheduleListParams{After: after})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page...)
			if len(page) < backend.ScheduleListLimit {
				return out
			}
			after = page[len(page)-1].Name
		}
	}
	waitFor(t, "every schedule declared", time.Minute, func() bool { alive(); return len(rows()) == n })
	time.Sleep(run / 2) // pacing, not an assertion
	alive()
	ws[0].kill(t)
	t.Logf("killed %s", ws[0].name)
	time.Sleep(run - run/2)
	for _, w := range ws[1:] {
		if w.exited() {
			t.Fatalf("%s exited: %v", w.name, w.err)
		}
		w.stop(t)
	}
	stopped, err := store.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Every job of the queue, by id.
	jobs := map[string]*engine.Job{}
	f := engine.Filter{Queues: []string{queue}}
	cursor := ""
	for {
		page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: f, Cursor: cursor, Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			jobs[j.ID] = j
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	runs := sideRuns(t, side)

	var ticks, lost, offGrid, rerunCharged int
	last := map[string]time.Time{}
	for _, r := range rows() {
		last[r.Name] = r.LastTick
		first := r.CreatedAt.Truncate(time.Second).Add(time.Second)
		if r.LastTick.Sub(first) < 2*time.Second {
			t.Errorf("schedule %s moved from %v to %v only", r.Name, r.CreatedAt, r.LastTick)
		}
		for tk := first; !tk.After(r.LastTick); tk = tk.Add(time.Second) {
			ticks++
			if jobs[fmt.Sprintf("sched:%s:%d", r.Name, tk.UnixMilli())] == nil {
				lost++
				if lost <= 10 {
					t.Errorf("schedule %s: tick %v lost", r.Name, tk)
				}
			}
		}
	}
	for id, j := range jobs {
		rest, ok := strings.CutPrefix(id, "sched:")
		i := strings.LastIndexByte(rest, ':')
		ms, err := strconv.ParseInt(rest[i+1:], 10, 64)
		name := rest[:max(i, 0)]
		l, known := last[name]
		if !ok || i < 0 || err != nil || !known || ms%1000 != 0 || time.UnixMilli(ms).After(stopped) {
			offGrid++
			if offGrid <= 10 {
				t.Errorf("job %s is no tick of a schedule (last tick %v)", id, l)
			}
			continue
		}
		if runs[id] > 1 {
			if j.CrashAttempt == 0 {
				t.Errorf("job %s ran %d times with no crash charged", id, runs[id])
			}
			rerunCharged++
		}
		if j.State == engine.StateCompleted && runs[id] == 0 {
			t.Errorf("job %s completed and its handler never recorded a run", id)
		}
	}
	t.Logf("%d schedules, %d ticks to their last marks, %d jobs (%d past the marks at stop), %d lost, %d off the grid, %d run again after the kill",
		n, ticks, len(jobs), len(jobs)-ticks, lost, offGrid, rerunCharged)
	if lost > 0 || offGrid > 0 {
		t.Fatalf("%d ticks lost, %d jobs off the grid", lost, offGrid)
	}
}

// sideRuns counts the handler runs in the side table, by job.
func sideRuns(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.Query(`SELECT job_id, count(*) FROM runs GROUP BY job_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := map[string]int{}
	for rs.Next() {
		var id string
		var c int
		if err := rs.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		out[id] = c
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
