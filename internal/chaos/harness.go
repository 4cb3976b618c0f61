package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/redisserver"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// Faults the driver can pick.
const (
	FaultKill   = "kill"   // SIGKILL a worker, start another
	FaultStall  = "stall"  // SIGSTOP a worker past its lease, then SIGCONT: a zombie
	FaultTerm   = "term"   // SIGTERM a worker (graceful), start another
	FaultOutage = "outage" // the store goes away past a lease (SQLite: its file locked against every writer; a private PostgreSQL or Redis: its server restarted)
	FaultCut    = "cut"    // PostgreSQL: the server ends the workers' connections (pg_terminate_backend); Redis: CLIENT KILL of them
	FaultPanic  = "panic"  // enqueue a job whose handler panics
	FaultPill   = "pill"   // enqueue a poison pill: every run kills its process
	// FaultRelease is an operator releasing quarantined poison: one job
	// (ReleaseJob, its fingerprint stays quarantined) or, one time in
	// three, its whole fingerprint (ReleaseFingerprint, the record goes on
	// probation). Either way the job runs on probation: its next crash
	// quarantines it again at once. It is not in the weighted mix: it runs
	// on a clock and a seeded rng of its own (releaseInterval), so the
	// other faults' choices for a seed, and the rates AllFaults calibrates,
	// are what they were without it.
	FaultRelease = "release"
)

// AllFaults is the mix of faults, each with its weight.
//
// Rates, and why "no innocent job quarantined" means something with the
// engine's real crash limit (3): a SIGKILL or a stall charges a crash to
// every job running in that process, innocent or not, so random faults
// alone can push an innocent job to the limit. A job is hit on a run with
// probability p ≈ (process deaths per second per worker) × (how long a
// run holds its lease: 10-60 ms of handler plus the store's writes), and
// quarantine by chance alone needs three hits in a row: ≈ p³ per job,
// N·p³ per run of N jobs. Measured (the report's crash_rate=, the share of
// innocent jobs that crashed at least once): p ≈ 0.0126 with 3 workers
// and a fault every 1.5 s on average, 8 of 10 weighted picks ending a
// process (kill 3, stall 2, a pill's three runs at weight 1). With that
// rate, chance quarantines an innocent in about one 5 000-job run in 100,
// and in one 50 000-job run in 10 — too often for a violation to mean
// anything. So the default time between faults grows with the jobs
// (DefaultFaultEvery): p is held to (0.01/N)^⅓, and chance alone
// quarantines an innocent in fewer than one run in 100 of any size (1 s
// between faults at 1 500 jobs, 1.5 s at 5 000, 3.3 s at 50 000), while
// N·p — the jobs that crash and recover, which is what is tested — still
// grows with N. An innocent in quarantine is then, within that margin,
// the engine's doing (a pill dragging the same innocents down with it, a
// crash charged to a live process), and the violation says which faults
// its crashes came from. crashed2= counts innocents that crashed twice.
// One path is left out: an innocent dragged twice by a pill, as the
// engine allows, then hit by a fault from outside on its lone run. Its
// chance is about crashed2= times the crash rate, far above p³: it is
// counted (pill_then_chance=), not a violation (pillThenChance).
//
// A cut (PostgreSQL and a single Redis server) ends no process and charges nothing: it is on
// top of the mix the rates were measured with.
//
// A release (weight 0: it is not picked from the mix, see FaultRelease)
// adds a run to a poison job that was done: a released pill kills one
// more process, as a pill's own runs do.
var AllFaults = map[string]int{FaultKill: 3, FaultStall: 2, FaultTerm: 2, FaultOutage: 1, FaultPanic: 1, FaultPill: 1, FaultCut: 1, FaultRelease: 0}

// DefaultFaultEvery is the mean time between faults for a run of jobs
// innocent jobs: p, the chance a run is hit, held to (0.01/jobs)^⅓ (see
// AllFaults), from p ≈ 0.0126 measured at a fault every 1.5 s; within
// 500 ms and 10 s.
func DefaultFaultEvery(jobs int) time.Duration {
	p := math.Cbrt(0.01 / float64(max(jobs, 1)))
	d := time.Duration(float64(1500*time.Millisecond) * 0.0126 / p)
	return min(max(d, 500*time.Millisecond), 10*time.Second)
}

