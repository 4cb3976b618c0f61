package redis_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// callerClient is a client of the test's own on a fresh namespace of the
// test server (deleted when tb ends), as a program that has one already
// hands it to OpenClient; closed when tb ends.
func callerClient(tb testing.TB) (c *goredis.Client, ns string) {
	tb.Helper()
	t, err := redis.ParseURL(redistest.URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	c = goredis.NewClient(t.Options) // MaxRetries -1, as ParseURL sets it
	tb.Cleanup(func() { c.Close() })
	return c, t.Namespace
}

// openOnClient opens a store on c and, when tb ends, closes it and checks
// that the client still answers: the client is the caller's.
func openOnClient(tb testing.TB, c goredis.UniversalClient, opts redis.Options) *redis.Store {
	tb.Helper()
	s, err := redis.OpenClient(context.Background(), c, opts)
	if err != nil {
		tb.Fatalf("OpenClient: %v", err)
	}
	tb.Cleanup(func() {
		s.Close()
		if err := c.Ping(context.Background()).Err(); err != nil {
			tb.Errorf("the caller's client after the store's Close: %v", err)
		}
	})
	return s
}

// TestOpenClientLeavesClientOpen: a store on the caller's client lives in
// Options.Namespace, and its Close ends the store but leaves the client
// working.
func TestOpenClientLeavesClientOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ns := callerClient(t)
	s, err := redis.OpenClient(ctx, c, redis.Options{Namespace: ns, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Namespace() != ns || redis.Client(s) != goredis.UniversalClient(c) {
		t.Errorf("store on namespace %q, client %p; want %q, %p", s.Namespace(), redis.Client(s), ns, c)
	}
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	j, err := e.Enqueue(ctx, sluicetype.EnqueueParams{Queue: "q", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := c.Exists(ctx, "{"+ns+"}:job:"+j.ID).Result()
	if err != nil {
		t.Fatalf("the caller's client after the store's Close: %v", err)
	}
	if n != 1 {
		t.Errorf("job %s not in namespace %s", j.ID, ns)
	}
	// A second store on the same client finds the namespace as the first
	// left it.
	s2 := openOnClient(t, c, redis.Options{Namespace: ns, MustExist: true})
	if got, err := s2.JobGetByID(ctx, &backend.JobGetByIDParams{ID: j.ID}); err != nil || got.ID != j.ID {
		t.Errorf("job %s through a second store: %v, %v", j.ID, got, err)
	}
}

// TestOpenClosesItsOwnClient: the client Open makes from a URL is the
// store's, and Close closes it.
func TestOpenClosesItsOwnClient(t *testing.T) {
	t.Parallel()
	s, err := redis.Open(context.Background(), redistest.URL(t), redis.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	c := redis.Client(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Error("the client Open made answers after the store's Close")
	}
}

// TestOpenNamespaceOption: Options.Namespace names the namespace of a URL
// without ns, and the URL's ns wins over it.
func TestOpenNamespaceOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := redistest.ServerURL(t)
	_, ns := callerClient(t) // a fresh namespace, deleted when t ends
	s, err := redis.Open(ctx, base, redis.Options{Namespace: ns, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Namespace() != ns {
		t.Errorf("Open with Options.Namespace %q: namespace %q", ns, s.Namespace())
	}
	u := redistest.URL(t)
	tg, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := redis.Open(ctx, u, redis.Options{Namespace: ns, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Namespace() != tg.Namespace {
		t.Errorf("Open of a URL naming %q with Options.Namespace %q: namespace %q", tg.Namespace, ns, s2.Namespace())
	}
}

// TestConformanceOwnClient runs the Store and Waits areas of the suite on
// stores opened on clients of the test's own (OpenClient): each store's
// client is its check's, and must answer after the store's Close; a
// second store (Reopen) opens on a client of its own as another process
// would.
func TestConformanceOwnClient(t *testing.T) {
	redistest.ServerURL(t)
	backendtest.RunAreas(t, backendtest.Harness{
		Name: "redis-own-client",
		NewStore: func(t testing.TB) backend.Store {
			c, ns := callerClient(t)
			return openOnClient(t, c, redis.Options{Namespace: ns, Migrate: true})
		},
		Truth: func(t testing.TB, s backend.Store) backendtest.Truth { return redistest.NewTruth(t, s) },
		Reopen: func(t testing.TB, s backend.Store) backend.Store {
			rs, ok := s.(*redis.Store)
			if !ok {
				t.Fatalf("%T is not a *redis.Store", s)
			}
			t2, err := redis.ParseURL(rs.URL())
			if err != nil {
				t.Fatal(err)
			}
			c := goredis.NewClient(t2.Options)
			t.Cleanup(func() { c.Close() })
			return openOnClient(t, c, redis.Options{Namespace: rs.Namespace()})
		},
	}, "Store", "Waits")
}

// TestOpenClientWarnsOfRetries: a caller's client that sends a command
// again after a lost answer (go-redis's default) is named in a warning;
// one with MaxRetries -1 is not.
func TestOpenClientWarnsOfRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ns := callerClient(t)
	for _, retries := range []int{0, -1} { // 0: go-redis's default, 3
		o := *c.Options()
		o.MaxRetries = retries
		rc := goredis.NewClient(&o)
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		s, err := redis.OpenClient(ctx, rc, redis.Options{Namespace: ns, Migrate: true, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		rc.Close()
		warned := strings.Contains(buf.String(), "MaxRetries: -1")
		if warned != (retries == 0) {
			t.Errorf("MaxRetries %d: warned %v; log:\n%s", retries, warned, buf.String())
		}
	}
}
