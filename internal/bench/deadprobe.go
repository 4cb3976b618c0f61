package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/redis"
)

// batchTimer is the store the bulk retry runs on, timing each of its
// batches (one transaction on SQLite and PostgreSQL, one script on Redis,
// plus the round trip): the slowest is what the workers' writes may wait
// behind.
type batchTimer struct {
	backend.Store
	mu  sync.Mutex
	lat []time.Duration
}

func (b *batchTimer) OperationProcessBatch(ctx context.Context, p *backend.OperationProcessBatchParams) (*backend.OperationBatchResult, error) {
	t := time.Now()
	r, err := b.Store.OperationProcessBatch(ctx, p)
	d := time.Since(t)
	b.mu.Lock()
	b.lat = append(b.lat, d)
	b.mu.Unlock()
	return r, err
}

// stats reports the batches, their median, p99 and slowest.
func (b *batchTimer) stats() (n int, p50, p99, top time.Duration) {
	b.mu.Lock()
	lat := slices.Clone(b.lat)
	b.mu.Unlock()
	if len(lat) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(lat)
	return len(lat), apiPercentile(lat, 50), apiPercentile(lat, 99), lat[len(lat)-1]
}

// redisProbe reads what a run costs Redis: used_memory
// and the SLOWLOG entries written meanwhile. Everything it does is read
// only: the shared server's slow log is never reset nor its threshold
// changed, so entries are told apart by id and by our namespace's keys.
type redisProbe struct {
	c  goredis.UniversalClient
	ns string
}

// newRedisProbe opens the probe's own client from the store's URL (the
// store keeps its client out of its public API); nil for another store.
func newRedisProbe(s backend.Store) (*redisProbe, error) {
	rs, ok := s.(*redis.Store)
	if !ok {
		return nil, nil
	}
	t, err := redis.ParseURL(rs.URL())
	if err != nil {
		return nil, fmt.Errorf("redis probe: %w", err)
	}
	var c goredis.UniversalClient
	if t.Cluster {
		c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: t.Addrs})
	} else {
		c = goredis.NewClient(t.Options)
	}
	return &redisProbe{c: c, ns: "{" + rs.Namespace() + "}"}, nil
}

// close closes the probe's client; a nil probe has none.
func (p *redisProbe) close() {
	if p != nil {
		p.c.Close()
	}
}

func (p *redisProbe) usedMemory(ctx context.Context) (int64, error) {
	info, err := p.c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("info memory: %w", err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("info memory: no used_memory")
}

// cpu is the server's CPU time so far (used_cpu_sys + used_cpu_user):
// on a shared server other clients' commands count too.
func (p *redisProbe) cpu(ctx context.Context) (time.Duration, error) {
	info, err := p.c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("info cpu: %w", err)
	}
	var sec float64
	for _, l := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("info cpu: %s: %w", k, err)
			}
			sec += f
		}
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// threshold is slowlog-log-slower-than, in microseconds.
func (p *redisProbe) threshold(ctx context.Context) (string, error) {
	v, err := p.c.ConfigGet(ctx, "slowlog-log-slower-than").Result()
	if err != nil {
		return "", fmt.Errorf("config get: %w", err)
	}
	return v["slowlog-log-slower-than"], nil
}

// lastSlow is the id of the newest slow log entry (-1 for none).
func (p *redisProbe) lastSlow(ctx context.Context) (int64, error) {
	l, err := p.c.SlowLogGet(ctx, 1).Result()
	if err != nil {
		return 0, fmt.Errorf("slowlog get: %w", err)
	}
	if len(l) == 0 {
		return -1, nil
	}
	return l[0].ID, nil
}

// slowSince counts the slow log entries after id: all of them, and ours
// (a key of our namespace among the arguments) with the longest of ours.
func (p *redisProbe) slowSince(ctx context.Context, id int64) (all, ours int, longest time.Duration, err error) {
	l, err := p.c.SlowLogGet(ctx, 1024).Result()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("slowlog get: %w", err)
	}
	for _, e := range l {
		if e.ID <= id {
			continue
		}
		all++
		for _, a := range e.Args {
			if strings.Contains(a, p.ns) {
				ours++
				longest = max(longest, e.Duration)
				break
			}
		}
	}
	return all, ours, longest, nil
}

// pgProbe reads the CPU time of the PostgreSQL backends serving the
// store's pool from /proc (a server on this machine, readable by this
// user): what the server spent on the run, which a loaded machine's wall
// clock does not tell. Backends opened and closed during the run are not
// seen (the pool keeps its connections for much longer than a run).
type pgProbe struct{ pool *pgxpool.Pool }

func newPGProbe(s backend.Store) *pgProbe {
	ps, ok := s.(*postgres.Store)
	if !ok {
		return nil
	}
	return &pgProbe{pool: ps.Pool()}
}

// cpu returns the CPU time of each idle pool connection's backend by its
// pid; ok is false when a backend's /proc entry cannot be read (a server
// elsewhere).
func (p *pgProbe) cpu(ctx context.Context) (map[uint32]time.Duration, bool) {
	out := map[uint32]time.Duration{}
	for _, c := range p.pool.AcquireAllIdle(ctx) {
		pid := c.Conn().PgConn().PID()
		c.Release()
		d, err := procCPUOf(int(pid))
		if err != nil {
			return nil, false
		}
		out[pid] = d
	}
	return out, len(out) > 0
}

// since is the CPU the backends used since before (a backend not there
// before counts whole).
func (p *pgProbe) since(ctx context.Context, before map[uint32]time.Duration) (time.Duration, bool) {
	after, ok := p.cpu(ctx)
	if !ok {
		return 0, false
	}
	var d time.Duration
	for pid, c := range after {
		d += c - before[pid]
	}
	return d, true
}

// procCPUOf is a process's user and system time from /proc/PID/stat, in
// clock ticks of 10 ms (USER_HZ is 100 on Linux).
func procCPUOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	return time.Duration(u+k) * 10 * time.Millisecond, nil
}