// Options configure one harness run.
type Options struct {
	// Store is the store's URL. Empty or with Private set, the harness
	// makes a private store of its own: a temp SQLite file, or, when
	// Store is a postgres:// URL, a PostgreSQL cluster of its own
	// (internal/pgcluster), or, when it is a redis:// URL, a
	// redis-server of its own (redisserver.Start, with AOF), whose
	// outage is a server restart.
	Store   string
	Private bool
	// RedisFsync is the appendfsync of a private Redis: "always" (the
	// default; its outage is a SIGKILL, and nothing acknowledged may be
	// lost) or "everysec" (its outage is a SHUTDOWN, which fsyncs: a
	// SIGKILL would lose up to a second of acknowledged writes, which no
	// invariant survives).
	RedisFsync string
	// Duration of the faults; the drain follows.
	Duration time.Duration
	Seed     uint64
	Workers  int // worker processes at once (3)
	// Jobs is the stream of innocent jobs, enqueued evenly over Duration;
	// panics and pills come on top.
	Jobs       int
	CrashLimit int // engine.DefaultCrashLimit when 0
	// SleepMS is the range of an innocent job's run, in milliseconds
	// ([10, 60] when zero; AllFaults explains why short).
	SleepMS [2]int
	// Faults picks from AllFaults (nil: all of them).
	Faults []string
	// Weights replace AllFaults' weights of the faults they name (a short
	// run that must see a store fault weighs it more).
	Weights map[string]int
	// Ensure names faults driven at least once (if the store offers
	// them): one not picked by half the run is the next one.
	Ensure []string
	// FaultEvery is the mean time between faults (DefaultFaultEvery).
	FaultEvery time.Duration
	// ReleaseEvery is the mean time between an operator's releases
	// (FaultRelease): 4 × FaultEvery when zero.
	ReleaseEvery time.Duration
	// DefeatFencing starts the workers with --defeat-fencing: the checker
	// must then report violations.
	DefeatFencing bool
	// Bin is the testworker binary (this executable when empty).
	Bin string
	// Keep keeps the work directory (logs, side table, private store).
	Keep bool
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// Report is what a run found. Line is its summary.
type Report struct {
	Store, Queue, Dir                           string
	Seed                                        uint64
	Jobs, Workers                               int
	Kills, Stalls, Terms, Outages, Cuts, Panics int
	Pills                                       int
	PillDeaths                                  int
	// Releases counts the quarantined poison jobs an operator released
	// during the run, FingerprintReleases those of them released with
	// their whole fingerprint. Requarantined counts the released jobs
	// that ended quarantined again on probation; ProbationReruns the runs
	// of a released job that ended uncharged (its worker frozen, stopped
	// or killed, or the store away) before the run that quarantined it.
	Releases, FingerprintReleases  int
	Requarantined, ProbationReruns int
	// StartFailures counts workers that exited by themselves with an
	// error rather than a signal: started while the store was down, they
	// could not open it.
	StartFailures                                 int
	DrainSeconds                                  float64
	Completed, Quarantined, Crashed, CrashedTwice int
	Refused, Unrecorded                           int
	// LiveCharged counts crashes charged to a process that lived, away
	// from any store outage: its heartbeat lapsed (a process starved of
	// CPU looks gone to the others). Reported, not a violation; after an
	// outage it is one.
	LiveCharged int
	// PillThenChance counts innocents quarantined after two crashes beside
	// a pill and one from outside (see pillThenChance). Reported, not a
	// violation.
	PillThenChance int
	// CrashRate is the share of innocent jobs that crashed at least once.
	CrashRate  float64
	Violations []string
}

// Line is the report as key=value pairs.
func (r *Report) Line() string {
	return fmt.Sprintf("store=%s seed=%d jobs=%d workers=%d kills=%d stalls=%d terms=%d outages=%d cuts=%d panics=%d pills=%d pill_deaths=%d "+
		"releases=%d fp_releases=%d requarantined=%d probation_reruns=%d "+
		"start_failures=%d completed=%d quarantined=%d crashed=%d crashed2=%d crash_rate=%.4f live_charged=%d pill_then_chance=%d refused=%d unrecorded=%d drain_seconds=%.1f violations=%d",
		r.Store, r.Seed, r.Jobs, r.Workers, r.Kills, r.Stalls, r.Terms, r.Outages, r.Cuts, r.Panics, r.Pills, r.PillDeaths,
		r.Releases, r.FingerprintReleases, r.Requarantined, r.ProbationReruns, r.StartFailures,
		r.Completed, r.Quarantined, r.Crashed, r.CrashedTwice, r.CrashRate, r.LiveCharged, r.PillThenChance, r.Refused, r.Unrecorded, r.DrainSeconds, len(r.Violations))
}

// job classes
const (
	classSleep  = "sleep"  // innocent
	classPanic1 = "panic1" // innocent: panics once, then succeeds
	classPanicN = "panicN" // poison: panics every run
	classPill   = "pill"   // poison: kills its process every run
)

func innocent(class string) bool { return class == classSleep || class == classPanic1 }

// proc is one worker process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	killed  bool // SIGKILL by the harness
	termed  bool // SIGTERM by the harness
	stopped int  // SIGSTOPs by the harness
	frozen  bool // stopped right now
	// failed: it exited by itself with an error status, not a signal (a
	// pill kills its process with SIGKILL; a worker that cannot open its
	// store exits 1).
	failed bool
	// unasked: it exited while the harness had not asked it to (killed,
	// SIGTERM, the end of the run): a pill took it down.
	unasked  bool
	stopping bool
	exitedAt time.Time
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

type run struct {
	o      Options
	rep    *Report
	log    func(format string, args ...any)
	url    string
	sqlite string // the store's file when it is SQLite
	// cluster is the harness's own PostgreSQL server (--private on a
	// postgres:// URL); clusterMu keeps its restarts one at a time.
	cluster  *pgcluster.Cluster
	redisSrv *redisserver.Server // the harness's own Redis (--private on a redis:// URL)
	redis    bool                // the store is Redis
	// redisOne: one Redis server, not a cluster, whose workers' connections
	// a cut can tell apart by name (a cluster client is always named
	// after the namespace, the harness's own connections too).
	redisOne  bool
	clusterMu sync.Mutex
	down      atomic.Bool // the cluster is stopped for an outage
	postgres  bool        // the store is PostgreSQL
	workerURL string      // the store URL the workers get
	app       string      // PostgreSQL: the application_name of the workers' connections
	side      string
	queue     string
	e         *engine.Engine
	store     backend.Store
	mu        sync.Mutex
	procs     []*proc
	spawned   int
	ids       []string
	class     map[string]string
	// exitedAt: when each process exited, for the checker.
	exitedAt map[string]time.Time
	// outageAt: when each store outage began and ended.
	outageAt [][2]time.Time
	// crashedInnocent: the innocent jobs that crashed at least once.
	crashedInnocent map[string]bool
	// releases: each operator release, in order (release.go); releasing
	// is set while one is under way.
	releases  []release
	releasing atomic.Bool
	bg        sync.WaitGroup
}

// Run runs the harness: workers on the store, faults for the duration,
// a drain, then the checker. A run that could not be carried out returns
// an error; broken invariants are the report's Violations.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Workers <= 0 {
		o.Workers = 3
	}
	if o.Jobs <= 0 {
		o.Jobs = 2000
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.CrashLimit <= 0 {
		o.CrashLimit = engine.DefaultCrashLimit
	}
	if o.FaultEvery <= 0 {
		o.FaultEvery = DefaultFaultEvery(o.Jobs)
	}
	if o.ReleaseEvery <= 0 {
		o.ReleaseEvery = 4 * o.FaultEvery
	}
	if o.SleepMS[1] <= 0 {
		o.SleepMS = [2]int{10, 60}
	}
	if o.SleepMS[1] < o.SleepMS[0] {
		return nil, fmt.Errorf("chaos: sleep range %v", o.SleepMS)
	}
	if o.Faults == nil {
		for f := range AllFaults {
			o.Faults = append(o.Faults, f)
		}
	}
	for _, f := range o.Faults {
		if _, ok := AllFaults[f]; !ok {
			return nil, fmt.Errorf("chaos: unknown fault %q (want kill, stall, term, outage, cut, panic, pill, release)", f)
		}
	}
	if o.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Bin = exe
	}
	dir, err := os.MkdirTemp("", "sluice-chaos-")
	if err != nil {
		return nil, err
	}
	r := &run{o: o, rep: &Report{Seed: o.Seed, Dir: dir}, class: map[string]string{}, crashedInnocent: map[string]bool{}}
	r.log = func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "chaos: "+format+"\n", args...)
		}
	}
	defer func() {
		if !o.Keep && len(r.rep.Violations) == 0 {
			os.RemoveAll(dir)
		} else {
			r.log("work directory kept: %s (worker logs, side table)", dir)
		}
	}()
	err = r.setup(ctx, dir)
	if r.cluster != nil {
		defer r.cluster.Close()
	}
	if r.redisSrv != nil {
		defer r.redisSrv.Close()
	}
	if err != nil {
		return r.rep, err
	}
	defer r.store.Close()
	defer r.killAll()
	if err := r.chaos(ctx); err != nil {
		return r.rep, err
	}
	if err := r.drain(ctx); err != nil {
		return r.rep, err
	}
	r.stopAll()
	if err := r.check(ctx); err != nil {
		return r.rep, err
	}
	return r.rep, nil
}

