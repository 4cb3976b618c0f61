// Package redisserver runs redis-server processes of a test's own (or the
// chaos harness's): a private server a fault may stop, kill and resume,
// and a private cluster; the Redis sibling of internal/pgcluster. The
// shared test server and a fresh namespace on it are
// backend/redis/redistest's.
package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend/redis"
)

// ErrNotInstalled: redis-server is not on PATH.
var ErrNotInstalled = errors.New("redisserver: redis-server not found")

// Options configure a private server.
type Options struct {
	// AppendFsync turns the append-only file on with this fsync policy:
	// "always" (every write on disk before its answer: a SIGKILL loses
	// nothing acknowledged) or "everysec" (up to a second of acknowledged
	// writes lost on a SIGKILL or a crash of the machine; a SHUTDOWN
	// loses none). Empty: no AOF and no snapshots, a restart loses every
	// key.
	AppendFsync string
	// Dir holds the server's files (a temp folder of its own when empty).
	Dir string
	// Args are added to the command line last, so they win over the
	// defaults (--appendonly yes --maxmemory-policy allkeys-lru, say).
	Args []string
}

// Server is a redis-server of a test's (or the chaos harness's) own on a
// free loopback port, the only kind a fault may restart: the shared
// server is never stopped.
type Server struct {
	o    Options
	dir  string
	own  bool // dir is ours to remove
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a private redis-server and waits until it answers.
func Start(ctx context.Context, o Options) (*Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNotInstalled
	}
	switch o.AppendFsync {
	case "", "always", "everysec":
	default:
		return nil, fmt.Errorf("redisserver: appendfsync %q: want always or everysec", o.AppendFsync)
	}
	s := &Server{o: o, dir: o.Dir}
	if s.dir != "" {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
	} else {
		d, err := os.MkdirTemp("", "sluice-redis-")
		if err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		s.dir, s.own = d, true
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redisserver: free port: %w", err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := s.Resume(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Private starts a private server for tb, closed when tb ends.
// Without redis-server the test fails when CI is set and is skipped
// (saying so) otherwise.
func Private(tb testing.TB, o Options) *Server {
	tb.Helper()
	s, err := Start(context.Background(), o)
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") == "" {
		tb.Skipf("SKIP: %v: no private Redis to restart", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			b, _ := os.ReadFile(s.LogPath())
			tb.Logf("---- redis.log of the private server (last 4 KiB) ----\n%s", b[max(0, len(b)-4096):])
		}
		if err := s.Close(); err != nil {
			tb.Errorf("close the private redis: %v", err)
		}
	})
	return s
}

// URL is the server's redis:// URL (database 0).
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Dir is the folder of its files; LogPath its log.
func (s *Server) Dir() string     { return s.dir }
func (s *Server) LogPath() string { return filepath.Join(s.dir, "redis.log") }

// Resume starts the server (again) on its port and folder: with AOF it
// loads what it wrote before.
func (s *Server) Resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redisserver: server on %s is running", s.Addr())
	}
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--logfile", s.LogPath(), "--save", "", "--daemonize", "no", "--protected-mode", "no"}
	if s.o.AppendFsync != "" {
		args = append(args, "--appendonly", "yes", "--appendfsync", s.o.AppendFsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, s.o.Args...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisserver: start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		// A port that takes connections first (go-redis logs each failed
		// dial), then PING, which LOADING answers with an error until the
		// AOF is read.
		if cn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
			cn.Close()
			if err := c.Ping(ctx).Err(); err == nil {
				return nil
			}
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("redisserver: redis-server on %s exited at start (see %s)", s.Addr(), s.LogPath())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("redisserver: redis-server on %s did not answer within a minute", s.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down as an operator would (SIGTERM: Redis
// writes and fsyncs its AOF, then exits) and waits for it to exit.
func (s *Server) Stop(ctx context.Context) error { return s.halt(ctx, syscall.SIGTERM) }

// Kill ends the server with SIGKILL: what it had not written to disk is
// lost (with appendfsync always, nothing it acknowledged).
func (s *Server) Kill(ctx context.Context) error { return s.halt(ctx, syscall.SIGKILL) }

func (s *Server) halt(ctx context.Context, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redisserver: signal redis-server: %w", err)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("redisserver: redis-server on %s did not exit: %w", s.Addr(), ctx.Err())
	case <-time.After(time.Minute):
		return fmt.Errorf("redisserver: redis-server on %s did not exit within a minute of %v", s.Addr(), sig)
	}
	s.cmd = nil
	return nil
}

// Close kills the server and removes its folder (when it made it).
func (s *Server) Close() error {
	err := s.Kill(context.Background())
	if s.own {
		if rerr := os.RemoveAll(s.dir); err == nil && rerr != nil {
			err = fmt.Errorf("redisserver: %w", rerr)
		}
	}
	return err
}

// KillClients ends, with CLIENT KILL ID, every connection of the server
// at base whose name is name (as CLIENT SETNAME or a URL's client_name
// set it), never the asking one. It returns how many it ended.
func KillClients(ctx context.Context, base, name string) (int, error) {
	t, err := redis.ParseURL(base)
	if err != nil {
		return 0, fmt.Errorf("redisserver: kill clients: %w", err)
	}
	if t.Cluster {
		return 0, fmt.Errorf("redisserver: kill clients on a cluster: not done (one server's URL only)")
	}
	o := *t.Options
	o.ClientName = "sluice-admin"
	o.MaxRetries = -1
	c := goredis.NewClient(&o)
	defer c.Close()
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redisserver: client list: %w", err)
	}
	n := 0
	for _, id := range clientIDs(list, name) {
		if err := c.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err == nil {
			n++
		}
	}
	return n, nil
}

// clientIDs are the ids of the CLIENT LIST lines whose name is name.
func clientIDs(list, name string) []string {
	var ids []string
	for _, line := range strings.Split(list, "\n") {
		var id string
		named := false
		for _, f := range strings.Fields(line) {
			switch {
			case strings.HasPrefix(f, "id="):
				id = strings.TrimPrefix(f, "id=")
			case f == "name="+name:
				named = true
			}
		}
		if named && id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
