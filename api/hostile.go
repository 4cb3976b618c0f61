package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultBodyTimeout bounds how long reading one request body may take.
const DefaultBodyTimeout = 30 * time.Second

// DefaultMaxConns is how many connections LimitListener lets a server
// hold at once unless told otherwise.
const DefaultMaxConns = 1024

// closeUnlessBodyRead marks the answer to r to close its connection when
// r carries a body, and returns the function the handler defers: if the
// body was still not read (bodyRead takes the mark off), it ends the
// connection's reads. net/http reads what is left of a body the handler
// did not read, before it sends the answer and again after, so a client
// that sends its body a byte at a time would hold its refusal (a 401,
// decided before the body is read) and its connection as long as it
// liked; a connection that closes after the answer needs nothing more
// from it.
func closeUnlessBodyRead(w http.ResponseWriter, r *http.Request) func() {
	if r.ContentLength == 0 { // -1 when chunked
		return func() {}
	}
	w.Header().Set("Connection", "close")
	return func() {
		if w.Header().Get("Connection") == "close" {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	}
}

func bodyRead(w http.ResponseWriter) { w.Header().Del("Connection") }

// bodyDeadline gives the body of the request w answers timeout to
// arrive, and returns the function that lifts the deadline once it has.
// A writer that cannot set deadlines (a test recorder, Server.Local) is
// left alone.
func bodyDeadline(w http.ResponseWriter, timeout time.Duration) func() {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return func() {}
	}
	return func() { _ = rc.SetReadDeadline(time.Time{}) }
}

// isTimeout reports a read that ended at its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// LimitListener returns a Listener that holds at most n accepted
// connections open at once (DefaultMaxConns when n <= 0); Accept waits
// for one to close when n are open, so past the bound new connections
// wait in the kernel's backlog instead of costing the process memory and
// file descriptors.
func LimitListener(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		n = DefaultMaxConns
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// NewHTTPServer returns the http.Server that serves h as `sluice serve`
// does: request headers must arrive within 10s, an idle connection is
// closed after 2 minutes, and base is every request's context (streams
// end with it). Bodies have the Server's BodyTimeout; event streams have
// no read deadline at all.
func NewHTTPServer(h http.Handler, base context.Context) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
}
