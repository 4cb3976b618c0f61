// Command peers measures the job queues Sluice is compared with, River on
// PostgreSQL and asynq on Redis, with the scenarios of Sluice's own
// sluice-bench (throughput and deadletter), printing one key=value result
// line a run on stdout, the same shape as sluice-bench's. Progress goes to
// stderr. scripts/bench peers builds it and runs it interleaved with
// Sluice.
//
// It is a Go module of its own so that River and asynq never enter
// Sluice's go.mod.
//
// Adding another engine: implement the System interface (system.go) and
// register it in newSystem.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

type options struct {
	system      string
	jobs        int
	concurrency int
	insertBatch int
	insertConc  int
	pgURL       string
	pgMaxConns  int
	redisAddr   string
	redisDB     int
	listCalls   int
	pageSize    int
	timeout     time.Duration

	riverFetchCooldown time.Duration
	riverFetchPoll     time.Duration
	riverInsert        string // many | fast
	riverRetryMode     string // seq | par | tx | txpar
	asynqTaskCheck     time.Duration
	label              string
	noRetry            bool
	analyze            bool
	retryConc          int
}

func usage() {
	fmt.Fprintf(os.Stderr, `usage: peers <throughput|deadletter> [flags]

  throughput  insert N no-op jobs, then time workers completing all N
  deadletter  insert N always-failing jobs (1 attempt), time until all dead,
              then time admin ops: list first page, list deep page, retry all

flags:
`)
	flag.PrintDefaults()
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	scenario := os.Args[1]
	fs := flag.NewFlagSet(scenario, flag.ExitOnError)
	var o options
	fs.StringVar(&o.system, "system", "river", "system under test: river | asynq")
	fs.IntVar(&o.jobs, "jobs", 10000, "number of jobs N")
	fs.IntVar(&o.concurrency, "concurrency", 50, "worker goroutines (river MaxWorkers / asynq Concurrency)")
	fs.IntVar(&o.insertBatch, "insert-batch", 1000, "jobs per batch-insert call (river InsertMany); asynq has no batch API")
	fs.IntVar(&o.insertConc, "insert-conc", 4, "concurrent inserting goroutines (river: each sends batches; asynq: each calls Enqueue)")
	fs.StringVar(&o.pgURL, "pg-url", "postgres://root@127.0.0.1:5432/bench_river?sslmode=disable", "river: Postgres URL (database is created if missing)")
	fs.IntVar(&o.pgMaxConns, "pg-max-conns", 20, "river: pgxpool max connections")
	fs.StringVar(&o.redisAddr, "redis-addr", "127.0.0.1:6379", "asynq: Redis address")
	fs.IntVar(&o.redisDB, "redis-db", 7, "asynq: Redis db index (FLUSHDB'd before each scenario)")
	fs.IntVar(&o.listCalls, "list-calls", 20, "deadletter: calls per list measurement (median reported)")
	fs.IntVar(&o.pageSize, "page-size", 50, "deadletter: page size for list calls")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "overall timeout")
	fs.DurationVar(&o.riverFetchCooldown, "river-fetch-cooldown", 1*time.Millisecond, "river: Config.FetchCooldown (library default 100ms)")
	fs.DurationVar(&o.riverFetchPoll, "river-fetch-poll", 50*time.Millisecond, "river: Config.FetchPollInterval (library default 1s)")
	fs.StringVar(&o.riverInsert, "river-insert", "many", "river: insert API: many (InsertMany) | fast (InsertManyFast, COPY FROM)")
	fs.StringVar(&o.riverRetryMode, "river-retry-mode", "txpar", "river: bulk retry strategy using public API: seq (JobRetry loop) | par (JobRetry, retry-conc goroutines) | tx (JobRetryTx, 1000 per tx) | txpar (tx batches on retry-conc goroutines)")
	fs.DurationVar(&o.asynqTaskCheck, "asynq-task-check", 50*time.Millisecond, "asynq: Config.TaskCheckInterval (library default 1s)")
	fs.StringVar(&o.label, "label", "main", "free-form variant label echoed in the result line")
	fs.BoolVar(&o.noRetry, "no-retry", false, "deadletter: skip the retry-all step (leaves the dead set in place for inspection)")
	fs.BoolVar(&o.analyze, "analyze", false, "deadletter: refresh planner statistics (river: ANALYZE river_job) before the admin measurements; no-op for asynq")
	fs.IntVar(&o.retryConc, "retry-conc", 8, "river: goroutines for par/txpar retry modes")
	fs.Usage = usage
	if scenario == "-h" || scenario == "--help" || scenario == "help" {
		usage()
		fs.PrintDefaults()
		return
	}
	_ = fs.Parse(os.Args[2:])

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	var (
		res result
		err error
	)
	switch scenario {
	case "throughput":
		res, err = runThroughput(ctx, o)
	case "deadletter":
		res, err = runDeadLetter(ctx, o)
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		// A failure is still a result line, so collectors record it.
		res.add("status", "error")
		res.add("error", strings.ReplaceAll(err.Error(), " ", "_"))
		fmt.Println(res.String())
		os.Exit(1)
	}
	res.add("status", "ok")
	fmt.Println(res.String())
}

// result is an ordered list of key=value pairs.
type result struct{ kv [][2]string }

func (r *result) add(k string, v any) {
	var s string
	switch x := v.(type) {
	case float64:
		s = fmt.Sprintf("%.4f", x)
	case time.Duration:
		s = fmt.Sprintf("%.4f", x.Seconds())
	default:
		s = fmt.Sprint(x)
	}
	r.kv = append(r.kv, [2]string{k, s})
}

func (r *result) addMs(k string, d time.Duration) {
	r.kv = append(r.kv, [2]string{k, fmt.Sprintf("%.3f", float64(d.Microseconds())/1000)})
}

func (r result) String() string {
	parts := make([]string, 0, len(r.kv))
	for _, p := range r.kv {
		parts = append(parts, p[0]+"="+p[1])
	}
	return strings.Join(parts, " ")
}

func header(scenario string, o options) result {
	var r result
	r.add("system", o.system)
	r.add("scenario", scenario)
	r.add("label", o.label)
	r.add("jobs", o.jobs)
	r.add("concurrency", o.concurrency)
	r.add("lib", libVersion(o.system))
	r.add("go", runtime.Version())
	r.add("gomaxprocs", runtime.GOMAXPROCS(0))
	return r
}

func libVersion(system string) string {
	mod := map[string]string{
		"river": "github.com/riverqueue/river",
		"asynq": "github.com/hibiken/asynq",
	}[system]
	bi, ok := debug.ReadBuildInfo()
	if !ok || mod == "" {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == mod {
			return d.Path + "@" + d.Version
		}
	}
	return "unknown"
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
