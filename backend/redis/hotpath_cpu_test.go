package redis_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/internal/redisserver"
)

// TestHotPathCPU reports the Redis CPU a job costs on the hot path
// (insert, claim, complete) on a private server, phase by phase, with the
// commands the scripts call per job (INFO commandstats): CPU per job says
// more than a rate on a shared, loaded machine. It asserts nothing about
// time; it runs only when SLUICE_HOTPATH_CPU=N (jobs) is set:
//
//	SLUICE_HOTPATH_CPU=20000 go test -run TestHotPathCPU -v ./backend/redis/
//
// SLUICE_HOTPATH_REDIS=host:port runs it on that server instead of a
// private one it starts (its statistics are reset: never a shared one).
func TestHotPathCPU(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SLUICE_HOTPATH_CPU"))
	if n <= 0 {
		t.Skip("SLUICE_HOTPATH_CPU=N unset")
	}
	ctx := context.Background()
	// SLUICE_HOTPATH_REDIS names a server of the caller's own (to profile
	// it, say); it must be private: its statistics are reset.
	addr := os.Getenv("SLUICE_HOTPATH_REDIS")
	if addr == "" {
		addr = redisserver.Private(t, redisserver.Options{}).Addr()
	}
	s := redistest.NewOn(t, "redis://"+addr+"/0?read_timeout=2m")
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	phase := func(name string, f func()) { cpuPhase(t, c, n, name, f) }
	// One job through first, so no phase pays for loading its script.
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: benchJobs(1, -1), RefuseQuarantined: true}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", WorkerID: "w", LeaseID: "l", Limit: 50,
		Kinds: map[string]int{"email": 1}, LeaseDuration: time.Minute}); err != nil || len(r.Jobs) != 1 {
		t.Fatal("warm-up claim: ", err)
	} else if _, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{
		{JobRef: backend.JobRef{ID: r.Jobs[0].ID, LeaseID: "l", Fence: r.Jobs[0].Fence}}}, EndProbation: true}); err != nil {
		t.Fatal(err)
	}
	phase("insert", func() {
		for i := 0; i < n; i += 1000 {
			if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: benchJobs(min(1000, n-i), i), RefuseQuarantined: true}); err != nil {
				t.Fatal(err)
			}
		}
	})
	var items []backend.JobCompleteItem
	phase("claim", func() { items = claimAll(t, s, "l", map[string]int{"email": 1}) })
	// A claim that finds nothing: what a script costs before its first job
	// (the shared library, the queue's checks), reported per n jobs' worth
	// of claims of 50, as the claim phase ran them.
	phase("empty", func() {
		for i := 0; i < n/50; i++ {
			if _, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", WorkerID: "w", LeaseID: "l", Limit: 50,
				Kinds: map[string]int{"email": 1}, LeaseDuration: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
	})
	if len(items) != n {
		t.Fatalf("claimed %d of %d", len(items), n)
	}
	phase("complete", func() { completeAll(t, s, items) })
}

// claimAll claims every available job of the queue "default" under lease
// (kinds as JobClaimParams.Kinds), 50 a claim as a worker of concurrency
// 50 does, and returns them as completion items.
func claimAll(t *testing.T, s *redis.Store, lease string, kinds map[string]int) []backend.JobCompleteItem {
	t.Helper()
	var items []backend.JobCompleteItem
	for {
		r, err := s.JobClaim(context.Background(), &backend.JobClaimParams{Queue: "default", WorkerID: "w", LeaseID: lease,
			Limit: 50, Kinds: kinds, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range r.Jobs {
			items = append(items, backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: lease, Fence: j.Fence}})
		}
		if len(r.Jobs) < 50 {
			return items
		}
	}
}

// completeAll completes items in batches of 200, as the completer does.
func completeAll(t *testing.T, s *redis.Store, items []backend.JobCompleteItem) {
	t.Helper()
	for i := 0; i < len(items); i += 200 {
		errs, err := s.JobCompleteMany(context.Background(), &backend.JobCompleteManyParams{Items: items[i:min(i+200, len(items))],
			EndProbation: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
	}
}

// cpuPhase runs f on the private server c and logs the Redis CPU it cost
// per job of n, with the commands its scripts called per job (INFO
// commandstats, reset first).
func cpuPhase(t *testing.T, c *goredis.Client, n int, name string, f func()) {
	t.Helper()
	ctx := context.Background()
	c.ConfigResetStat(ctx)
	cpu0 := serverCPU(t, c)
	f()
	cpu := serverCPU(t, c) - cpu0
	stats := commandStats(t, c)
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s redis cpu %6.2f µs/job;", name, cpu.Seconds()*1e6/float64(n))
	var total float64
	names := make([]string, 0, len(stats))
	for k := range stats {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == "evalsha" || k == "eval" || k == "config|resetstat" || k == "info" {
			continue
		}
		if v := float64(stats[k]) / float64(n); v >= 0.005 {
			total += v
			fmt.Fprintf(&b, " %s %.2f", k, v)
		}
	}
	fmt.Fprintf(&b, " (calls/job %.2f, scripts %d)", total, stats["evalsha"]+stats["eval"])
	t.Log(b.String())
}

func serverCPU(t *testing.T, c *goredis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, l := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

func commandStats(t *testing.T, c *goredis.Client) map[string]int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(l, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if k, v, _ := strings.Cut(kv, "="); k == "calls" {
				out[name], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return out
}
