package cli_test

// Process fault tests: real worker processes on a SQLite file, killed with
// SIGKILL mid-job. The children are `testworker worker` (internal/testworker:
// the sluice command with the chaos kinds built in, which the sluice binary
// never carries). They skip unless SLUICE_FAULT_TESTS=1; scripts/test runs
// them one package at a time, without -race. The child binary is built once
// per test binary, without -race.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
)

var (
	buildDirOnce sync.Once
	buildDir     string
	buildDirErr  error
	builds       sync.Map // package path -> *goBuild
)

// goBuild is one package built for the child processes.
type goBuild struct {
	once sync.Once
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildBinary builds the command pkg once per test binary, without -race,
// and returns its path.
func buildBinary(t *testing.T, pkg, name string) string {
	t.Helper()
	buildDirOnce.Do(func() { buildDir, buildDirErr = os.MkdirTemp("", "sluice-fault-") })
	if buildDirErr != nil {
		t.Fatal(buildDirErr)
	}
	v, _ := builds.LoadOrStore(pkg, &goBuild{})
	b := v.(*goBuild)
	b.once.Do(func() {
		b.bin = filepath.Join(buildDir, name)
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = "go" // the build below fails, saying so
		}
		if out, err := exec.Command(goTool, "build", "-o", b.bin, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// sluiceBinary is the sluice command, as shipped.
func sluiceBinary(t *testing.T) string {
	return buildBinary(t, "github.com/sluicehq/sluice", "sluice")
}

// testWorkerBinary is internal/testworker: sluice with the chaos kinds
// built into its worker command.
func testWorkerBinary(t *testing.T) string {
	return buildBinary(t, "github.com/sluicehq/sluice/internal/testworker", "testworker")
}

// skipUnlessFault skips a fault test unless SLUICE_FAULT_TESTS=1.
func skipUnlessFault(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("fault test: set SLUICE_FAULT_TESTS=1 to run (scripts/test does)")
	}
}

// faultSetup makes a SQLite store for a fault test and returns its URL.
func faultSetup(t *testing.T) (bin, storeURL string, store *sqlite.Store, e *engine.Engine) {
	t.Helper()
	skipUnlessFault(t)
	bin = testWorkerBinary(t)
	dbPath := sqlitetest.Path(t)
	storeURL = "sqlite://" + dbPath
	store, err := sqlite.Open(context.Background(), dbPath, sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	// An engine that only enqueues: no queues, no maintenance, so every
	// claim, crash and reap is the children's.
	e, err = engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := chaos.Register(e); err != nil {
		t.Fatal(err)
	}
	return bin, storeURL, store, e
}

// child is one `testworker worker` process.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // the process's exit, once done is closed
}

// startWorker starts `testworker worker` on the chaos queue of the store a
// URL names with the fault tests' short timings (later flags in extra
// override them). Its stderr goes to a file that is printed if the
// test fails.
func startWorker(t *testing.T, bin, storeURL, workerID string, extra ...string) *child {
	t.Helper()
	args := append([]string{"worker",
		"--store", storeURL,
		"--queues", chaos.Queue,
		"--worker-id", workerID,
		"--concurrency", "8",
		"--lease", "1s",
		"--heartbeat", "200ms",
		"--poll", "50ms",
		"--maintenance-interval", "100ms",
		"--crash-backoff", "50ms",
		"--log-level", "debug",
	}, extra...)
	return startChild(t, bin, workerID, args...)
}

// startChild starts bin with args as a child named name. Its stdout and
// stderr go to a file that is printed if the test fails; the process is
// killed when the test ends, if it still runs.
func startChild(t *testing.T, bin, name string, args ...string) *child {
	t.Helper()
	return startChildEnv(t, bin, name, nil, args...)
}

// startChildEnv is startChild with env as the child's environment (the
// test's own when nil).
func startChildEnv(t *testing.T, bin, name string, env []string, args ...string) *child {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	t.Cleanup(func() {
		if !c.exited() {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			b, _ := os.ReadFile(c.logPath)
			t.Logf("---- stderr of %s (pid %d, exit %v) ----\n%s", c.name, c.cmd.Process.Pid, c.err, tail(string(b), 150))
		}
	})
	return c
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !c.exited() {
		t.Fatalf("kill %s: %v", c.name, err)
	}
	<-c.done
}

// stop sends SIGTERM and waits for a graceful exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	if c.exited() {
		return
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !c.exited() {
		t.Fatalf("stop %s: %v", c.name, err)
	}
	select {
	case <-c.done:
		if c.err != nil {
			t.Errorf("%s exited with %v after SIGTERM", c.name, c.err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30s of SIGTERM", c.name)
	}
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = append([]string{fmt.Sprintf("... (%d lines cut)", len(ls)-lines)}, ls[len(ls)-lines:]...)
	}
	return strings.Join(ls, "\n")
}

// enqueueSleeps enqueues n chaos.sleep jobs of lo..hi milliseconds.
func enqueueSleeps(t *testing.T, e *engine.Engine, n, lo, hi int) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(7, uint64(n)))
	ps := make([]engine.EnqueueParams, n)
	for i := range ps {
		ps[i] = engine.EnqueueParams{Queue: chaos.Queue, Kind: chaos.KindSleep,
			Args: chaos.Sleep{MS: lo + r.IntN(hi-lo+1)}}
	}
	res, err := e.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	ids := make([]string, n)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue job %d: %v", i, r.Err)
		}
		ids[i] = r.Job.ID
	}
	return ids
}

