package postgres_test

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
)

// TestEngineWakeupsAcrossStores: two engines on two stores of one schema;
// an enqueue in one wakes the other's idle worker (poll interval 1 h) and
// reaches its Subscribe.
func TestEngineWakeupsAcrossStores(t *testing.T) {
	t.Parallel()
	a := pgtest.New(t)
	backendtest.CrossProcessWakeups(t, a, pgtest.Reopen(t, a))
}

// TestEngineWakeupPollFallback: a listener that never connects (its
// listen_url names a closed port) leaves the poll to find the work.
func TestEngineWakeupPollFallback(t *testing.T) {
	t.Parallel()
	a := pgtest.New(t)
	b := pgtest.Open(t, pgtest.URL(t, a)+"&listen_url="+url.QueryEscape("postgres://root@127.0.0.1:1/test?connect_timeout=1"), postgres.Options{MaxConns: 4})
	backendtest.WakeupPollFallback(t, a, b, nil)
}

// TestFaultEngineListenerKilled: the worker's listener is terminated
// (pg_terminate_backend of that one connection); jobs still run.
func TestFaultEngineListenerKilled(t *testing.T) {
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("SKIP: fault test; set SLUICE_FAULT_TESTS=1")
	}
	a := pgtest.New(t)
	b := pgtest.Reopen(t, a)
	backendtest.WakeupPollFallback(t, a, b, func(t *testing.T) {
		tag, err := a.Pool().Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE query = $1 AND pid <> pg_backend_pid()`, "LISTEN "+pgx.Identifier{"sluice_" + a.Schema()}.Sanitize())
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("terminate the listener: %v %v", tag, err)
		}
	})
}

// TestNoListenDeclaresNoWakeups: a store opened with NoListen does not
// claim a capability it cannot give.
func TestNoListenDeclaresNoWakeups(t *testing.T) {
	t.Parallel()
	a := pgtest.New(t)
	if !backend.Declares(a, backend.CapabilityWakeups) {
		t.Fatal("a listening store declares no wake-ups")
	}
	b := pgtest.Open(t, pgtest.URL(t, a), postgres.Options{NoListen: true})
	if backend.Declares(b, backend.CapabilityWakeups) {
		t.Fatal("a NoListen store declares wake-ups")
	}
}
