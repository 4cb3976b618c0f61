package api_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// slowClient opens a connection and sends a POST's headers and the first
// byte of a body it says is 1000 bytes long, and no more.
func slowClient(t *testing.T, addr, auth string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "POST /api/v1/jobs HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\n" +
		"Idempotency-Key: slow\r\nContent-Length: 1000\r\n" + auth + "\r\n{"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the status line of the answer on c and checks that the
// server then closes c; it fails the test when either takes over limit.
func answer(t *testing.T, c net.Conn, limit time.Duration) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(limit)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no answer within %s: %v", limit, err)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("answered %q but held the connection open: %v", strings.TrimSpace(status), err)
	}
	return strings.TrimSpace(status)
}

// TestSlowBodiesHoldNothing serves the API as `sluice serve` does, on a
// real socket over a real engine on SQLite, to 250 clients that send a
// body one byte and then nothing: those without a token get their 401 at
// once, /healthz answers while 250 clients with a token hold their
// bodies, and those get 408 when the body timeout ends.
func TestSlowBodiesHoldNothing(t *testing.T) {
	e, err := engine.New(sqlitetest.New(t), engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	const bodyTimeout = time.Second
	srv := api.NewServer(e, api.ServerOptions{
		Tokens:      map[string]api.Identity{"op-token": {Name: "op", Role: engine.RoleOperator}},
		BodyTimeout: bodyTimeout,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := api.NewHTTPServer(srv, context.Background())
	go func() { _ = hs.Serve(api.LimitListener(ln, api.DefaultMaxConns)) }()
	t.Cleanup(func() { hs.Close() })
	addr := ln.Addr().String()

	const n = 250
	strangers := make([]net.Conn, n)
	for i := range strangers {
		strangers[i] = slowClient(t, addr, "")
	}
	for i, c := range strangers {
		if got := answer(t, c, 10*time.Second); got != "HTTP/1.1 401 Unauthorized" {
			t.Fatalf("client %d without a token: %q, want 401", i, got)
		}
	}

	holders := make([]net.Conn, n)
	for i := range holders {
		holders[i] = slowClient(t, addr, "Authorization: Bearer op-token\r\n")
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + addr + "/api/v1/healthz")
	if err != nil {
		t.Fatalf("/healthz with %d slow bodies held: %v", n, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz with %d slow bodies held: %s", n, resp.Status)
	}
	for i, c := range holders {
		if got := answer(t, c, bodyTimeout+10*time.Second); got != "HTTP/1.1 408 Request Timeout" {
			t.Fatalf("client %d with a token and a stalled body: %q, want 408", i, got)
		}
	}
}
