package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/commithook"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/chaos"
	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// runWorker is `testworker worker --record FILE [--defeat-fencing]`: the
// flags of sluice worker (those the fault tests use), an engine over the
// store wrapped in the chaos witness, and the chaos kinds recording each
// run. It stops gracefully on SIGINT or SIGTERM, as sluice worker does.
func runWorker(args []string) int {
	fs := pflag.NewFlagSet("testworker worker", pflag.ContinueOnError)
	var (
		storeURL, queues, workerID, record string
		fault, countRedis, hold            string
		concurrency, crashLimit            int
		lease, heartbeat, poll, maint      time.Duration
		crashBackoff, shutdownTimeout      time.Duration
		noMaintenance, defeat              bool
		lo                                 cmdline.LogOptions
	)
	fs.StringVar(&storeURL, "store", "sqlite://sluice.db", "store URL")
	fs.StringVar(&queues, "queues", chaos.Queue, "comma-separated queues to work")
	fs.StringVar(&workerID, "worker-id", "", "name of this process in leases and heartbeats")
	fs.IntVar(&concurrency, "concurrency", 10, "jobs run at once per queue")
	fs.DurationVar(&lease, "lease", 30*time.Second, "how long a claim lasts without renewal")
	fs.DurationVar(&heartbeat, "heartbeat", 5*time.Second, "how often the process says it lives")
	fs.DurationVar(&poll, "poll", time.Second, "how often an idle queue looks for work")
	fs.DurationVar(&maint, "maintenance-interval", time.Second, "tick of scheduling, reaping and retention")
	fs.BoolVar(&noMaintenance, "no-maintenance", false, "run workers only")
	fs.IntVar(&crashLimit, "crash-limit", engine.DefaultCrashLimit, "crashes of one job that quarantine its fingerprint")
	fs.DurationVar(&crashBackoff, "crash-backoff", 0, "fixed delay before a crashed job runs again (0: the engine's default)")
	fs.DurationVar(&shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long running jobs get to finish at shutdown")
	fs.StringVar(&record, "record", "", "side table (a SQLite file) for the chaos witness")
	fs.StringVar(&countRedis, "count-redis", "", "TEST ONLY: also count each handler run by job in the hash {NS}:side:runs on this redis://...?ns=NS URL")
	fs.StringVar(&fault, "fault", "", "TEST ONLY: kill the process around a routed death's write ("+faultBeforeDeadLetter+" or "+faultAfterDeadLetter+")")
	fs.StringVar(&hold, "hold-file", "", "TEST ONLY: while this file exists, each handler run, once recorded, blocks until the process stops (a kill then surely finds jobs held)")
	fs.BoolVar(&defeat, "defeat-fencing", false, "TEST ONLY: rewrite every lease reference to the job's current lease")
	lo.AddFlags(fs, "log file (default stderr)")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, "testworker worker:", err)
		return 2
	}
	if err := work(storeURL, queues, workerID, record, fault, countRedis, hold, concurrency, crashLimit, lease, heartbeat, poll, maint,
		crashBackoff, shutdownTimeout, noMaintenance, defeat, &lo); err != nil {
		fmt.Fprintln(os.Stderr, "testworker worker:", err)
		return 1
	}
	return 0
}

func work(storeURL, queues, workerID, record, fault, countRedis, hold string, concurrency, crashLimit int,
	lease, heartbeat, poll, maint, crashBackoff, shutdownTimeout time.Duration,
	noMaintenance, defeat bool, lo *cmdline.LogOptions) error {
	if record == "" {
		return fmt.Errorf("--defeat-fencing and --fault need --record FILE")
	}
	log, closeLog, err := lo.Logger(os.Stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if workerID == "" {
		host, _ := os.Hostname()
		workerID = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	rec, err := chaos.OpenRecorder(record)
	if err != nil {
		return err
	}
	defer rec.Close()
	cfg := engine.Config{
		Queues:              map[string]engine.QueueConfig{},
		WorkerID:            workerID,
		LeaseDuration:       lease,
		HeartbeatInterval:   heartbeat,
		PollInterval:        poll,
		MaintenanceInterval: maint,
		NoMaintenance:       noMaintenance,
		CrashLimit:          crashLimit,
		ShutdownTimeout:     shutdownTimeout,
		Logger:              log,
	}
	for _, q := range strings.Split(queues, ",") {
		if q = strings.TrimSpace(q); q != "" {
			cfg.Queues[q] = engine.QueueConfig{Concurrency: concurrency}
		}
	}
	if crashBackoff > 0 {
		cfg.CrashBackoff = func(int) time.Duration { return crashBackoff }
	}
	store, err := storeurl.Open(ctx, storeURL, log)
	if err != nil {
		return err
	}
	defer store.Close()
	hooks := commithook.Has(store.Backend()) // the witness wraps it: ask the store itself
	faulty, err := withFault(chaos.Witness(store, rec, workerID, defeat), fault, hooks)
	if err != nil {
		return err
	}
	e, err := engine.New(faulty, cfg)
	if err != nil {
		return err
	}
	count, closeCount, err := redisCounter(countRedis)
	if err != nil {
		return err
	}
	defer closeCount()
	if err := chaos.RegisterCounting(rec, holding(ctx, hold, count))(e); err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	log.Info("worker started", "worker", e.WorkerID(), "store", redact.URL(storeURL), "queues", queues,
		"pid", os.Getpid(), "defeat_fencing", defeat)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout+10*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	log.Info("worker stopped", "worker", e.WorkerID())
	return nil
}

// holding is --hold-file: after count, a run blocks while the file exists,
// until ctx ends. The four-process test holds its victim this way so that
// its kill lands while the victim surely holds jobs, however fast the
// no-op handlers are.
func holding(ctx context.Context, path string, count func(*engine.Job)) func(*engine.Job) {
	if path == "" {
		return count
	}
	return func(j *engine.Job) {
		if count != nil {
			count(j)
		}
		for ctx.Err() == nil {
			if _, err := os.Stat(path); err != nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// redisCounter is --count-redis: each handler run adds one to its job's
// field of the hash {NS}:side:runs, in the namespace the URL names, so
// the test's cleanup of that namespace deletes it. nil without a URL.
func redisCounter(raw string) (func(*engine.Job), func(), error) {
	if raw == "" {
		return nil, func() {}, nil
	}
	t, err := redis.ParseURL(raw)
	if err != nil {
		return nil, nil, err
	}
	if t.Cluster {
		return nil, nil, fmt.Errorf("--count-redis: one server's URL, not a cluster's")
	}
	o := *t.Options
	o.ClientName = "sluice-side:" + t.Namespace
	c := goredis.NewClient(&o)
	key := "{" + t.Namespace + "}:side:runs"
	var once sync.Once
	count := func(j *engine.Job) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.HIncrBy(ctx, key, j.ID, 1).Err(); err != nil {
			// Reported once; the test then finds counts missing.
			once.Do(func() { fmt.Fprintf(os.Stderr, "testworker: --count-redis %s: %v\n", key, err) })
		}
	}
	return count, func() { c.Close() }, nil
}
