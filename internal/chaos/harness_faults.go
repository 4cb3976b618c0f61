package chaos

// The fault loop: which fault comes next and when, and the faults that
// cut or restart the store.

import (
	"context"
	"math/rand/v2"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/redisserver"
)

func (r *run) chaos(ctx context.Context) error {
	if err := r.topUp(); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(r.o.Seed, 0x5107ce))
	var faults []string
	// The release is not in the mix (FaultRelease): its own clock below.
	for _, f := range []string{FaultKill, FaultStall, FaultTerm, FaultOutage, FaultCut, FaultPanic, FaultPill} {
		for _, g := range r.o.Faults {
			if f == g && r.offers(f) {
				w := AllFaults[f]
				if v, ok := r.o.Weights[f]; ok {
					w = v
				}
				for range w {
					faults = append(faults, f)
				}
			}
		}
	}
	start := time.Now()
	end := start.Add(r.o.Duration)
	stopStream := make(chan struct{})
	streamErr := make(chan error, 1)
	go func() { streamErr <- r.stream(ctx, start, stopStream) }()

	special := 0
	driven := map[string]bool{}
	next := time.Now().Add(r.interval(rng))
	releaseOn := false
	for _, f := range r.o.Faults {
		releaseOn = releaseOn || f == FaultRelease
	}
	relRng := rand.New(rand.NewPCG(r.o.Seed, 0x7e1ea5e))
	nextRelease := time.Now().Add(r.releaseInterval(relRng))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case err := <-streamErr:
			if err != nil {
				return err
			}
			streamErr = nil
		case <-tick.C:
		}
		if err := r.topUp(); err != nil {
			return err
		}
		if releaseOn && !time.Now().Before(nextRelease) {
			nextRelease = time.Now().Add(r.releaseInterval(relRng))
			pick, whole := relRng.Uint64(), relRng.IntN(3) == 0
			// One at a time, beside the loop: a release waits on the store
			// as long as an outage lasts, which must not hold the other
			// faults up.
			if r.releasing.CompareAndSwap(false, true) {
				r.bg.Add(1)
				go func() {
					defer r.bg.Done()
					defer r.releasing.Store(false)
					r.release(ctx, pick, whole)
				}()
			}
		}
		if time.Now().Before(next) || len(faults) == 0 {
			continue
		}
		next = time.Now().Add(r.interval(rng))
		f := faults[rng.IntN(len(faults))]
		// Past half the run, an ensured fault not driven yet goes first.
		if time.Now().After(start.Add(r.o.Duration / 2)) {
			for _, g := range r.o.Ensure {
				if !driven[g] && r.offers(g) && g != FaultRelease {
					f = g
					break
				}
			}
		}
		driven[f] = true
		r.mu.Lock()
		var ws []*proc
		for _, p := range r.live() {
			if !p.frozen {
				ws = append(ws, p)
			}
		}
		r.mu.Unlock()
		var w *proc
		if len(ws) > 0 {
			w = ws[rng.IntN(len(ws))]
		}
		target := ""
		if w != nil && (f == FaultKill || f == FaultStall || f == FaultTerm) {
			target = " " + w.name
		}
		r.log("%s %s%s", time.Now().UTC().Format("15:04:05.000"), f, target)
		switch f {
		case FaultKill:
			if w == nil {
				continue
			}
			r.mu.Lock()
			w.killed = true
			r.mu.Unlock()
			_ = w.cmd.Process.Signal(syscall.SIGKILL)
			<-w.done
			r.rep.Kills++
		case FaultStall:
			if w == nil {
				continue
			}
			if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				continue
			}
			r.mu.Lock()
			w.stopped++
			w.frozen = true
			r.mu.Unlock()
			r.rep.Stalls++
			pause := time.Duration(1500+rng.IntN(1500)) * time.Millisecond // the lease is 1 s
			r.bg.Add(1)
			time.AfterFunc(pause, func() {
				defer r.bg.Done()
				_ = w.cmd.Process.Signal(syscall.SIGCONT)
				r.mu.Lock()
				w.frozen = false
				r.mu.Unlock()
			})
		case FaultTerm:
			if w == nil {
				continue
			}
			r.mu.Lock()
			w.termed = true
			r.mu.Unlock()
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
			r.rep.Terms++
		case FaultOutage:
			// On SQLite the outage is the file locked, private or not: a
			// file has no server to restart and no connections but those of
			// the processes on it, and the run works a queue of its own.
			// On PostgreSQL it is a restart of the harness's own server
			// (private only: a server the harness does not own is never
			// restarted; it gets cuts instead).
			d := time.Duration(1200+rng.IntN(1500)) * time.Millisecond
			r.rep.Outages++
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				var began time.Time
				var err error
				if r.cluster != nil || r.redisSrv != nil {
					began, err = r.restart(ctx, d)
				} else {
					began, err = lockSQLite(r.sqlite, d)
				}
				if err != nil {
					r.log("outage: %v", err)
					return
				}
				r.mu.Lock()
				r.outageAt = append(r.outageAt, [2]time.Time{began, time.Now()})
				r.mu.Unlock()
			}()
		case FaultCut:
			// The server ends every connection of this run's workers
			// (named by their application_name) but the one that asks. The
			// harness's own engine meets cut connections in restarts and
			// copes (enqueues are sent again under their ids, reads retried).
			began := time.Now()
			n, err := r.cut(ctx)
			// The server may be down (a restart of the private cluster
			// under way): cut once it is back, within a few seconds.
			for retry := 0; err != nil && retry < 20 && ctx.Err() == nil; retry++ {
				time.Sleep(250 * time.Millisecond)
				n, err = r.cut(ctx)
			}
			if err != nil {
				// No cut happened, so an ensured cut is still owed.
				r.log("cut: %v", err)
				driven[FaultCut] = false
				continue
			}
			r.log("cut: %d connections ended", n)
			r.rep.Cuts++
			r.mu.Lock()
			r.outageAt = append(r.outageAt, [2]time.Time{began, time.Now()})
			r.mu.Unlock()
		case FaultPanic:
			special++
			times, class := 1, classPanic1
			if rng.IntN(2) == 0 {
				times, class = 1000, classPanicN
			}
			if err := r.enqueue(ctx, class, []engine.EnqueueParams{{Queue: r.queue, Kind: KindPanic,
				Args: Panic{Times: times, N: special, Run: r.queue}}}); err != nil {
				return err
			}
			r.rep.Panics++
		case FaultPill:
			special++
			if err := r.enqueue(ctx, classPill, []engine.EnqueueParams{{Queue: r.queue, Kind: KindExit,
				Args: Exit{N: special, Run: r.queue}}}); err != nil {
				return err
			}
			r.rep.Pills++
		}
	}
	close(stopStream)
	if streamErr != nil {
		if err := <-streamErr; err != nil {
			return err
		}
	}
	r.bg.Wait() // every zombie thawed, every lock let go
	r.log("faults over after %s: %d SIGKILL, %d SIGSTOP/SIGCONT, %d SIGTERM, %d store outages, %d connection cuts, %d panics, %d pills, %d releases (%d of a fingerprint); %d jobs",
		r.o.Duration, r.rep.Kills, r.rep.Stalls, r.rep.Terms, r.rep.Outages, r.rep.Cuts, r.rep.Panics, r.rep.Pills,
		r.rep.Releases, r.rep.FingerprintReleases, len(r.ids))
	return nil
}

