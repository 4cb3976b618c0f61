package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// runPeriodic is `testworker periodic`: a process that declares N
// schedules firing every interval, works their queue, and records each
// handler run (job id, process) in a side table of its own SQLite file.
// Several such processes on one store are the periodic fault test
// (cli/periodic_fault_test.go) and benchmark: each tick must be enqueued
// once, whatever the processes and a SIGKILL among them.
func runPeriodic(args []string) int {
	fs := pflag.NewFlagSet("testworker periodic", pflag.ContinueOnError)
	var (
		storeURL, queue, workerID, side string
		n, concurrency                  int
		every, seen                     time.Duration
		work                            bool
	)
	fs.StringVar(&storeURL, "store", "sqlite://sluice.db", "store URL")
	fs.StringVar(&queue, "queue", "periodic", "the schedules' queue, worked by this process")
	fs.StringVar(&workerID, "worker-id", "", "name of this process")
	fs.StringVar(&side, "side", "", "side table (a SQLite file) recording each handler run; none when empty")
	fs.IntVar(&n, "schedules", 1000, "schedules p-0000 … declared")
	fs.IntVar(&concurrency, "concurrency", 32, "jobs run at once")
	fs.DurationVar(&every, "every", time.Second, "each schedule's interval")
	fs.DurationVar(&seen, "seen", time.Minute, "ScheduleSeenInterval")
	fs.BoolVar(&work, "work", true, "work the queue (false: only schedule, for the scheduler's own CPU)")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, "testworker periodic:", err)
		return 2
	}
	if !work {
		concurrency = 0
	}
	if err := periodic(storeURL, queue, workerID, side, n, concurrency, every, seen); err != nil {
		fmt.Fprintln(os.Stderr, "testworker periodic:", err)
		return 1
	}
	return 0
}

// sideTicks is the side table of handler runs.
const sideTicks = `CREATE TABLE IF NOT EXISTS runs (job_id TEXT NOT NULL, process TEXT NOT NULL, at_ns INTEGER NOT NULL)`

func periodic(storeURL, queue, workerID, side string, n, concurrency int, every, seen time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var db *sql.DB
	if side != "" {
		var err error
		if db, err = sql.Open("sqlite", side+"?_pragma=busy_timeout(120000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"); err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.Exec(sideTicks); err != nil {
			return fmt.Errorf("side table: %w", err)
		}
	}
	store, err := storeurl.Open(ctx, storeURL, log)
	if err != nil {
		return err
	}
	defer store.Close()
	queues := map[string]engine.QueueConfig{}
	if concurrency > 0 {
		queues[queue] = engine.QueueConfig{Concurrency: concurrency}
	}
	e, err := engine.New(store, engine.Config{
		WorkerID: workerID, Logger: log, ScheduleSeenInterval: seen, Queues: queues,
		LeaseDuration: 3 * time.Second, HeartbeatInterval: 300 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, MaintenanceInterval: 100 * time.Millisecond,
		CrashBackoff: func(int) time.Duration { return 50 * time.Millisecond },
	})
	if err != nil {
		return err
	}
	if err := e.Register(engine.Kind{Name: "periodic.tick", Handler: func(ctx context.Context, j *engine.Job) error {
		if db == nil {
			return nil
		}
		_, err := db.ExecContext(ctx, `INSERT INTO runs (job_id, process, at_ns) VALUES (?, ?, ?)`, j.ID, workerID, time.Now().UnixNano())
		return err
	}}); err != nil {
		return err
	}
	for i := range n {
		if err := e.AddPeriodic(engine.Periodic{
			Name: fmt.Sprintf("p-%05d", i), Every: every, AllowSubSecond: true,
			Missed: engine.MissedRunEach, MissedMax: 1000,
			Job: engine.EnqueueParams{Queue: queue, Kind: "periodic.tick"},
		}); err != nil {
			return err
		}
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	log.Info("periodic worker started", "worker", e.WorkerID(), "schedules", n, "every", every, "pid", os.Getpid())
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	log.Info("periodic worker stopped", "worker", e.WorkerID())
	return nil
}
