package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// KindLimited is the kind `testworker limited` runs: it sleeps its
// payload's MS and records its run in the side table.
const KindLimited = "limits.run"

// limitedJob is KindLimited's payload.
type limitedJob struct {
	MS int `json:"ms"`
	N  int `json:"n"`
}

// limitedSchema is the side table of `testworker limited`, beside the
// chaos witness's (executions, writes) in the same file:
//
//   - lruns: one row per handler run, written as the handler begins
//     (start_ns, the process's clock at entry; attempted_ns, the store's
//     clock at the claim) and completed as it returns (end_ns, and
//     cancelled when the handler returned because its context ended). A
//     run whose process was killed keeps end_ns NULL.
//   - lclaims: one row per JobClaim this process sent, with how many jobs
//     it took; and one per wake-up the store's notifier handed the engine
//     (took -1), so that a test can tell a claim a wake-up asked for from
//     one the poll or a freed slot did.
const limitedSchema = `
CREATE TABLE IF NOT EXISTS lruns (
	job_id TEXT NOT NULL, process TEXT NOT NULL, attempt INTEGER NOT NULL,
	attempted_ns INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER,
	cancelled INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS lclaims (
	process TEXT NOT NULL, at_ns INTEGER NOT NULL, took INTEGER NOT NULL);
`

// runLimited is `testworker limited`: one queue worked by an engine over
// the store wrapped in the chaos witness (each claim and completion
// recorded with whether the store accepted it) and in a claim counter,
// running KindLimited. The limits fault tests (cli/limits_fault_test.go)
// start several of them on one store under a limit the test sets, and
// read the side table: how many handlers ran at once, when each started,
// how often each process asked the store for work.
//
// The handler honours its context: when the engine cancels it (a lease
// lost, a shutdown) it records its end and returns at once. A handler that
// ignores its cancellation after losing its lease is the one case in which
// a limit can be exceeded (RELIABILITY.md, "What is not promised"), and
// not what these tests are about.
func runLimited(args []string) int {
	fs := pflag.NewFlagSet("testworker limited", pflag.ContinueOnError)
	var (
		storeURL, queue, workerID, side, hold string
		concurrency                           int
		lease, heartbeat, poll, maint         time.Duration
		storm                                 bool
	)
	fs.StringVar(&storeURL, "store", "sqlite://sluice.db", "store URL")
	fs.StringVar(&queue, "queue", "limited", "the queue worked")
	fs.StringVar(&workerID, "worker-id", "", "name of this process")
	fs.StringVar(&side, "side", "", "side table (a SQLite file)")
	fs.StringVar(&hold, "hold-file", "", "while this file exists, each handler, once recorded, waits until its context ends (a kill then surely finds jobs held)")
	fs.IntVar(&concurrency, "concurrency", 8, "jobs run at once")
	fs.DurationVar(&lease, "lease", 5*time.Second, "how long a claim lasts without renewal")
	fs.DurationVar(&heartbeat, "heartbeat", 300*time.Millisecond, "how often the process says it lives")
	fs.DurationVar(&poll, "poll", 50*time.Millisecond, "how often an idle queue looks for work")
	fs.DurationVar(&maint, "maintenance-interval", 100*time.Millisecond, "tick of scheduling, reaping and operations")
	fs.BoolVar(&storm, "storm", false, "TEST ONLY: a claim that takes nothing is sent again at once, for up to a second, as a worker without a back-off would: the claim storm the bulk redrive test must catch")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, "testworker limited:", err)
		return 2
	}
	if side == "" || workerID == "" {
		fmt.Fprintln(os.Stderr, "testworker limited: --side and --worker-id are required")
		return 2
	}
	if err := limited(storeURL, queue, workerID, side, hold, concurrency, lease, heartbeat, poll, maint, storm); err != nil {
		fmt.Fprintln(os.Stderr, "testworker limited:", err)
		return 1
	}
	return 0
}