// jobs reads every job by id.
func jobs(t *testing.T, s backend.Store, ids []string) map[string]*engine.Job {
	t.Helper()
	out := make(map[string]*engine.Job, len(ids))
	for _, id := range ids {
		j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatalf("get job %s: %v", id, err)
		}
		out[id] = j
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func countStates(js map[string]*engine.Job) map[engine.State]int {
	m := map[engine.State]int{}
	for _, j := range js {
		m[j.State]++
	}
	return m
}

func crashErrors(j *engine.Job) int {
	n := 0
	for _, e := range j.Errors {
		if e.Crash {
			n++
		}
	}
	return n
}

func TestFaultKillWorkerMidJob(t *testing.T) {
	bin, storeURL, store, e := faultSetup(t)
	ids := enqueueSleeps(t, e, 200, 50, 300)

	first := startWorker(t, bin, storeURL, "fault-kill-1")
	// Mid-run: some done, some held by the first worker.
	waitFor(t, "the first worker to be mid-run", 60*time.Second, func() bool {
		if first.exited() {
			t.Fatalf("first worker exited early: %v", first.err)
		}
		st := countStates(jobs(t, store, ids))
		return st[engine.StateCompleted] >= 20 && st[engine.StateRunning] > 0
	})
	first.kill(t)

	// The first worker can write nothing now: what it held is exactly what
	// the store shows running under its lease.
	held := map[string]bool{}
	for id, j := range jobs(t, store, ids) {
		if j.State == engine.StateRunning {
			if j.Lease == nil || !strings.HasPrefix(j.Lease.WorkerID, "fault-kill-1/") {
				t.Fatalf("job %s running without the first worker's lease: %+v", id, j.Lease)
			}
			held[id] = true
		}
	}
	if len(held) == 0 {
		t.Fatal("no job was running when the first worker was killed")
	}
	t.Logf("killed the first worker holding %d jobs", len(held))

	second := startWorker(t, bin, storeURL, "fault-kill-2")
	var final map[string]*engine.Job
	waitFor(t, "every job to complete", 60*time.Second, func() bool {
		if second.exited() {
			t.Fatalf("second worker exited: %v", second.err)
		}
		final = jobs(t, store, ids)
		return countStates(final)[engine.StateCompleted] == len(ids)
	})
	second.stop(t)

	for id, j := range final {
		switch {
		case j.State != engine.StateCompleted:
			t.Errorf("job %s: state %s, want completed", id, j.State)
		case j.CrashAttempt > 1:
			t.Errorf("job %s: crash_attempt %d, want at most 1", id, j.CrashAttempt)
		case held[id] && j.CrashAttempt != 1:
			t.Errorf("job %s was running in the killed worker: crash_attempt %d, want 1", id, j.CrashAttempt)
		case held[id] && crashErrors(j) != 1:
			t.Errorf("job %s was running in the killed worker: %d crash errors, want 1: %+v", id, crashErrors(j), j.Errors)
		case !held[id] && (j.CrashAttempt != 0 || crashErrors(j) != 0):
			t.Errorf("job %s was not running in the killed worker but has crash_attempt %d, errors %+v", id, j.CrashAttempt, j.Errors)
		}
	}
}

func TestFaultPoisonPillQuarantined(t *testing.T) {
	bin, storeURL, store, e := faultSetup(t)
	ctx := context.Background()
	ids := enqueueSleeps(t, e, 100, 10, 50)
	poison, err := e.Enqueue(ctx, engine.EnqueueParams{Queue: chaos.Queue, Kind: chaos.KindExit,
		Args: map[string]any{"why": "kills its own process"}})
	if err != nil {
		t.Fatal(err)
	}

	const maxWorkers = 10
	started := 0
	var w *child
	settled := func() bool {
		p, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: poison.ID})
		if err != nil {
			t.Fatalf("get poison job: %v", err)
		}
		if p.State != engine.StateQuarantined {
			return false
		}
		return countStates(jobs(t, store, ids))[engine.StateCompleted] == len(ids)
	}
	waitFor(t, "the poison pill quarantined and every other job completed", 90*time.Second, func() bool {
		if w == nil || w.exited() {
			if started == maxWorkers {
				t.Fatalf("%d workers started and died; the poison pill is still not quarantined", started)
			}
			started++
			w = startWorker(t, bin, storeURL, fmt.Sprintf("fault-poison-%d", started), "--crash-limit", "3")
		}
		return settled()
	})
	w.stop(t)
	t.Logf("settled after %d worker processes", started)

	p, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: poison.ID})
	if err != nil {
		t.Fatal(err)
	}
	if p.CrashAttempt != 3 {
		t.Errorf("poison job crash_attempt = %d, want 3", p.CrashAttempt)
	}
	if p.TerminalReason != engine.ReasonQuarantined {
		t.Errorf("poison job terminal_reason = %q, want %q", p.TerminalReason, engine.ReasonQuarantined)
	}
	if n := crashErrors(p); n != 3 {
		t.Errorf("poison job has %d crash errors, want 3: %+v", n, p.Errors)
	}
	for id, j := range jobs(t, store, ids) {
		if j.State != engine.StateCompleted {
			t.Errorf("job %s: state %s, want completed", id, j.State)
		}
		if j.CrashAttempt > 2 {
			t.Errorf("innocent job %s: crash_attempt %d, want at most 2 (a pill drags an innocent down at most twice: first-crash suspects run in groups, twice-crashed jobs alone)", id, j.CrashAttempt)
		}
	}

	fp, err := store.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: p.Fingerprint})
	if err != nil {
		t.Fatalf("fingerprint record of the poison pill: %v", err)
	}
	if fp.Status != engine.FingerprintQuarantined {
		t.Errorf("fingerprint status = %q, want %q", fp.Status, engine.FingerprintQuarantined)
	}
	if fp.Kind != chaos.KindExit {
		t.Errorf("fingerprint kind = %q, want %q", fp.Kind, chaos.KindExit)
	}
	// The record counts the crashes across the fingerprint's jobs.
	if fp.Crashes != 3 {
		t.Errorf("fingerprint crashes = %d, want 3 (the poison job's own crashes)", fp.Crashes)
	}
	if fp.LastJobID != poison.ID {
		t.Errorf("fingerprint last job = %q, want %q", fp.LastJobID, poison.ID)
	}

	_, err = e.Enqueue(ctx, engine.EnqueueParams{Queue: chaos.Queue, Kind: chaos.KindExit,
		Args: map[string]any{"why": "kills its own process"}})
	if !errors.Is(err, engine.ErrQuarantined) {
		t.Errorf("enqueue of the quarantined payload again: err = %v, want ErrQuarantined", err)
	}
}
