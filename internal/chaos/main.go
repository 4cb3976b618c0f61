package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/engine"
)

// Main is `testworker chaos`, which scripts/chaos runs:
//
//	testworker chaos [--store URL | --private] --duration D --seed S
//	                 [--redis-fsync always|everysec]
//	                 [--workers N] [--jobs N] [--crash-limit N]
//	                 [--faults kill,stall,term,outage,cut,panic,pill,release]
//	                 [--fault-every D] [--defeat-fencing] [--keep]
//
// Progress goes to stderr; the last line on stdout is the report's
// key=value pairs. A failure prints the seed and the first broken
// invariant before it. The exit status is 0 only when every invariant
// held, 1 when one broke, 2 when the run could not be carried out.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("testworker chaos", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	var faults string
	seed := fs.Uint64("seed", 0, "seed of the random choices (0: from the clock)")
	fs.StringVar(&o.Store, "store", "", "store URL (sqlite://FILE, postgres://..., redis://...); none: a private SQLite store")
	fs.BoolVar(&o.Private, "private", false, "run on a store of the harness's own: a temp SQLite file, or with a postgres:// --store a PostgreSQL cluster of its own, or with a redis:// --store a redis-server of its own with AOF (its outage is a server restart)")
	fs.StringVar(&o.RedisFsync, "redis-fsync", "always", "appendfsync of a --private Redis: always (its restart is a SIGKILL) or everysec (a SHUTDOWN)")
	fs.DurationVar(&o.Duration, "duration", 2*time.Minute, "how long the faults go on")
	fs.IntVar(&o.Workers, "workers", 3, "worker processes at once")
	fs.IntVar(&o.Jobs, "jobs", 20000, "innocent jobs, enqueued evenly over the duration")
	fs.IntVar(&o.CrashLimit, "crash-limit", engine.DefaultCrashLimit, "the workers' crash limit")
	fs.StringVar(&faults, "faults", "all", "faults to drive: kill,stall,term,outage,cut,panic,pill,release (outage: SQLite, or a private PostgreSQL or Redis; cut: PostgreSQL, one Redis server; release: an operator releases quarantined poison, on a clock of its own)")
	fs.DurationVar(&o.FaultEvery, "fault-every", 0, "mean time between faults (0: grows with --jobs, see internal/chaos.AllFaults)")
	sleepMS := fs.IntSlice("sleep-ms", []int{10, 60}, "range of an innocent job's run, in milliseconds: LO,HI")
	fs.BoolVar(&o.DefeatFencing, "defeat-fencing", false, "TEST ONLY: workers defeat fencing; the checker must fail")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work directory (worker logs, side table, private store)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "chaos: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if len(*sleepMS) != 2 {
		fmt.Fprintf(stderr, "chaos: --sleep-ms wants LO,HI, got %v\n", *sleepMS)
		return 2
	}
	o.SleepMS = [2]int{(*sleepMS)[0], (*sleepMS)[1]}
	o.Seed = *seed
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	o.Faults = FaultList(faults)
	o.Log = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "chaos: seed=%d: the run failed: %v\n", o.Seed, err)
		if rep != nil {
			fmt.Fprintln(stdout, rep.Line())
		}
		return 2
	}
	return Print(rep, stdout, stderr)
}

// Print writes a report: the violations (the first named as such, with
// the seed), then the key=value line last. It returns the exit status.
func Print(rep *Report, stdout, stderr io.Writer) int {
	status := 0
	if n := len(rep.Violations); n > 0 {
		status = 1
		fmt.Fprintf(stderr, "chaos: FAIL seed=%d: first broken invariant: %s\n", rep.Seed, rep.Violations[0])
		shown := rep.Violations[1:min(n, 20)]
		for _, v := range shown {
			fmt.Fprintf(stderr, "chaos:   also: %s\n", v)
		}
		if n > 20 {
			fmt.Fprintf(stderr, "chaos:   ... and %d more\n", n-20)
		}
		fmt.Fprintf(stderr, "chaos: repeat the choices with --seed %d\n", rep.Seed)
	}
	fmt.Fprintln(stdout, strings.TrimSpace(rep.Line()))
	return status
}
