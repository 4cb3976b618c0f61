// Command sluice-bench runs the benchmark scenarios behind BENCHMARKS.md:
// throughput, deadletter, console, api, export and others. scripts/bench builds it (and
// the sluice binary the api scenario serves from and the export scenario
// runs) and runs it:
//
//	scripts/bench throughput --store sqlite://bench.db --jobs 100000
//
// Each run prints one key=value result line on stdout, the shape of the
// peer harness for River and asynq, and its progress on stderr. The
// scenarios delete SQLite files, read getrusage and /proc and start server
// processes, which is why they live here and not in the sluice binary;
// `sluice bench` is the small user command.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the scenario args name and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	lo := &cmdline.LogOptions{}
	root := &cobra.Command{
		Use:           "sluice-bench",
		Short:         "Sluice's benchmark scenarios (scripts/bench runs these)",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	lo.AddFlags(root.PersistentFlags(), "write logs to this file (default: stderr)")
	root.AddCommand(newBenchThroughputCmd(lo), newBenchDeadLetterCmd(lo), newBenchConsoleCmd(lo), newBenchAPICmd(lo), newBenchPressureCmd(lo), newBenchUniqueCmd(lo), newBenchExportCmd(lo))
	return cmdline.Run(ctx, root, "sluice-bench", args, stdout, stderr)
}

// driveOperation runs pending operations in this process until operation
// id ends, as `sluice bulk --store` does, writing its progress to progress.
func driveOperation(ctx context.Context, e *engine.Engine, id string, progress io.Writer) (*engine.Operation, error) {
	for {
		did, err := e.RunOperation(ctx)
		if err != nil {
			return nil, err
		}
		op, err := e.Operation(ctx, id)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "\r%d/%d (%d failed) %s ", op.Processed, op.Matched, op.Failed, op.Status)
		if op.Status != engine.OperationPending && op.Status != engine.OperationRunning {
			fmt.Fprintln(progress)
			return op, nil
		}
		if !did {
			// Another runner (this engine's maintenance) holds it:
			// follow it.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

func stopEngine(ctx context.Context, e *engine.Engine) error {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop engine: %w", err)
	}
	return nil
}
