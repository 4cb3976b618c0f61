package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// The bench queue and kind: a queue of their own, so the run touches no
// one else's work.
const (
	benchQueue = "sluice-bench"
	benchKind  = "sluice.bench.noop"
)

type benchOptions struct {
	store       string
	jobs        int
	concurrency int
	timeout     time.Duration
}

func newBenchCmd(lo *logOptions) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Burn down N no-op jobs on a store and print the rate",
		Long: `Enqueue N no-op jobs on a queue of their own (` + benchQueue + `), work them
with an engine in this process until all are done, and print how many jobs
a second were enqueued and completed, with the Go version, the CPU model
and the core count. The jobs are deleted as they complete, so the store
keeps nothing of the run.

This measures your store on your machine. The benchmark scenarios behind
BENCHMARKS.md (throughput, dead letters, the console, the API) are run by
scripts/bench in the repository.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), o, lo, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "", "store URL (required): sqlite://FILE (or a file path), postgres://… or redis://…")
	_ = cmd.MarkFlagRequired("store")
	f.IntVar(&o.jobs, "jobs", 10000, "number of jobs N")
	f.IntVar(&o.concurrency, "concurrency", 50, "jobs run at once")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	return cmd
}

func runBench(ctx context.Context, o *benchOptions, lo *logOptions, stdout io.Writer) error {
	if o.jobs <= 0 || o.concurrency <= 0 {
		return fmt.Errorf("bench: --jobs and --concurrency must be positive")
	}
	log, closeLog, err := lo.Logger(nil)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, stop := signalContext(ctx)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	store, err := storeurl.Open(ctx, o.store, log)
	if err != nil {
		return err
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{
		Queues: map[string]engine.QueueConfig{benchQueue: {
			Concurrency: o.concurrency,
			Retention:   map[engine.State]time.Duration{engine.StateCompleted: 0},
		}},
		Logger: log,
	})
	if err != nil {
		return err
	}
	n := int64(o.jobs)
	var handled atomic.Int64
	done := make(chan struct{})
	err = e.Register(engine.Kind{Name: benchKind, Handler: func(context.Context, *engine.Job) error {
		if handled.Add(1) == n {
			close(done)
		}
		return nil
	}})
	if err != nil {
		return err
	}

	t0 := time.Now()
	const batch = 1000
	for start := 0; start < o.jobs; start += batch {
		ps := make([]engine.EnqueueParams, min(batch, o.jobs-start))
		for i := range ps {
			ps[i] = engine.EnqueueParams{Queue: benchQueue, Kind: benchKind, Payload: []byte(`{}`)}
		}
		rs, err := e.EnqueueMany(ctx, ps)
		if err != nil {
			return fmt.Errorf("bench: enqueue: %w", err)
		}
		for _, r := range rs {
			if r.Err != nil {
				return fmt.Errorf("bench: enqueue: %w", r.Err)
			}
		}
	}
	insert := time.Since(t0)

	t1 := time.Now()
	if err := e.Start(ctx); err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		_ = e.Stop(context.WithoutCancel(ctx))
		return fmt.Errorf("bench: %d of %d jobs done: %w", handled.Load(), n, ctx.Err())
	}
	// Stop returns once every acknowledgement is committed.
	if err := e.Stop(ctx); err != nil {
		return fmt.Errorf("bench: stop: %w", err)
	}
	work := time.Since(t1)

	fmt.Fprintf(stdout, "%d jobs on %s: enqueued at %.0f jobs/s, worked at %.0f jobs/s (%.2fs, concurrency %d)\n",
		o.jobs, redact.URL(o.store), float64(o.jobs)/insert.Seconds(), float64(o.jobs)/work.Seconds(),
		work.Seconds(), o.concurrency)
	fmt.Fprintf(stdout, "%s %s/%s · %s · %d cores (GOMAXPROCS %d)\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	return nil
}

// cpuModel is the CPU's model name as /proc/cpuinfo gives it, or the
// architecture where there is no such file.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
