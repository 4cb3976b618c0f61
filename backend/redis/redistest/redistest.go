// Package redistest gives tests a fresh Redis store: each test opens its
// own namespace (random, so tests run in parallel on one server without
// FLUSHDB) on the server SLUICE_TEST_REDIS names, and deletes its keys
// when it ends.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/sluicetype"
)

// DefaultURL is the server tests use when SLUICE_TEST_REDIS is unset:
// database 1, apart from database 0 where benchmarks, demos and chaos runs
// keep their namespaces. Every namespace cleanup and ground-truth count
// SCANs the whole database, so a benchmark's 557,000 keys left in the
// tests' database once made each of them take 4 s.
const DefaultURL = "redis://127.0.0.1:6379/1"

// ServerURL is the test server's URL. Without a reachable server the test
// fails when CI is set and is skipped (saying so) otherwise.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("SLUICE_TEST_REDIS")
	if u == "" {
		u = DefaultURL
	}
	o, err := goredis.ParseURL(u)
	if err != nil {
		tb.Fatalf("redistest: SLUICE_TEST_REDIS=%s: %v", u, err)
	}
	c := goredis.NewClient(o)
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("redistest: no Redis at %s (CI is set, so this fails): %v", u, err)
		}
		tb.Skipf("SKIP: no Redis at %s (set SLUICE_TEST_REDIS): %v", u, err)
	}
	return u
}

// URL returns a store URL of a fresh namespace on the test server, whose
// keys are deleted when tb ends.
func URL(tb testing.TB) string {
	tb.Helper()
	return URLOn(tb, ServerURL(tb))
}

// URLOn returns a store URL of a fresh namespace on the server (or
// cluster) base names, whose keys are deleted when tb ends.
func URLOn(tb testing.TB, base string) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	ns := "t-" + hex.EncodeToString(b[:])
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	u := base + sep + "ns=" + ns
	tb.Cleanup(func() { drop(tb, base, ns) })
	return u
}

// client connects to the server or cluster a base URL names.
func client(base string) (goredis.UniversalClient, error) {
	t, err := redis.ParseURL(base)
	if err != nil {
		return nil, err
	}
	// Generous timeouts: a cleanup on a loaded machine deletes thousands
	// of keys.
	if t.Cluster {
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: t.Addrs,
			ReadTimeout: 2 * time.Minute, WriteTimeout: 2 * time.Minute}), nil
	}
	o := *t.Options
	o.ReadTimeout, o.WriteTimeout = 2*time.Minute, 2*time.Minute
	return goredis.NewClient(&o), nil
}

// drop deletes every key of namespace ns.
func drop(tb testing.TB, base, ns string) {
	c, err := client(base)
	if err != nil {
		tb.Errorf("redistest: %v", err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	keys, err := Keys(ctx, c, ns)
	if err != nil {
		tb.Errorf("redistest: drop namespace %s: %v", ns, err)
		return
	}
	// One key per command: a namespace lives in one slot, but UNLINK of
	// many keys would still need them routed together on a cluster.
	for i := 0; i < len(keys); i += 1000 {
		pipe := c.Pipeline()
		for _, k := range keys[i:min(i+1000, len(keys))] {
			pipe.Unlink(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			tb.Errorf("redistest: drop namespace %s: %v", ns, err)
			return
		}
	}
}

// Keys lists every key of namespace ns.
func Keys(ctx context.Context, c goredis.UniversalClient, ns string) ([]string, error) {
	return scan(ctx, c, "{"+ns+"}:*")
}

// scan lists the keys matching pattern, on every master of a cluster.
func scan(ctx context.Context, c goredis.UniversalClient, pattern string) ([]string, error) {
	one := func(ctx context.Context, c goredis.Cmdable) ([]string, error) {
		var out []string
		iter := c.Scan(ctx, 0, pattern, 10000).Iterator()
		for iter.Next(ctx) {
			out = append(out, iter.Val())
		}
		return out, iter.Err()
	}
	cc, ok := c.(*goredis.ClusterClient)
	if !ok {
		return one(ctx, c)
	}
	var mu sync.Mutex
	var out []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		ks, err := one(ctx, m)
		mu.Lock()
		out = append(out, ks...)
		mu.Unlock()
		return err
	})
	return out, err
}

// New opens a fresh store for one test and closes it when the test ends.
func New(tb testing.TB) *redis.Store {
	tb.Helper()
	return NewOn(tb, ServerURL(tb))
}

// NewOn opens a fresh store on the server (or cluster) base names.
func NewOn(tb testing.TB, base string) *redis.Store {
	tb.Helper()
	s, err := redis.Open(context.Background(), URLOn(tb, base), redis.Options{Migrate: true})
	if err != nil {
		tb.Fatalf("redistest: open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Reopen opens a second store on the namespace of s (a *redis.Store), as
// another process would, and closes it when tb ends.
func Reopen(tb testing.TB, s backend.Store) backend.Store {
	tb.Helper()
	rs := store(tb, s)
	s2, err := redis.Open(context.Background(), rs.URL(), redis.Options{})
	if err != nil {
		tb.Fatalf("redistest: reopen: %v", err)
	}
	tb.Cleanup(func() { s2.Close() })
	return s2
}

func store(tb testing.TB, s backend.Store) *redis.Store {
	tb.Helper()
	rs, ok := s.(*redis.Store)
	if !ok {
		tb.Fatalf("redistest: %T is not a *redis.Store", s)
	}
	return rs
}

// Truth reads a store's keys directly, for the conformance suite's ground
// truth (backendtest.Truth), on a client of its own: the store keeps its
// client out of its public API.
type Truth struct {
	c      goredis.UniversalClient
	prefix string // "{ns}:"
}

// NewTruth returns a Truth over s, which must be a *redis.Store. It
// connects to the server s.URL() names (without credentials for a store
// on a caller's client, as on a test server) and closes when tb ends.
func NewTruth(tb testing.TB, s backend.Store) *Truth {
	tb.Helper()
	rs := store(tb, s)
	c, err := client(rs.URL())
	if err != nil {
		tb.Fatalf("redistest: truth: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return &Truth{c: c, prefix: "{" + rs.Namespace() + "}:"}
}

// JobCounts counts the jobs per queue and state from the job hashes
// themselves (a SCAN of the namespace), never from the counters.
func (tr *Truth) JobCounts(tb testing.TB) map[string]map[sluicetype.State]int64 {
	tb.Helper()
	ctx := context.Background()
	c := tr.c
	out := map[string]map[sluicetype.State]int64{}
	keys, err := scan(ctx, c, tr.prefix+"job:*")
	if err != nil {
		tb.Fatalf("redistest: truth: %v", err)
	}
	pipe := c.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HMGet(ctx, k, "q", "s")
	}
	if len(keys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			tb.Fatalf("redistest: truth: %v", err)
		}
	}
	for _, cmd := range cmds {
		v := cmd.Val()
		q, _ := v[0].(string)
		st, _ := v[1].(string)
		if out[q] == nil {
			out[q] = map[sluicetype.State]int64{}
		}
		out[q][sluicetype.State(st)]++
	}
	return out
}

// CounterAdd adds n to the maintained counter of (queue, state).
func (tr *Truth) CounterAdd(tb testing.TB, queue string, state sluicetype.State, n int64) {
	tb.Helper()
	if err := tr.c.HIncrBy(context.Background(), tr.prefix+"counts", queue+"\x1f"+string(state), n).Err(); err != nil {
		tb.Fatalf("redistest: counter add: %v", err)
	}
}
