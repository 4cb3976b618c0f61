package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

type workerOptions struct {
	store               string
	migrate             bool
	queues              string
	concurrency         int
	prefetch            int
	workerID            string
	lease               time.Duration
	heartbeat           time.Duration
	poll                time.Duration
	maintenanceInterval time.Duration
	noMaintenance       bool
	crashLimit          int
	crashBackoff        time.Duration
	shutdownTimeout     time.Duration
	demo                bool
	otel                bool // --otel: export over OTLP without an endpoint variable

	// retention is --retention (retention.go).
	retention retentionFlag
}

// errNoKinds is sluice worker's answer when it has no job kinds to run.
var errNoKinds = errors.New(`worker: no job kinds to run. Workers run inside your own program, where
your handlers are: build an engine.Engine, Register your kinds and Start it
(examples/embedded in the Sluice repository is a whole program, workers and
console in one process). sluice worker --demo runs the demo's kinds`)

func newWorkerCmd(lo *logOptions, kinds Kinds) *cobra.Command {
	o := &workerOptions{}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the demo's workers (--demo) and take part in maintenance",
		Long: `Job handlers are Go code, so workers run inside your own program: build an
engine.Engine over your store, Register your kinds and Start it (see
examples/embedded in the Sluice repository). This binary holds no kinds of
yours; without --demo it refuses to start.

With --demo it runs workers for the demo's kinds (billing, email, reports:
the jobs sluice demo seeds) and takes part in maintenance (scheduling,
reaping dead workers' jobs, retention), until SIGINT or SIGTERM; then it
stops gracefully: no new claims, running jobs get --shutdown-timeout to
finish, unfinished ones go back to available without charging an attempt.

Logs go to stderr (slog text) unless --log-file is given.

` + otelHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), o, lo, kinds)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "sqlite://sluice.db", "store URL: sqlite://FILE (or a file path), postgres://… or redis://…")
	f.BoolVar(&o.migrate, "migrate", false, migrateFlagUsage)
	f.BoolVar(&o.demo, "demo", false, "run the demo's kinds (billing, email, reports)")
	f.StringVar(&o.queues, "queues", "", "comma-separated queues to work (with --demo: "+strings.Join(demo.Queues, ",")+")")
	f.IntVar(&o.concurrency, "concurrency", 10, "jobs run at once per queue")
	f.IntVar(&o.prefetch, "prefetch", 0, "jobs claimed ahead of free slots per queue (0: follow the queue's rate; negative: none)")
	f.StringVar(&o.workerID, "worker-id", "", "name of this process (a pod or host name); its leases and heartbeats add a random suffix per start (default host/pid)")
	f.DurationVar(&o.lease, "lease", 30*time.Second, "how long a claim lasts without renewal")
	f.DurationVar(&o.heartbeat, "heartbeat", 5*time.Second, "how often the process says it lives (gone after 3 missed beats)")
	f.DurationVar(&o.poll, "poll", time.Second, "how often an idle queue looks for work")
	f.DurationVar(&o.maintenanceInterval, "maintenance-interval", time.Second, "tick of scheduling, reaping and retention")
	f.BoolVar(&o.noMaintenance, "no-maintenance", false, "run workers only; leave maintenance to other processes")
	f.IntVar(&o.crashLimit, "crash-limit", engine.DefaultCrashLimit, "crashes of one job that quarantine its fingerprint")
	f.DurationVar(&o.crashBackoff, "crash-backoff", 0, "fixed delay before a crashed job runs again (0: the engine's growing default)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long running jobs get to finish at shutdown")
	f.BoolVar(&o.otel, "otel", false, otelFlagUsage)
	o.retention.add(f)
	return cmd
}

func runWorker(ctx context.Context, o *workerOptions, lo *logOptions, kinds Kinds) error {
	register := []Kinds{}
	if o.demo {
		register = append(register, demo.Register)
	}
	if kinds != nil {
		register = append(register, kinds)
	}
	if len(register) == 0 {
		return errNoKinds
	}
	queues := splitList(o.queues)
	if len(queues) == 0 && o.demo {
		queues = demo.Queues
	}
	if len(queues) == 0 {
		return fmt.Errorf("worker: --queues names no queue")
	}
	log, closeLog, err := lo.Logger(os.Stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, stop := signalContext(ctx)
	defer stop()
	tel, log, err := startTelemetry(ctx, o.otel, log)
	if err != nil {
		return err
	}
	// Deferred before the store's close, so it runs after it and after the
	// engine's stop: the spans of the jobs the engine drains go too.
	defer stopTelemetry(ctx, tel, log)

	if o.concurrency <= 0 {
		return fmt.Errorf("worker: --concurrency must be positive, got %d", o.concurrency)
	}
	cfg := engine.Config{
		Queues:              make(map[string]engine.QueueConfig, len(queues)),
		WorkerID:            o.workerID,
		LeaseDuration:       o.lease,
		HeartbeatInterval:   o.heartbeat,
		PollInterval:        o.poll,
		MaintenanceInterval: o.maintenanceInterval,
		NoMaintenance:       o.noMaintenance,
		CrashLimit:          o.crashLimit,
		ShutdownTimeout:     o.shutdownTimeout,
		Logger:              log,
		Interceptor:         tel.Interceptor(),
	}
	if err := o.retention.apply(&cfg); err != nil {
		return err
	}
	for _, q := range queues {
		cfg.Queues[q] = engine.QueueConfig{Concurrency: o.concurrency, Prefetch: o.prefetch}
	}
	if d := o.crashBackoff; d > 0 {
		cfg.CrashBackoff = func(int) time.Duration { return d }
	}

	storeURL, err := o.retention.archive.storeURL(o.store)
	if err != nil {
		return err
	}
	open := storeurl.Open
	if o.migrate {
		open = storeurl.OpenMigrating
	}
	store, err := open(ctx, storeURL, log)
	if err != nil {
		return err
	}
	defer store.Close()
	e, err := engine.New(store, cfg)
	if err != nil {
		return err
	}
	for _, r := range register {
		if err := r(e); err != nil {
			return err
		}
	}
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) {
		log.Warn("job died", "job", ev.Job.ID, "kind", ev.Job.Kind, "queue", ev.Job.Queue,
			"reason", ev.Reason, "attempt", ev.Job.Attempt, "crash_attempt", ev.Job.CrashAttempt, "err", ev.Error)
	})
	if err := e.Start(ctx); err != nil {
		return err
	}
	if err := tel.Register(e); err != nil {
		return err
	}
	log.Info("worker started", "worker", e.WorkerID(), "store", redact.URL(o.store), "queues", queues,
		"concurrency", o.concurrency, "pid", os.Getpid())
	<-ctx.Done()
	log.Info("stopping: draining running jobs", "bound", o.shutdownTimeout)
	// Before the engine stops: no collection reads it after.
	if err := tel.Unregister(); err != nil {
		log.Warn("opentelemetry", "err", err)
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout+10*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return fmt.Errorf("worker: stop: %w", err)
	}
	log.Info("worker stopped", "worker", e.WorkerID())
	return nil
}
