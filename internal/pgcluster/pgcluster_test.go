package pgcluster

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// start starts a cluster for a test, skipping when PostgreSQL is not
// installed (failing with CI set: there it must be).
func start(t *testing.T, o Options) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), o)
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func scalar(t *testing.T, cn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := cn.QueryRow(context.Background(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// TestClusterRestartKeepsData: a private server on its own port keeps
// what was committed across Restart, on the same port, and a connection
// from before the restart is gone.
func TestClusterRestartKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := start(t, Options{})
	cn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	if got := scalar(t, cn, "select current_setting('port')"); got != strconv.Itoa(c.Port()) {
		t.Fatalf("the server's port is %s, want %d", got, c.Port())
	}
	if _, err := cn.Exec(ctx, "create table kept (v int); insert into kept values (42)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cn.Exec(ctx, "select 1"); err == nil {
		t.Error("a connection from before the restart still works")
	}
	cn2, err := c.Conn(ctx)
	if err != nil {
		t.Fatalf("connect after the restart: %v", err)
	}
	defer cn2.Close(ctx)
	if got := scalar(t, cn2, "select v::text from kept"); got != "42" {
		t.Errorf("after the restart kept holds %s, want 42", got)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Conn(ctx); err == nil {
		t.Error("a stopped server accepted a connection")
	}
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	cn3, err := c.Conn(ctx)
	if err != nil {
		t.Fatalf("connect after Resume: %v", err)
	}
	cn3.Close(ctx)
}

// TestClusterHoldExhaustsConnections: a Holder takes every connection slot,
// so the next client is refused with too_many_connections (53300), and
// one is accepted again once they are released.
func TestClusterHoldExhaustsConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := start(t, Options{MaxConnections: 8})
	app, err := pgx.Connect(ctx, c.URL()+"&application_name=sluice")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx)
	h := c.NewHolder()
	if n := h.Grab(ctx, 0); n != 7 {
		t.Fatalf("beside one other client held %d connections, want 7", n)
	}
	// The holder ends the other client's connection over one of its own
	// (there is no free slot for another) and takes its slot.
	if n, err := h.Terminate(ctx, "sluice"); err != nil || n != 1 {
		t.Fatalf("terminate sluice: %d, %v; want 1", n, err)
	}
	if _, err := app.Exec(ctx, "select 1"); err == nil {
		t.Error("a terminated connection still works")
	}
	if n := h.Grab(ctx, 0); n != 8 {
		t.Errorf("held %d connections, want max_connections 8", h.Held())
	}
	_, err = c.Conn(ctx)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Errorf("connect with every slot held: %v, want SQLSTATE 53300", err)
	}
	// Never the connection it runs on: of its own eight it ends seven.
	if n, err := h.Terminate(ctx, "pgcluster-hold"); err != nil || n != 7 {
		t.Errorf("terminate pgcluster-hold from a held connection: %d, %v; want the 7 others", n, err)
	}
	h.Release()
	cn, err := c.Conn(ctx)
	if err != nil {
		t.Fatalf("connect after release: %v", err)
	}
	cn.Close(ctx)
}

// TestBouncerTransactionMode: a PgBouncer in front of a private server
// answers for it in transaction pooling mode.
func TestBouncerTransactionMode(t *testing.T) {
	t.Parallel()
	if _, ok := BouncerInstalled(); !ok && os.Getenv("CI") == "" {
		t.Skip("pgbouncer is not installed (scripts/services ensure installs it)")
	}
	ctx := context.Background()
	c := start(t, Options{})
	b, err := StartBouncer(ctx, BouncerOptions{Server: c.URL(), PoolSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cfg, err := pgx.ParseConfig(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	// Transaction pooling keeps no prepared statement of a session.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect through the bouncer: %v\n%s", err, b.Log())
	}
	defer cn.Close(ctx)
	if got := scalar(t, cn, "select current_setting('port')"); got != strconv.Itoa(c.Port()) {
		t.Errorf("through the bouncer the server's port is %s, want %d", got, c.Port())
	}

	admin, err := pgx.ConnectConfig(ctx, mustConfig(t, b.adminURL()))
	if err != nil {
		t.Fatalf("connect to the bouncer's admin console: %v", err)
	}
	defer admin.Close(ctx)
	rows, err := admin.Query(ctx, "SHOW CONFIG")
	if err != nil {
		t.Fatal(err)
	}
	mode := ""
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		if len(vals) >= 2 && vals[0] == "pool_mode" {
			mode, _ = vals[1].(string)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if mode != "transaction" {
		t.Errorf("pool_mode = %q, want transaction", mode)
	}
}

func mustConfig(t *testing.T, u string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	// The admin console speaks the simple protocol only.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return cfg
}

// TestClusterExhaust: Exhaust takes every slot from the clients of an
// application_name, which are then refused for want of a slot, and gives
// them back on Release.
func TestClusterExhaust(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := start(t, Options{MaxConnections: 10})
	appURL := c.URL() + "&application_name=sluice"
	for range 3 {
		cn, err := pgx.Connect(ctx, appURL)
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close(ctx)
	}
	h, err := c.Exhaust(ctx, "sluice")
	if err != nil {
		t.Fatal(err)
	}
	if h.Held() != 10 {
		t.Errorf("Exhaust holds %d slots, want max_connections 10", h.Held())
	}
	_, err = pgx.Connect(ctx, appURL)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Errorf("connect while exhausted: %v, want SQLSTATE 53300", err)
	}
	h.Release()
	cn, err := pgx.Connect(ctx, appURL)
	if err != nil {
		t.Fatalf("connect after Release: %v", err)
	}
	cn.Close(ctx)
}
