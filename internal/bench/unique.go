package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// The unique scenario: what a unique enqueue costs beside a plain one.

type uniqueOptions struct {
	benchOptions
	rounds int
}

func newBenchUniqueCmd(lo *cmdline.LogOptions) *cobra.Command {
	o := &uniqueOptions{}
	cmd := &cobra.Command{
		Use:   "unique",
		Short: "Time N plain enqueues against N unique ones, and N duplicates, in interleaved rounds",
		Long: `Reset the store (a SQLite file named by --store is deleted first), then run
--rounds rounds, each enqueueing N plain jobs and N unique jobs (each its own
key: UniqueOpts{Fields: ["i"]}) in EnqueueMany batches from --insert-conc
goroutines, plain and unique alternating within the round, and then the N
unique jobs again (every one a duplicate, answered with the job holding its
key). No worker runs: the jobs stay available, each phase on a queue of its
own.

Prints one key=value result line on stdout: the medians of the rounds
(plain_per_sec, unique_per_sec, dup_per_sec) and the median ratio of
unique to plain within a round, with its range; progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res := benchHeader("unique", &o.benchOptions)
			return printBenchResult(cmd.OutOrStdout(), &res, benchUnique(cmd.Context(), o, lo, cmd.ErrOrStderr(), &res))
		},
	}
	o.addFlags(cmd, 30*time.Minute)
	cmd.Flags().IntVar(&o.rounds, "rounds", 3, "rounds of plain, unique and duplicate enqueues")
	return cmd
}

func benchUnique(ctx context.Context, o *uniqueOptions, lo *cmdline.LogOptions, stderr io.Writer, res *benchResult) error {
	progress := benchProgress(stderr, "unique")
	if o.jobs <= 0 || o.batch <= 0 || o.insertConc <= 0 || o.rounds <= 0 {
		return fmt.Errorf("--jobs, --batch, --insert-conc and --rounds must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	log, closeLog, err := lo.Logger(stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	target, err := benchStore(o.store, res)
	if err != nil {
		return err
	}
	res.add("insert_batch", o.batch)
	res.add("insert_conc", o.insertConc)
	res.add("rounds", o.rounds)
	if target.Backend == "sqlite" {
		if err := removeSQLiteFile(target.Path); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	store, err := storeurl.Open(ctx, o.store, log)
	if err != nil {
		return err
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{Logger: log})
	if err != nil {
		return err
	}
	res.add("load1_before", load1())

	// phase enqueues N jobs on queue q and returns the rate; existing
	// counts the answers that were an existing job.
	phase := func(q string, unique bool, round int) (float64, int, error) {
		var existing atomic.Int64
		t0 := time.Now()
		err := enqueueBatches(ctx, e, o.jobs, o.batch, o.insertConc, func(i int) engine.EnqueueParams {
			p := engine.EnqueueParams{Queue: q, Kind: benchKind, Payload: fmt.Appendf(nil, `{"i":%d,"round":%d}`, i, round)}
			if unique {
				p.Unique = &engine.UniqueOpts{Fields: []string{"i", "round"}}
			}
			return p
		}, func(_ int, j *engine.Job) {
			if j.Queue != q { // a duplicate answers the job of the round's unique phase
				existing.Add(1)
			}
		})
		return float64(o.jobs) / time.Since(t0).Seconds(), int(existing.Load()), err
	}
	var plain, uniq, dup, ratio []float64
	for r := range o.rounds {
		progress("round %d of %d: %d plain, %d unique, %d duplicate enqueues into %s", r+1, o.rounds, o.jobs, o.jobs, o.jobs, redact.URL(o.store))
		// Alternate which goes first, so neither always meets a warmer
		// (or a fuller) store.
		var p, u float64
		if r%2 == 0 {
			if p, _, err = phase(fmt.Sprintf("plain-%d", r), false, r); err != nil {
				return fmt.Errorf("plain: %w", err)
			}
			if u, _, err = phase(fmt.Sprintf("unique-%d", r), true, r); err != nil {
				return fmt.Errorf("unique: %w", err)
			}
		} else {
			if u, _, err = phase(fmt.Sprintf("unique-%d", r), true, r); err != nil {
				return fmt.Errorf("unique: %w", err)
			}
			if p, _, err = phase(fmt.Sprintf("plain-%d", r), false, r); err != nil {
				return fmt.Errorf("plain: %w", err)
			}
		}
		d, existing, err := phase(fmt.Sprintf("dup-%d", r), true, r)
		if err != nil {
			return fmt.Errorf("duplicates: %w", err)
		}
		if existing != o.jobs {
			return fmt.Errorf("round %d: %d of %d duplicates answered with the existing job", r, existing, o.jobs)
		}
		progress("round %d: plain %.0f/s, unique %.0f/s (%.2f×), duplicates %.0f/s", r+1, p, u, u/p, d)
		plain, uniq, dup, ratio = append(plain, p), append(uniq, u), append(dup, d), append(ratio, u/p)
	}
	res.add("plain_per_sec", median(plain))
	res.add("unique_per_sec", median(uniq))
	res.add("dup_per_sec", median(dup))
	res.add("ratio", median(ratio))
	res.add("ratio_min", slices.Min(ratio))
	res.add("ratio_max", slices.Max(ratio))
	res.add("load1_after", load1())
	return nil
}

// median is the middle value of xs (the mean of the two middle ones).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
