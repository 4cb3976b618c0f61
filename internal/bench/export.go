package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// exportOptions are the export scenario's flags.
type exportOptions struct {
	benchDeadOptions
	bin     string
	format  string
	payload bool
	out     string
	runs    int
}

func newBenchExportCmd(lo *cmdline.LogOptions) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Seed N dead jobs, then time `sluice jobs export --store` of all of them and its peak memory",
		Long: `Reset the store (a SQLite file named by --store is deleted first) and seed N
dead jobs on the queue as the deadletter scenario's deadline seeding does
(--reuse keeps a store that holds exactly N dead jobs of the queue). Then
run the sluice binary's export of them, "sluice jobs export --store URL -q
'state:archived queue:Q' --format F -o OUT", as its own process, --runs
times: the wall time, the export's rate, its CPU a job (getrusage) and its
peak resident memory (VmHWM of /proc, sampled every 10 ms), the number it
says it wrote checked against N. An export pages the store and writes as it goes,
so its peak memory is the same at 100,000 and at 1,000,000 jobs.

Prints one key=value result line on stdout (the median run's figures and
the largest peak memory); progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res := benchHeader("export", &o.benchOptions)
			return printBenchResult(cmd.OutOrStdout(), &res, benchExport(cmd.Context(), o, lo, cmd.ErrOrStderr(), &res))
		},
	}
	o.addFlags(cmd, time.Hour)
	f := cmd.Flags()
	f.BoolVar(&o.reuse, "reuse", false, "keep the store; if it holds the N dead jobs of the queue, skip the seeding")
	f.StringVar(&o.bin, "sluice-bin", "", "sluice binary to export with (default: sluice beside this binary)")
	f.StringVar(&o.format, "format", "jsonl", "export format: jsonl or csv")
	f.BoolVar(&o.payload, "include-payload", false, "export the payloads too (one more read a job)")
	f.StringVar(&o.out, "out", os.DevNull, "file the export writes")
	f.IntVar(&o.runs, "runs", 3, "exports of the same jobs (the median is reported)")
	return cmd
}

// reExported is the export's closing line on stderr.
var reExported = regexp.MustCompile(`exported (\d+) job\(s\)`)

func benchExport(ctx context.Context, o *exportOptions, lo *cmdline.LogOptions, stderr io.Writer, res *benchResult) error {
	progress := benchProgress(stderr, "export")
	if o.jobs <= 0 || o.batch <= 0 || o.insertConc <= 0 || o.runs <= 0 {
		return fmt.Errorf("--jobs, --batch, --insert-conc and --runs must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	log, closeLog, err := lo.Logger(stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	bin := o.bin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("sluice binary: %w", err)
		}
		bin = filepath.Join(filepath.Dir(exe), "sluice")
	}
	target, err := benchStore(o.store, res)
	if err != nil {
		return err
	}
	res.add("format", o.format)
	res.add("payload", o.payload)
	if target.Backend == "sqlite" && !o.reuse {
		if err := removeSQLiteFile(target.Path); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	store, err := storeurl.Open(ctx, o.store, log)
	if err != nil {
		return err
	}
	have, err := deadHave(ctx, store, o.queue, int64(o.jobs))
	if err != nil {
		store.Close()
		return err
	}
	seedDur := time.Duration(0)
	if have {
		progress("%s holds %d dead jobs: reusing them", redact.URL(o.store), o.jobs)
		res.add("seeded", "reused")
	} else {
		res.add("seeded", "deadline")
		t0 := time.Now()
		var seedRes benchResult // the seeding's own figures are the deadletter scenario's
		if _, err := benchDeadSeedDeadline(ctx, store, &o.benchDeadOptions, progress, &seedRes); err != nil {
			store.Close()
			return err
		}
		seedDur = time.Since(t0)
	}
	res.add("seed_seconds", seedDur)
	// The export reads the file as another process would, with nothing of
	// this one's open (a SQLite store checkpoints its WAL on close).
	if err := store.Close(); err != nil {
		return err
	}

	res.add("load1_before", load1())
	q := fmt.Sprintf("state:archived queue:%s", o.queue)
	type run struct {
		wall, cpu time.Duration
		rssKB     int64
	}
	var runs []run
	for i := range o.runs {
		args := []string{"jobs", "export", "--store", o.store, "-q", q, "--format", o.format, "-o", o.out}
		if o.payload {
			args = append(args, "--include-payload")
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		// No SLUICE_* setting or config file of this environment: the
		// flags alone say what it does.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("export run %d: %w", i+1, err)
		}
		hwm := watchHWM(cmd.Process.Pid)
		err := cmd.Wait()
		wall := time.Since(t0)
		peakKB := hwm()
		if err != nil {
			return fmt.Errorf("export run %d: %w: %s", i+1, err, bytes.TrimSpace(errb.Bytes()))
		}
		m := reExported.FindSubmatch(errb.Bytes())
		if m == nil {
			return fmt.Errorf("export run %d: no count in %q", i+1, errb.String())
		}
		if n, _ := strconv.Atoi(string(m[1])); n != o.jobs {
			return fmt.Errorf("export run %d: exported %d jobs, want %d", i+1, n, o.jobs)
		}
		ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			return fmt.Errorf("export run %d: no rusage", i+1)
		}
		r := run{wall: wall, cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), rssKB: peakKB}
		progress("run %d of %d: %d jobs in %.2fs (%.0f/s), peak RSS %.1f MB", i+1, o.runs, o.jobs, wall.Seconds(),
			float64(o.jobs)/wall.Seconds(), float64(r.rssKB)/1024)
		runs = append(runs, r)
	}
	// The median run by wall time; the peak memory is the largest of all.
	var peak int64
	for _, r := range runs {
		peak = max(peak, r.rssKB)
	}
	slices.SortFunc(runs, func(a, b run) int { return cmp.Compare(a.wall, b.wall) })
	mid := runs[len(runs)/2]
	med := mid.wall.Seconds()
	res.add("runs", o.runs)
	res.add("export_seconds", med)
	res.add("export_per_sec", float64(o.jobs)/med)
	res.add("cpu_us_per_job", float64(mid.cpu.Microseconds())/float64(o.jobs))
	res.add("rss_max_mb", float64(peak)/1024)
	res.add("load1_after", load1())
	return nil
}

// watchHWM samples the peak resident memory (VmHWM) of process pid every
// 10 ms until the returned function is called, after the process has
// exited, and returns the last sample in KiB. The child's ru_maxrss will
// not do: Go starts a child with CLONE_VM, and Linux carries the peak of
// the memory it shared at exec — this process's, a seeding's hundreds of
// MB — into the child's ru_maxrss.
func watchHWM(pid int) func() int64 {
	path := fmt.Sprintf("/proc/%d/status", pid)
	var last atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := readHWM(path); kb > 0 {
				last.Store(kb)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return last.Load()
	}
}

// readHWM reads VmHWM from a /proc status file; 0 when it cannot.
func readHWM(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return n
			}
		}
	}
	return 0
}
