package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// callerPool is a pool of the test's own on the test server, as a
// program that has one already hands it to OpenPool; closed when tb ends.
func callerPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.ServerURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	// Not "sluice": fault tests end the connections of that name.
	cfg.ConnConfig.RuntimeParams["application_name"] = "sluice_test"
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// openOnPool opens a store in schema on pool and, when tb ends, closes it
// and checks that the pool still answers: the pool is the caller's.
func openOnPool(tb testing.TB, pool *pgxpool.Pool, opts postgres.Options) *postgres.Store {
	tb.Helper()
	s, err := postgres.OpenPool(context.Background(), pool, opts)
	if err != nil {
		tb.Fatalf("OpenPool: %v", err)
	}
	tb.Cleanup(func() {
		s.Close()
		if err := pool.Ping(context.Background()); err != nil {
			tb.Errorf("the caller's pool after the store's Close: %v", err)
		}
	})
	return s
}

// TestOpenPoolLeavesPoolOpen: a store on the caller's pool creates its
// schema there (Options.Schema, Options.Migrate), and its Close ends the
// store but leaves the pool working.
func TestOpenPoolLeavesPoolOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := callerPool(t)
	_, schema := pgtest.SchemaURL(t)
	s, err := postgres.OpenPool(ctx, pool, postgres.Options{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Schema() != schema || s.Pool() != pool {
		t.Errorf("store on schema %q, pool %p; want %q, %p", s.Schema(), s.Pool(), schema, pool)
	}
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Enqueue(ctx, sluicetype.EnqueueParams{Queue: "q", Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Now(ctx); !errors.Is(err, sluicetype.ErrClosed) {
		t.Errorf("Now after Close: %v, want ErrClosed", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "jobs"}.Sanitize()).Scan(&n); err != nil {
		t.Fatalf("the caller's pool after the store's Close: %v", err)
	}
	if n != 1 {
		t.Errorf("%d jobs in %s.jobs, want 1", n, schema)
	}
	// A second store on the same pool finds the schema as the first left it.
	s2 := openOnPool(t, pool, postgres.Options{Schema: schema, MustExist: true})
	if _, err := s2.Now(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOpenClosesItsOwnPool: the pool Open makes from a URL is the
// store's, and Close closes it.
func TestOpenClosesItsOwnPool(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	pool := s.Pool()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(context.Background()); err == nil {
		t.Error("the pool Open made answers after the store's Close")
	}
}

// TestOpenSchemaOption: Options.Schema names the schema of a URL without
// schema=, and the URL's schema= wins over it.
func TestOpenSchemaOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, schema := pgtest.SchemaURL(t)
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Del("schema")
	p.RawQuery = q.Encode()
	s := pgtest.Open(t, p.String(), postgres.Options{Schema: schema, Migrate: true})
	if s.Schema() != schema {
		t.Errorf("Open with Options.Schema %q: schema %q", schema, s.Schema())
	}
	u, other := pgtest.SchemaURL(t)
	s2 := pgtest.Open(t, u, postgres.Options{Schema: schema, Migrate: true})
	if s2.Schema() != other {
		t.Errorf("Open of a URL naming %q with Options.Schema %q: schema %q", other, schema, s2.Schema())
	}
	if _, err := postgres.OpenPool(ctx, callerPool(t), postgres.Options{Schema: "Not-A-Schema"}); !errors.Is(err, sluicetype.ErrInvalid) {
		t.Errorf("OpenPool with schema Not-A-Schema: %v, want ErrInvalid", err)
	}
}

// TestConformanceOwnPool runs the Store and Waits areas of the suite on
// stores opened on pools of the test's own (OpenPool): each store's pool
// is its check's, and must answer after the store's Close; a second store
// (Reopen) opens on a pool of its own as another process would.
func TestConformanceOwnPool(t *testing.T) {
	pgtest.ServerURL(t)
	backendtest.RunAreas(t, backendtest.Harness{
		Name: "postgres-own-pool",
		NewStore: func(t testing.TB) backend.Store {
			_, schema := pgtest.SchemaURL(t)
			return openOnPool(t, callerPool(t), postgres.Options{Schema: schema, Migrate: true})
		},
		Truth: func(t testing.TB, s backend.Store) backendtest.Truth { return pgtest.NewTruth(t, s) },
		Reopen: func(t testing.TB, s backend.Store) backend.Store {
			ps, ok := s.(*postgres.Store)
			if !ok {
				t.Fatalf("%T is not a *postgres.Store", s)
			}
			return openOnPool(t, callerPool(t), postgres.Options{Schema: ps.Schema()})
		},
	}, "Store", "Waits")
}