func (r *run) setup(ctx context.Context, dir string) error {
	r.url = r.o.Store
	if r.o.Private || r.url == "" {
		t, err := storeurl.Parse(r.url)
		switch {
		case r.url != "" && err != nil:
			return err
		case r.url != "" && t.Backend == "postgres":
			// The URL names the backend only: the store is a cluster of
			// the harness's own, which it may restart.
			c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 200})
			if err != nil {
				return err
			}
			r.cluster = c
			r.url = c.URL()
		case r.url != "" && t.Backend == "redis":
			fsync := r.o.RedisFsync
			if fsync == "" {
				fsync = "always"
			}
			s, err := redisserver.Start(ctx, redisserver.Options{AppendFsync: fsync, Dir: filepath.Join(dir, "redis")})
			if err != nil {
				return err
			}
			r.redisSrv = s
			r.url = s.URL() + "?ns=chaos"
		case r.url == "" || t.Backend == "sqlite":
			r.url = "sqlite://" + filepath.Join(dir, "store.db")
		default:
			return fmt.Errorf("chaos: --private on a %s store: not built yet: %w", t.Backend, engine.ErrUnsupported)
		}
	}
	t, err := storeurl.Parse(r.url)
	if err != nil {
		return err
	}
	r.postgres = t.Backend == "postgres"
	r.redis = t.Backend == "redis"
	if r.redis {
		rt, err := redis.ParseURL(r.url)
		if err != nil {
			return err
		}
		r.redisOne = !rt.Cluster
	}
	r.rep.Store = t.Backend
	if t.Backend == "sqlite" {
		r.sqlite = t.Path
	}
	r.side = filepath.Join(dir, "side.db")
	if err := CreateSideTable(r.side); err != nil {
		return err
	}
	// The harness sets its store up itself: it always migrates (the
	// workers, told nothing, find it migrated).
	r.store, err = storeurl.Open(ctx, pgcluster.Migrating(r.url), nil)
	if err != nil {
		return err
	}
	// An engine that only enqueues and reads: no queues, no maintenance,
	// so every claim, crash and reap is the workers'.
	r.e, err = engine.New(r.store, engine.Config{NoMaintenance: true})
	if err != nil {
		return err
	}
	if err := Register(r.e); err != nil {
		return err
	}
	// A queue of this run's own, so a store that is not private (or a
	// file reused) holds other runs' jobs beside ours untouched.
	r.queue = fmt.Sprintf("chaos-%d-%x", r.o.Seed, time.Now().UnixNano()&0xffffffff)
	// On PostgreSQL the workers' connections carry a name of this run's
	// own, so that a cut ends theirs and nobody else's: a shared server
	// carries other runs' and tests' "sluice" connections.
	// A URL that names the connections already keeps its name.
	r.workerURL = r.url
	if r.postgres {
		r.app = "sluice_" + strings.TrimPrefix(r.queue, "chaos-")
		if u, err := url.Parse(r.url); err == nil && u.Query().Get("application_name") != "" {
			r.app = u.Query().Get("application_name")
		}
		r.workerURL = pgcluster.WithAppName(r.url, r.app)
	}
	// On one Redis server the same, by client name (CLIENT SETNAME, the
	// URL's client_name): the harness's own connections keep the
	// backend's name, so a cut spares them.
	if r.redisOne {
		r.app = "sluice_" + strings.TrimPrefix(r.queue, "chaos-")
		if u, err := url.Parse(r.url); err == nil && u.Query().Get("client_name") != "" {
			r.app = u.Query().Get("client_name")
		} else {
			r.workerURL = withQuery(r.url, "client_name", r.app)
		}
	}
	r.rep.Queue = r.queue
	r.log("store %s (%s), queue %s, side table %s, seed %d", redact.URL(r.url), r.rep.Store, r.queue, r.side, r.o.Seed)
	return nil
}