func limited(storeURL, queue, workerID, side, hold string, concurrency int, lease, heartbeat, poll, maint time.Duration, storm bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	db, err := sql.Open("sqlite", side+"?_pragma=busy_timeout(120000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(limitedSchema); err != nil {
		return fmt.Errorf("side table %s: %w", side, err)
	}
	rec, err := chaos.OpenRecorder(side)
	if err != nil {
		return err
	}
	defer rec.Close()
	store, err := storeurl.Open(ctx, storeURL, log)
	if err != nil {
		return err
	}
	defer store.Close()
	var sideErrs atomic.Int64
	note := func(err error) {
		if err != nil && sideErrs.Add(1) == 1 {
			fmt.Fprintf(os.Stderr, "testworker limited: side table write failed (rows from now on may be missing): %v\n", err)
		}
	}
	counted := &claimCounter{Store: chaos.Witness(store, rec, workerID, false), raw: store, db: db, process: workerID, note: note}
	if storm {
		counted.storm = time.Second
	}
	e, err := engine.New(counted, engine.Config{
		WorkerID: workerID, Logger: log, Queues: map[string]engine.QueueConfig{queue: {Concurrency: concurrency}},
		LeaseDuration: lease, HeartbeatInterval: heartbeat, PollInterval: poll, MaintenanceInterval: maint,
		CrashBackoff: func(int) time.Duration { return 50 * time.Millisecond },
	})
	if err != nil {
		return err
	}
	handler := func(ctx context.Context, j *engine.Job, p limitedJob) error {
		// The clock is read before anything else and the end after
		// everything: the recorded run lies inside the handler's, which
		// lies inside the job's time running in the store (claimed
		// before, completed after).
		start := time.Now().UnixNano()
		attempted := start
		if j.AttemptedAt != nil {
			attempted = j.AttemptedAt.UnixNano()
		}
		res, err := db.Exec(`INSERT INTO lruns (job_id, process, attempt, attempted_ns, start_ns) VALUES (?,?,?,?,?)`,
			j.ID, workerID, j.Attempt, attempted, start)
		note(err)
		var row int64
		if err == nil {
			row, _ = res.LastInsertId()
		}
		cancelled := 0
		t := time.NewTimer(time.Duration(p.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			cancelled = 1
		case <-t.C:
		}
		for cancelled == 0 && hold != "" {
			if _, err := os.Stat(hold); err != nil {
				break
			}
			select {
			case <-ctx.Done():
				cancelled = 1
			case <-time.After(20 * time.Millisecond):
			}
		}
		_, err = db.Exec(`UPDATE lruns SET end_ns = ?, cancelled = ? WHERE rowid = ?`, time.Now().UnixNano(), cancelled, row)
		note(err)
		if cancelled == 1 {
			return ctx.Err()
		}
		return nil
	}
	if err := e.Register(engine.Kind{Name: KindLimited, Handler: engine.TypedHandler(handler)}); err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	log.Info("limited worker started", "worker", e.WorkerID(), "queue", queue, "pid", os.Getpid())
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	log.Info("limited worker stopped", "worker", e.WorkerID())
	return nil
}

// claimCounter records each JobClaim the engine sends, with how many jobs
// it took, and each wake-up the store hands the engine. The witness under
// it hides the store's Notifier (it embeds backend.Store only); the
// counter offers the raw store's again, so the workers are woken as a
// product worker is, and each wake-up is counted.
type claimCounter struct {
	backend.Store
	raw     backend.Store
	db      *sql.DB
	process string
	note    func(error)
	// storm, when above 0, sends a claim that took nothing again at once,
	// for up to this long (--storm).
	storm time.Duration
}

func (c *claimCounter) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	until := time.Now().Add(c.storm)
	for {
		res, err := c.claim(ctx, p)
		if err != nil || len(res.Jobs) > 0 || len(res.Dead) > 0 || time.Now().After(until) {
			return res, err
		}
	}
}

func (c *claimCounter) claim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	res, err := c.Store.JobClaim(ctx, p)
	took := 0
	if err == nil && res != nil {
		took = len(res.Jobs)
	}
	_, serr := c.db.Exec(`INSERT INTO lclaims VALUES (?,?,?)`, c.process, time.Now().UnixNano(), took)
	c.note(serr)
	return res, err
}

// Wakeups relays the raw store's wake-ups, recording each. NotifierOf
// asks Capabilities too, which the witness passes through: a store that
// declares no wake-ups is never asked.
func (c *claimCounter) Wakeups(ctx context.Context) <-chan string {
	n, ok := backend.NotifierOf(c.raw)
	if !ok {
		return nil
	}
	in := n.Wakeups(ctx)
	out := make(chan string, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case q, ok := <-in:
				if !ok {
					return
				}
				_, err := c.db.Exec(`INSERT INTO lclaims VALUES (?,?,-1)`, c.process, time.Now().UnixNano())
				c.note(err)
				select {
				case out <- q:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}
