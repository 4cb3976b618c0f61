package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		ok         bool
	}{
		{"plain", "4242 (postgres) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 1 0 100 0 0", 3250 * time.Millisecond, true},
		{"command with spaces and parens", "7 (a b) c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 0 0", 30 * time.Millisecond, true},
		{"truncated", "7 (x) R 1 7", 0, false},
		{"no command", "garbage", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseStatCPU(tc.stat)
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseStatCPU = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPGClientPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmdline string
		port    int
		ok      bool
	}{
		{"postgres: root test 127.0.0.1(45678) idle\x00\x00\x00", 45678, true},
		{"postgres: postgres test 127.0.0.1(5) SELECT", 5, true},
		{"postgres: checkpointer ", 0, false},
		{"postgres: root test [local] idle", 0, false},
		{"/usr/lib/postgresql/15/bin/postgres\x00-D\x00/var/lib/pg", 0, false},
	} {
		port, ok := pgClientPort(tc.cmdline)
		if port != tc.port || ok != tc.ok {
			t.Errorf("pgClientPort(%q) = %d, %v; want %d, %v", tc.cmdline, port, ok, tc.port, tc.ok)
		}
	}
}

func TestParseNetTCP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line          string
		local, remote int
		inode         string
		ok            bool
	}{
		{"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode", 0, 0, "", false},
		{"   3: 0100007F:B26E 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 123456 1 0000000000000000 20 4 30 10 -1", 45678, 5432, "123456", true},
		{"   0: 00000000000000000000000001000000:C350 00000000000000000000000001000000:18EB 01 00000000:00000000 00:00000000 00000000     0        0 99 1", 50000, 6379, "99", true},
	} {
		l, r, ino, ok := parseNetTCP(tc.line)
		if l != tc.local || r != tc.remote || ino != tc.inode || ok != tc.ok {
			t.Errorf("parseNetTCP(%q) = %d %d %q %v; want %d %d %q %v", tc.line, l, r, ino, ok, tc.local, tc.remote, tc.inode, tc.ok)
		}
	}
}

func TestParseRedisCPU(t *testing.T) {
	t.Parallel()
	got, err := parseRedisCPU("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.0\r\n")
	if err != nil || got != 3750*time.Millisecond {
		t.Errorf("parseRedisCPU = %v, %v; want 3.75s", got, err)
	}
	if _, err := parseRedisCPU("# CPU\r\nused_cpu_sys:1.5\r\n"); err == nil {
		t.Error("parseRedisCPU accepted an answer without used_cpu_user")
	}
}

func TestStoreCPUForSQLite(t *testing.T) {
	t.Parallel()
	if _, err := storeCPUFor("sqlite", "sqlite:///tmp/x.db"); !errors.Is(err, errNoStoreCPU) {
		t.Errorf("storeCPUFor(sqlite) = %v, want errNoStoreCPU: the store is in this process", err)
	}
}

// testURL is the server a test uses: env (as scripts/test sets it) or the
// machine's shared server. When the server does not answer it fails under
// CI and skips loudly elsewhere.
func testURL(t *testing.T, env, def string) *url.URL {
	t.Helper()
	raw := os.Getenv(env)
	set := raw != ""
	if !set {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		// As pgtest and redistest: in CI nothing skips; elsewhere a server
		// that does not answer skips loudly, named or not (scripts/test
		// --quick names a closed port).
		if os.Getenv("CI") != "" {
			t.Fatalf("%s=%s: %v (CI is set, so this fails)", env, raw, err)
		}
		if set {
			t.Skipf("SKIPPED — %s=%s does not answer: %v", env, raw, err)
		}
		t.Skipf("no server at %s: %v", u.Host, err)
	}
	c.Close()
	return u
}

// pgConn is a bare PostgreSQL protocol connection (trust auth), so that a
// test can make a backend work without a driver.
type pgConn struct {
	c  net.Conn
	br *bufio.Reader
}

func pgDial(t *testing.T, u *url.URL) *pgConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	db := u.Path[1:]
	body := binary.BigEndian.AppendUint32(nil, 196608) // protocol 3.0
	for _, kv := range []string{"user", u.User.Username(), "database", db} {
		body = append(append(body, kv...), 0)
	}
	body = append(body, 0)
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))
	if _, err := c.Write(append(msg, body...)); err != nil {
		t.Fatal(err)
	}
	p := &pgConn{c: c, br: bufio.NewReader(c)}
	if err := p.untilReady(); err != nil {
		t.Fatalf("startup: %v", err)
	}
	return p
}

// untilReady reads messages up to ReadyForQuery, failing on an error.
func (p *pgConn) untilReady() error {
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(p.br, hdr[:]); err != nil {
			return err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[1:])-4)
		if _, err := io.ReadFull(p.br, body); err != nil {
			return err
		}
		switch hdr[0] {
		case 'E':
			return fmt.Errorf("server error: %q", body)
		case 'R':
			if binary.BigEndian.Uint32(body) != 0 {
				return fmt.Errorf("authentication asked (%d): the test needs trust auth", binary.BigEndian.Uint32(body))
			}
		case 'Z':
			return nil
		}
	}
}

func (p *pgConn) query(t *testing.T, sql string) {
	t.Helper()
	body := append([]byte(sql), 0)
	msg := append([]byte{'Q'}, binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))...)
	if _, err := p.c.Write(append(msg, body...)); err != nil {
		t.Fatal(err)
	}
	if err := p.untilReady(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// The backend of this process's connection is found and its CPU counted;
// another client's backend is not.
func TestPGBackendCPU(t *testing.T) {
	t.Parallel()
	u := testURL(t, "SLUICE_TEST_POSTGRES", "postgres://root@127.0.0.1:5432/test?sslmode=disable")
	p := pgDial(t, u)
	s, err := storeCPUFor("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := s.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 1 {
		t.Fatalf("found %d backends of this process (%v), want the one connection's", len(before), before)
	}
	// About a second of the backend's CPU, well above the 10 ms tick.
	p.query(t, "SELECT count(*) FROM generate_series(1, 5000000)")
	after, err := s.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cpuDelta(before, after); d <= 0 {
		t.Errorf("the backend's CPU did not grow across a query: %v then %v", before, after)
	}
	if s.source() != "pg_backends" {
		t.Errorf("source %q", s.source())
	}
}

func TestRedisInfoCPU(t *testing.T) {
	t.Parallel()
	u := testURL(t, "SLUICE_TEST_REDIS", "redis://127.0.0.1:6379/0")
	s, err := storeCPUFor("redis", u.String())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := s.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before[""] <= 0 {
		t.Fatalf("INFO cpu read %v, want the server's CPU so far", before)
	}
	after, err := s.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after[""] < before[""] {
		t.Errorf("the server's CPU went backwards: %v then %v", before, after)
	}
}

func TestCPUDelta(t *testing.T) {
	t.Parallel()
	before := map[string]time.Duration{"1": time.Second, "2": 2 * time.Second}
	after := map[string]time.Duration{"1": 3 * time.Second, "3": 500 * time.Millisecond}
	// 1 gained 2s, 3 was born and spent 0.5s, 2 is gone (not counted).
	if got := cpuDelta(before, after); got != 2500*time.Millisecond {
		t.Errorf("cpuDelta = %v, want 2.5s", got)
	}
}
