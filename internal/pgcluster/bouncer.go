package pgcluster

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BouncerOptions configure a PgBouncer.
type BouncerOptions struct {
	// Server is the PostgreSQL server behind it: a postgres:// URL whose
	// host and port are used (its user and database are the clients').
	Server string
	// PoolSize is the server connections per user and database (20 when 0).
	PoolSize int
	// Log receives the command run (nil: discarded).
	Log io.Writer
}

// Bouncer is a PgBouncer in transaction pooling mode, a child of this
// process.
type Bouncer struct {
	dir    string
	port   int
	server *url.URL
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
}

// BouncerInstalled reports whether a pgbouncer program is on PATH (or in
// /usr/sbin, where Debian puts it).
func BouncerInstalled() (string, bool) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, true
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", true
	}
	return "", false
}

// StartBouncer starts a PgBouncer on a free port of 127.0.0.1 in front of
// o.Server, in transaction pooling mode (a server connection is a
// client's only for one transaction: no session state survives between
// statements), trusting the users postgres and root.
func StartBouncer(ctx context.Context, o BouncerOptions) (*Bouncer, error) {
	bin, ok := BouncerInstalled()
	if !ok {
		return nil, fmt.Errorf("%w: pgbouncer (apt-get install pgbouncer; scripts/services ensure does)", ErrNotInstalled)
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 20
	}
	srv, err := url.Parse(o.Server)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: bouncer server %q: %w", o.Server, err)
	}
	host, port := srv.Hostname(), srv.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "5432"
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := ownedTempDir("sluice-pgbouncer-", cred)
	if err != nil {
		return nil, err
	}
	b := &Bouncer{dir: dir, server: srv, done: make(chan struct{})}
	if b.port, err = FreePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = postgres
pool_mode = transaction
default_pool_size = %d
max_client_conn = 2000
; Startup parameters PgBouncer does not track refuse the connection
; ("unsupported startup parameter"). extra_float_digits and options are
; what other clients (psql, lib/pq) send. The PostgreSQL store sends no
; plan_cache_mode in the simple protocol, so a default PgBouncer takes it.
ignore_startup_parameters = extra_float_digits,options
server_reset_query =
logfile = %s
pidfile = %s
`, host, port, b.port, filepath.Join(dir, "users.txt"), o.PoolSize,
		filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	files := map[string]string{
		"pgbouncer.ini": ini,
		"users.txt":     "\"postgres\" \"\"\n\"root\" \"\"\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if cred != nil {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
	}
	// In the foreground, as a child: Close ends exactly this process.
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	b.cmd.Dir = dir
	asUser(b.cmd, cred)
	if o.Log != nil {
		fmt.Fprintf(o.Log, "pgcluster: %s %s (port %d, in front of %s:%s)\n", bin, filepath.Join(dir, "pgbouncer.ini"), b.port, host, port)
	}
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgcluster: start pgbouncer: %w", err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	if err := waitTCP(ctx, "127.0.0.1:"+strconv.Itoa(b.port), 30*time.Second); err != nil {
		b.Close()
		return nil, fmt.Errorf("pgcluster: pgbouncer on port %d: %w (log %s)", b.port, err, filepath.Join(dir, "pgbouncer.log"))
	}
	return b, nil
}

// Port is the bouncer's port on 127.0.0.1.
func (b *Bouncer) Port() int { return b.port }

// URL is the server's URL with its host and port replaced by the
// bouncer's: the same user, database and query.
func (b *Bouncer) URL() string {
	u := *b.server
	u.Host = "127.0.0.1:" + strconv.Itoa(b.port)
	return u.String()
}

// adminURL is the bouncer's admin console (SHOW POOLS, SHOW CONFIG).
func (b *Bouncer) adminURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pgbouncer?sslmode=disable", b.port)
}

// Log is what the bouncer logged so far.
func (b *Bouncer) Log() string {
	out, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	return strings.TrimSpace(string(out))
}

// Close stops the bouncer (SIGTERM, SIGKILL after 10 s) and removes its
// folder.
func (b *Bouncer) Close() error {
	select {
	case <-b.done:
	default:
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	}
	return os.RemoveAll(b.dir)
}