// interval is the time to the next fault: uniform on [FaultEvery/2, 3/2 FaultEvery].
func (r *run) interval(rng *rand.Rand) time.Duration {
	m := int64(r.o.FaultEvery)
	return time.Duration(m/2 + rng.Int64N(m+1))
}

// cut ends the workers' connections: pg_terminate_backend on
// PostgreSQL, CLIENT KILL on Redis, of the connections named r.app.
func (r *run) cut(ctx context.Context) (int, error) {
	if r.redis {
		return redisserver.KillClients(ctx, r.url, r.app)
	}
	return pgcluster.Terminate(ctx, r.url, r.app)
}

// withQuery adds key=value to a URL's query.
func withQuery(raw, key, value string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + key + "=" + url.QueryEscape(value)
}

// restart stops the harness's own server — PostgreSQL: a fast shutdown
// (its sessions are ended); Redis with appendfsync always: SIGKILL, with
// everysec: SHUTDOWN —, keeps it down for d and starts it again.
func (r *run) restart(ctx context.Context, d time.Duration) (time.Time, error) {
	r.clusterMu.Lock()
	defer r.clusterMu.Unlock()
	began := time.Now()
	r.down.Store(true)
	defer r.down.Store(false)
	if r.redisSrv != nil {
		halt := r.redisSrv.Kill
		if r.o.RedisFsync == "everysec" {
			halt = r.redisSrv.Stop
		}
		if err := halt(ctx); err != nil {
			return began, err
		}
		time.Sleep(d)
		return began, r.redisSrv.Resume(ctx)
	}
	if err := r.cluster.Stop(ctx); err != nil {
		return began, err
	}
	time.Sleep(d)
	return began, r.cluster.Resume(ctx)
}