// spawn starts one worker process.
func (r *run) spawn() (*proc, error) {
	r.spawned++
	name := fmt.Sprintf("chaos-%d", r.spawned)
	logPath := filepath.Join(r.rep.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"worker",
		"--store", r.workerURL,
		"--queues", r.queue,
		"--worker-id", name,
		"--concurrency", "8",
		"--lease", "1s",
		"--heartbeat", "200ms",
		"--poll", "50ms",
		"--maintenance-interval", "100ms",
		"--crash-backoff", "50ms",
		"--crash-limit", fmt.Sprint(r.o.CrashLimit),
		"--record", r.side,
		"--log-level", "info",
	}
	if r.o.DefeatFencing {
		args = append(args, "--defeat-fencing")
	}
	cmd := exec.Command(r.o.Bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		r.mu.Lock()
		p.err = err
		p.unasked = !p.killed && !p.termed && !p.stopping
		if ps := cmd.ProcessState; p.unasked && ps != nil && ps.Exited() && ps.ExitCode() != 0 {
			p.unasked, p.failed = false, true
		}
		p.exitedAt = time.Now()
		r.mu.Unlock()
		close(p.done)
	}()
	r.procs = append(r.procs, p)
	r.rep.Workers = r.spawned
	return p, nil
}

// live are the workers that run and were not asked to stop.
func (r *run) live() []*proc {
	var out []*proc
	for _, p := range r.procs {
		if !p.exited() && !p.termed {
			out = append(out, p)
		}
	}
	return out
}

