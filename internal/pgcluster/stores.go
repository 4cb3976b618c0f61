package pgcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/internal/redact"
)

// DefaultTestPostgres is the shared server of the machine, as
// scripts/services sets it up.
const DefaultTestPostgres = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// SharedURL is the PostgreSQL server the tests share: SLUICE_TEST_POSTGRES,
// or DefaultTestPostgres.
func SharedURL() string {
	if u := os.Getenv("SLUICE_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultTestPostgres
}

// BouncerAllowed reports whether the tests may start a PgBouncer of their
// own: SLUICE_TEST_PGBOUNCER=1 (scripts/test sets it when pgbouncer is
// installed), or CI, where it must be installed.
func BouncerAllowed() bool {
	return os.Getenv("SLUICE_TEST_PGBOUNCER") == "1" || os.Getenv("CI") != ""
}

// WithSchema returns a postgres:// URL naming schema (?schema=, the
// backend's parameter), so that tests on one database keep apart.
func WithSchema(raw, schema string) string {
	return withParam(raw, "schema", schema)
}

// BouncerStoreURL is the store URL of a PostgreSQL store reached through
// a PgBouncer (bouncer) whose LISTEN connection goes to the server
// directly (direct): the backend's optional listen_url parameter, since a
// LISTEN needs a session and transaction pooling keeps none. Statements go
// by pgx's simple protocol (default_query_exec_mode): a prepared
// statement is a session's, and a transaction-mode PgBouncer hands each
// transaction whichever server connection is free.
func BouncerStoreURL(bouncer, direct string) string {
	return withParam(withParam(bouncer, "listen_url", direct), "default_query_exec_mode", "simple_protocol")
}

// WithAppName returns a postgres:// URL whose connections are named app
// (application_name, which the store leaves alone when the URL sets it),
// unless the URL names them already.
func WithAppName(raw, app string) string {
	if strings.Contains(raw, "application_name=") {
		return raw
	}
	return withParam(raw, "application_name", app)
}

// Migrating is a store URL that opens migrating: for postgres:// the
// backend's migrate=true (a process on PostgreSQL migrates only when told;
// DESIGN.md, "Creating and migrating a store"). Other URLs are returned
// as they are: SQLite's processes migrate by themselves.
func Migrating(raw string) string {
	if !isPostgres(raw) || strings.Contains(raw, "migrate=") {
		return raw
	}
	return withParam(raw, "migrate", "true")
}

// isPostgres reports whether raw is a postgres:// (or postgresql://) URL.
func isPostgres(raw string) bool {
	scheme, _, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	return ok && (scheme == "postgres" || scheme == "postgresql")
}

func withParam(raw, key, value string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + key + "=" + url.QueryEscape(value)
}

// NewSchemaName is a schema name of its own for one test.
func NewSchemaName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// ServerUp reports whether a PostgreSQL server answers at raw; with CI
// set, a server that does not answer fails the test, and otherwise skips
// it.
func ServerUp(t testing.TB, raw string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cn, err := pgx.Connect(ctx, stripStoreParams(raw))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s does not answer (CI: it must; scripts/services ensure): %v", redact.URL(raw), err)
		}
		t.Skipf("PostgreSQL at %s does not answer (scripts/services ensure starts it): %v", redact.URL(raw), err)
	}
	cn.Close(ctx)
}

// SharedStoreURL is a store URL on the shared server in a schema of the
// test's own, dropped when the test ends, whose connections are named
// after the schema (application_name): a fault another test or chaos run
// aims at "sluice" connections on the shared server spares them. It skips
// (fails with CI) when the server does not answer.
func SharedStoreURL(t testing.TB) (storeURL, schema string) {
	t.Helper()
	base := SharedURL()
	ServerUp(t, base)
	schema = NewSchemaName("sluice_t")
	t.Cleanup(func() { DropSchema(base, schema) })
	return WithAppName(WithSchema(base, schema), schema), schema
}

// DropSchema drops a test's schema; errors are ignored (the server may be
// gone with the test's cluster).
func DropSchema(raw, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cn, err := pgx.Connect(ctx, stripStoreParams(raw))
	if err != nil {
		return
	}
	defer cn.Close(ctx)
	_, _ = cn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

// stripStoreParams removes the store's own parameters (schema,
// listen_url, migrate), which are not libpq's, so pgx can connect with the rest.
func stripStoreParams(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	for _, k := range []string{"schema", "listen_url", "migrate"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// OpenStore opens (creating and migrating) the PostgreSQL store a URL
// names for a test, closed when the test ends. It opens it with
// backend/postgres itself, so a test binary that opens PostgreSQL stores
// compiles no other backend.
func OpenStore(t testing.TB, raw string) *postgres.Store {
	t.Helper()
	if !isPostgres(raw) {
		t.Fatalf("pgcluster: open store %s: not a postgres:// url", redact.URL(raw))
	}
	s, err := postgres.Open(context.Background(), raw, postgres.Options{Migrate: true})
	if err != nil {
		t.Fatalf("open store %s: %v", redact.URL(raw), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Terminate ends every server connection whose application_name is app
// (the PostgreSQL store names its connections "sluice"), never the
// connection it runs on, and returns how many it ended. It waits (up to
// 5 s each) until they are gone, so their slots are free when it returns.
func Terminate(ctx context.Context, raw, app string) (int, error) {
	cn, err := pgx.Connect(ctx, withParam(stripStoreParams(raw), "application_name", "sluice-chaos"))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: terminate: %w", err)
	}
	defer cn.Close(ctx)
	return terminate(ctx, cn, app, "")
}

// terminate ends, over cn, the connections named app to database db (""
// for cn's own).
func terminate(ctx context.Context, cn *pgx.Conn, app, db string) (int, error) {
	var n int
	err := cn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE t.ended) FROM (
		SELECT pg_terminate_backend(pid, 5000) AS ended FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid() AND datname = coalesce(nullif($2, ''), current_database())) t`, app, db).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgcluster: terminate %s: %w", app, err)
	}
	return n, nil
}
