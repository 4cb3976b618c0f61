package redis_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
)

// dropFirst is a TCP proxy in front of a real Redis server that closes the
// first drop connections it accepts as soon as they send anything, as a
// CLIENT KILL or a failover does to a process that is opening the store,
// and passes every later connection through.
type dropFirst struct {
	ln      net.Listener
	target  string
	drop    int64
	dropped atomic.Int64
	wg      sync.WaitGroup
}

func newDropFirst(t *testing.T, target string, drop int64) *dropFirst {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropFirst{ln: ln, target: target, drop: drop}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *dropFirst) serve() {
	defer p.wg.Done()
	for n := int64(0); ; n++ {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if n < p.drop {
			var b [64]byte
			_, _ = c.Read(b[:])
			c.Close()
			p.dropped.Add(1)
			continue
		}
		p.wg.Add(1)
		go p.pipe(c)
	}
}

func (p *dropFirst) pipe(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(up, c); up.Close(); close(done) }()
	_, _ = io.Copy(c, up)
	c.Close()
	<-done
}

// TestOpenReadsAgainAfterADroppedConnection: a process that opens the
// store while its first connection is dropped (a CLIENT KILL, a failover)
// opens it on the next connection instead of exiting on one EOF; a
// server that keeps dropping is still reported.
func TestOpenReadsAgainAfterADroppedConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	storeURL := redistest.URL(t)
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	// The namespace exists before the proxy is in the way.
	s, err := redis.Open(ctx, storeURL, redis.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	via := func(p *dropFirst) string {
		v := *u
		v.Host = p.ln.Addr().String()
		return v.String()
	}

	once := newDropFirst(t, u.Host, 1)
	s, err = redis.Open(ctx, via(once), redis.Options{MustExist: true})
	if err != nil {
		t.Fatalf("open with its first connection dropped: %v, want opened on the next", err)
	}
	s.Close()
	if once.dropped.Load() != 1 {
		t.Fatalf("proxy dropped %d connections, want 1 (the test did not meet the fault)", once.dropped.Load())
	}

	always := newDropFirst(t, u.Host, 1<<30)
	if _, err := redis.Open(ctx, via(always), redis.Options{MustExist: true}); err == nil ||
		!strings.Contains(err.Error(), "read schema version") {
		t.Fatalf("open through a server that drops every connection: %v, want the schema read's error", err)
	}
}