// topUp starts workers until Workers run. Not while the harness's own
// server is down: a worker cannot start without its store.
func (r *run) topUp() error {
	if r.down.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.live()) < r.o.Workers {
		if _, err := r.spawn(); err != nil {
			return err
		}
	}
	return nil
}

// enqueue adds jobs of one class and remembers them. Each job gets its id
// here, so that a batch whose answer a fault cut (a PostgreSQL connection
// ended, a server restarting) is sent again harmlessly: the same id with
// the same content is the same job.
func (r *run) enqueue(ctx context.Context, class string, ps []engine.EnqueueParams) error {
	if len(ps) == 0 {
		return nil
	}
	for i := range ps {
		if ps[i].ID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			ps[i].ID = id.String()
		}
	}
	var res []engine.EnqueueResult
	err := r.retry(ctx, "enqueue", func() error {
		var err error
		res, err = r.e.EnqueueMany(ctx, ps)
		return err
	})
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range res {
		if x.Err != nil {
			return fmt.Errorf("enqueue %s job %d: %w", class, i, x.Err)
		}
		r.ids = append(r.ids, x.Job.ID)
		r.class[x.Job.ID] = class
	}
	return nil
}

// stream enqueues the innocent jobs evenly over the duration.
func (r *run) stream(ctx context.Context, start time.Time, stop <-chan struct{}) error {
	rng := rand.New(rand.NewPCG(r.o.Seed, 1))
	sent := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for sent < r.o.Jobs {
		last := false
		select {
		case <-stop:
			last = true
		case <-tick.C:
		}
		want := r.o.Jobs
		if !last {
			want = min(r.o.Jobs, int(float64(r.o.Jobs)*float64(time.Since(start))/float64(r.o.Duration))+1)
		}
		var ps []engine.EnqueueParams
		for ; sent < want; sent++ {
			ps = append(ps, engine.EnqueueParams{Queue: r.queue, Kind: KindSleep,
				Args: Sleep{MS: r.o.SleepMS[0] + rng.IntN(r.o.SleepMS[1]-r.o.SleepMS[0]+1), N: sent, Run: r.queue}})
			if len(ps) == 500 {
				if err := r.enqueue(ctx, classSleep, ps); err != nil {
					return err
				}
				ps = nil
			}
		}
		if err := r.enqueue(ctx, classSleep, ps); err != nil {
			return err
		}
	}
	return nil
}

