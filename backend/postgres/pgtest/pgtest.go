// Package pgtest gives tests a fresh PostgreSQL store: each in its own
// schema of the test database, with a random name, migrated at open and
// dropped when the test ends, so tests run in parallel on one server.
//
// The server is SLUICE_TEST_POSTGRES (default
// postgres://root@127.0.0.1:5432/test?sslmode=disable). When it cannot be
// reached the test is skipped with a loud message, or fails when CI is
// set: in CI nothing skips.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/sluicetype"
)

// DefaultURL is the server tests use without SLUICE_TEST_POSTGRES.
const DefaultURL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// ServerURL returns the test server's URL, or skips (fails under CI) tb
// when the server does not answer.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("SLUICE_TEST_POSTGRES")
	if u == "" {
		u = DefaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(ctx)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("pgtest: PostgreSQL at %s does not answer (CI is set, so this fails): %v", redact.URL(u), err)
		}
		tb.Skipf("pgtest: SKIPPED — PostgreSQL at %s does not answer: %v (set SLUICE_TEST_POSTGRES; in CI this fails)", redact.URL(u), err)
	}
	return u
}

// SchemaURL returns ServerURL with ?schema= set to a fresh random schema
// that is dropped when tb ends. Nothing is created yet.
func SchemaURL(tb testing.TB) (rawURL, schema string) {
	tb.Helper()
	base := ServerURL(tb)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	schema = "t_" + hex.EncodeToString(b[:])
	p, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	q := p.Query()
	q.Set("schema", schema)
	// Not the product's default application_name: fault tests and chaos
	// runs that terminate "sluice" connections must not hit these.
	if q.Get("application_name") == "" {
		q.Set("application_name", "sluice_test")
	}
	p.RawQuery = q.Encode()
	tb.Cleanup(func() { Drop(tb, base, schema) })
	return p.String(), schema
}

// Drop drops a schema and everything in it.
func Drop(tb testing.TB, serverURL, schema string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		tb.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		tb.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

// New opens a fresh, migrated store in its own schema and closes it (and
// drops the schema) when tb ends. params are added to the URL's query
// (default_query_exec_mode=simple_protocol, say).
func New(tb testing.TB, params ...string) *postgres.Store {
	tb.Helper()
	u, _ := SchemaURL(tb)
	for _, p := range params {
		u += "&" + p
	}
	return Open(tb, u, postgres.Options{Migrate: true, MaxConns: 4})
}

// Open opens a store on rawURL and closes it when tb ends.
func Open(tb testing.TB, rawURL string, opts postgres.Options) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(context.Background(), rawURL, opts)
	if err != nil {
		tb.Fatalf("pgtest: open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// URL is the URL of s (a *postgres.Store from New) for another process
// or store to open.
func URL(tb testing.TB, s backend.Store) string {
	tb.Helper()
	ps := store(tb, s)
	p, err := url.Parse(ServerURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	q := p.Query()
	q.Set("schema", ps.Schema())
	if q.Get("application_name") == "" {
		q.Set("application_name", "sluice_test")
	}
	p.RawQuery = q.Encode()
	return p.String()
}

// Reopen opens a second store on the schema of s, as another process
// would, and closes it when tb ends.
func Reopen(tb testing.TB, s backend.Store) backend.Store {
	tb.Helper()
	return Open(tb, URL(tb, s), postgres.Options{MaxConns: 4})
}

func store(tb testing.TB, s backend.Store) *postgres.Store {
	tb.Helper()
	ps, ok := s.(*postgres.Store)
	if !ok {
		tb.Fatalf("pgtest: %T is not a *postgres.Store", s)
	}
	return ps
}

// Truth reads and writes a store's tables directly, for the conformance
// suite's ground truth (backendtest.Truth).
type Truth struct {
	s *postgres.Store
}

// NewTruth returns the Truth of s, a *postgres.Store.
func NewTruth(tb testing.TB, s backend.Store) *Truth {
	tb.Helper()
	return &Truth{s: store(tb, s)}
}

func (tr *Truth) table(name string) string {
	return pgx.Identifier{tr.s.Schema(), name}.Sanitize()
}

// JobCounts counts the jobs per queue and state with GROUP BY.
func (tr *Truth) JobCounts(tb testing.TB) map[string]map[sluicetype.State]int64 {
	tb.Helper()
	rows, err := tr.s.Pool().Query(context.Background(), `SELECT queue, state, count(*) FROM `+tr.table("jobs")+` GROUP BY queue, state`)
	if err != nil {
		tb.Fatalf("pgtest: truth: %v", err)
	}
	defer rows.Close()
	out := map[string]map[sluicetype.State]int64{}
	for rows.Next() {
		var q, st string
		var n int64
		if err := rows.Scan(&q, &st, &n); err != nil {
			tb.Fatalf("pgtest: truth: %v", err)
		}
		if out[q] == nil {
			out[q] = map[sluicetype.State]int64{}
		}
		out[q][sluicetype.State(st)] = n
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("pgtest: truth: %v", err)
	}
	return out
}

// CounterAdd adds n to shard 0 of the job_counts row of (queue, state).
func (tr *Truth) CounterAdd(tb testing.TB, queue string, state sluicetype.State, n int64) {
	tb.Helper()
	if _, err := tr.s.Pool().Exec(context.Background(), `INSERT INTO `+tr.table("job_counts")+` AS c (queue, state, shard, n)
		VALUES ($1, $2, 0, $3) ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + excluded.n`, queue, string(state), n); err != nil {
		tb.Fatalf("pgtest: counter drift: %v", err)
	}
}