// drain waits for every job to reach a terminal state, with workers kept
// topped up (a pill still kills the process that runs it). The bound is a
// harness timeout that grows with the work left, not a claim of speed:
// 30 s, plus 40 ms a job left, plus 5 s a poison job left and 5 s a
// release (each run of a pill costs a process and its replacement's
// start; a released pill runs once more).
func (r *run) drain(ctx context.Context) error {
	started := time.Now()
	left, err := r.notTerminal(ctx)
	if err != nil {
		return err
	}
	poison := 0
	for _, c := range r.class {
		if !innocent(c) {
			poison++
		}
	}
	poison += len(r.releases)
	bound := 30*time.Second + time.Duration(left)*40*time.Millisecond + time.Duration(poison)*5*time.Second
	r.log("draining %d jobs not yet terminal (bound %s)", left, bound.Round(time.Second))
	for left > 0 {
		if time.Since(started) > bound {
			r.rep.DrainSeconds = time.Since(started).Seconds()
			r.violate("drain: %d jobs not terminal %s after the faults stopped (the bound for %d jobs left)", left, bound.Round(time.Second), left)
			return nil
		}
		if err := r.topUp(); err != nil {
			return err
		}
		time.Sleep(250 * time.Millisecond)
		if left, err = r.notTerminal(ctx); err != nil {
			return err
		}
	}
	r.rep.DrainSeconds = time.Since(started).Seconds()
	return nil
}

// notTerminal counts the run's jobs not in a terminal state, from the
// maintained counters (the checker compares them with the jobs).
func (r *run) notTerminal(ctx context.Context) (int, error) {
	var c *engine.Counts
	err := r.retry(ctx, "counts", func() error {
		var err error
		c, err = r.e.Counts(ctx, r.queue)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("counts: %w", err)
	}
	var term int64
	for _, st := range engine.TerminalStates() {
		term += c.Total[st]
	}
	r.mu.Lock()
	n := len(r.ids)
	r.mu.Unlock()
	return max(0, n-int(term)), nil
}

// stopAll stops every worker gracefully (SIGTERM), then kills what is left.
func (r *run) stopAll() {
	r.mu.Lock()
	procs := append([]*proc(nil), r.procs...)
	for _, p := range procs {
		p.stopping = true
	}
	r.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(30 * time.Second)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			r.log("%s did not stop within 30s of SIGTERM; killing it", p.name)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (r *run) killAll() {
	for _, p := range r.procs {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// offers reports whether fault f can be driven at this run's store.
func (r *run) offers(f string) bool {
	switch f {
	case FaultOutage:
		return r.sqlite != "" || r.cluster != nil || r.redisSrv != nil
	case FaultCut:
		return r.postgres || r.redisOne
	}
	return true
}

// retry runs f until it succeeds or a minute has passed: the harness's
// own calls meet the same cut connections and restarts as the workers.
// Only calls that are safe to repeat come here (reads, and enqueues with
// their ids).
func (r *run) retry(ctx context.Context, what string, f func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || r.sqlite != "" || answered(err) {
			return err
		}
		r.log("%s: %v (again in 250ms)", what, err)
		time.Sleep(250 * time.Millisecond)
	}
}

// answered reports whether err is the store's answer (a sentinel of the
// engine), not a failure to reach it: asking again would answer the same.
func answered(err error) bool {
	for _, s := range []error{engine.ErrNotFound, engine.ErrInvalid, engine.ErrConflict, engine.ErrUnsupported,
		engine.ErrQuarantined, engine.ErrPayloadTooLarge} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func (r *run) violate(format string, args ...any) {
	r.rep.Violations = append(r.rep.Violations, fmt.Sprintf(format, args...))
}

// lockSQLite holds the SQLite file's write lock for d from a connection of
// its own (BEGIN EXCLUSIVE), so every worker's writes wait — heartbeats,
// claims, completions, the reaper — and then lets go: a store that goes
// away past a lease and comes back.
func lockSQLite(path string, d time.Duration) (time.Time, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return time.Time{}, err
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		return time.Time{}, fmt.Errorf("lock the store: %w", err)
	}
	began := time.Now()
	time.Sleep(d)
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		return began, fmt.Errorf("unlock the store: %w", err)
	}
	return began, nil
}

// FaultList parses a comma-separated list of faults ("" or "all": all).
func FaultList(s string) []string {
	if s == "" || s == "all" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
