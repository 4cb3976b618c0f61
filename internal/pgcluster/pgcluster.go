// Package pgcluster starts private PostgreSQL servers and PgBouncers for
// the fault tests: a cluster of its own in a temp folder on a free port,
// which a test may stop, restart or starve of connections without
// touching the shared server of the machine (CONTRIBUTING.md: fault tests
// never restart the shared servers).
//
// initdb, pg_ctl and pgbouncer refuse to run as root, and CI runs as
// root: then every one of them runs as the postgres user, in a folder
// that user owns. It is a test helper; the product never imports it.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is returned when initdb, pg_ctl or pgbouncer cannot be
// found.
var ErrNotInstalled = errors.New("pgcluster: not installed")

// Options configure a private cluster.
type Options struct {
	// MaxConnections is the server's max_connections (100 when 0).
	MaxConnections int
	// Settings are more `-c name=value` server settings.
	Settings map[string]string
	// Log receives the commands run and their output on failure (nil:
	// discarded).
	Log io.Writer
	// Durable keeps fsync and full_page_writes at PostgreSQL's defaults
	// (on). The fault tests turn them off for speed; a benchmark keeps
	// them, so that commits cost what they cost on a real server.
	Durable bool
}

// Cluster is a private PostgreSQL server: its data folder, its port, and
// whether it runs. Its methods are not safe for concurrent use: one
// goroutine starts and stops it (the chaos harness keeps its restarts in
// line with a mutex).
type Cluster struct {
	o       Options
	bin     string // the folder of initdb, pg_ctl, postgres
	dir     string // owned by the server's user: data/, the log, the socket
	port    int
	running bool
	cred    *syscall.Credential // nil when not root
}

// Start initialises a cluster in a new temp folder and starts it on a free
// port of 127.0.0.1, with trust authentication for the user postgres.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.MaxConnections <= 0 {
		o.MaxConnections = 100
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := ownedTempDir("sluice-pgcluster-", cred)
	if err != nil {
		return nil, err
	}
	c := &Cluster{o: o, bin: bin, dir: dir, cred: cred}
	// --no-sync: the folder is thrown away; nothing here must survive a
	// power loss, only a server restart, which a clean shutdown covers.
	if err := c.run(ctx, filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgcluster: initdb: %w", err)
	}
	// A free port can be taken between the probe and the server's bind:
	// try another a few times.
	for try := 0; ; try++ {
		if c.port, err = FreePort(); err != nil {
			break
		}
		if err = c.Resume(ctx); err == nil || try == 2 {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// Port is the server's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir is the cluster's folder (data/, server.log).
func (c *Cluster) Dir() string { return c.dir }

// URL is a postgres:// URL of database postgres as user postgres.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Resume starts the server again after Stop (Start calls it first).
func (c *Cluster) Resume(ctx context.Context) error {
	if c.running {
		return nil
	}
	opts := []string{
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + c.dir,
		"-c", "max_connections=" + strconv.Itoa(c.o.MaxConnections),
	}
	if !c.o.Durable {
		// The tests measure nothing here; what they check survives a
		// clean restart without fsync.
		opts = append(opts, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	keys := make([]string, 0, len(c.o.Settings))
	for k := range c.o.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts = append(opts, "-c", k+"="+c.o.Settings[k])
	}
	if err := c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"),
		"-w", "-t", "60", "-o", strings.Join(opts, " "), "start"); err != nil {
		return fmt.Errorf("pgcluster: start on port %d: %w (log %s)", c.port, err, filepath.Join(c.dir, "server.log"))
	}
	c.running = true
	return nil
}

// Stop shuts the server down (fast: sessions are ended, the server
// checkpoints) and waits until it is gone. The port stays the cluster's:
// Resume starts it there again.
func (c *Cluster) Stop(ctx context.Context) error { return c.stop(ctx, "fast") }

func (c *Cluster) stop(ctx context.Context, mode string) error {
	if !c.running {
		return nil
	}
	if err := c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pgcluster: stop: %w", err)
	}
	c.running = false
	return nil
}

// Restart stops the server and starts it again on the same port, with
// its data: what clients see as a server restart.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.Resume(ctx)
}

// Close stops the server at once and removes its folder.
func (c *Cluster) Close() error {
	err := c.stop(context.Background(), "immediate")
	if rmErr := os.RemoveAll(c.dir); err == nil {
		err = rmErr
	}
	return err
}

// Conn opens one connection to the cluster's database postgres.
func (c *Cluster) Conn(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, c.URL())
}

// Holder is another client holding connection slots of a server.
type Holder struct {
	url   string
	conns []*pgx.Conn
}

// NewHolder is a client of the cluster that holds no connection yet.
func (c *Cluster) NewHolder() *Holder {
	return &Holder{url: c.URL() + "&application_name=pgcluster-hold"}
}

// Grab opens connections until the server refuses one (or n are open,
// when n > 0) and returns how many it holds in all. A refusal is not an
// error: it is what Grab is for. It connects from several goroutines at
// once, so that clients reconnecting at the same time do not win every
// slot that frees.
func (h *Holder) Grab(ctx context.Context, n int) int {
	const parallel = 8
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				full := n > 0 && len(h.conns) >= n
				mu.Unlock()
				if full {
					return
				}
				cn, err := pgx.Connect(ctx, h.url)
				if err != nil {
					return
				}
				mu.Lock()
				if n > 0 && len(h.conns) >= n {
					mu.Unlock()
					cn.Close(context.Background())
					return
				}
				h.conns = append(h.conns, cn)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return len(h.conns)
}

// Exhaust is another client taking every connection slot of the server
// from the clients whose application_name is app, which are connected to
// the cluster's database postgres and reconnect as fast as they can:
//
//  1. database postgres stops accepting connections (ALLOW_CONNECTIONS
//     false), so app's clients cannot win back a slot that frees;
//  2. app's connections are ended;
//  3. the holder fills every slot (max_connections, a superuser may take
//     the reserved ones too) from a database of its own;
//  4. database postgres accepts connections again: app's clients are
//     now refused for want of a slot (SQLSTATE 53300, too many clients).
//
// The slots are the holder's until Release.
func (c *Cluster) Exhaust(ctx context.Context, app string) (*Holder, error) {
	// The holder's database: created from template1, which always exists,
	// and which no client of the store uses.
	boot, err := pgx.Connect(ctx, c.dbURL("template1"))
	if err != nil {
		return nil, fmt.Errorf("pgcluster: exhaust: %w", err)
	}
	var exists bool
	err = boot.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'pgcluster_hold')`).Scan(&exists)
	if err == nil && !exists {
		_, err = boot.Exec(ctx, `CREATE DATABASE pgcluster_hold`)
	}
	boot.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: exhaust: %w", err)
	}
	h := &Holder{url: c.dbURL("pgcluster_hold") + "&application_name=pgcluster-hold"}
	if h.Grab(ctx, 1) != 1 {
		return nil, fmt.Errorf("pgcluster: exhaust: no connection to pgcluster_hold")
	}
	admin := h.conns[0]
	fail := func(err error) (*Holder, error) {
		_, _ = admin.Exec(context.Background(), `ALTER DATABASE postgres ALLOW_CONNECTIONS true`)
		h.Release()
		return nil, fmt.Errorf("pgcluster: exhaust: %w", err)
	}
	var max int
	if err := admin.QueryRow(ctx, `SELECT current_setting('max_connections')::int`).Scan(&max); err != nil {
		return fail(err)
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE postgres ALLOW_CONNECTIONS false`); err != nil {
		return fail(err)
	}
	if _, err := terminate(ctx, admin, app, "postgres"); err != nil {
		return fail(err)
	}
	// A client's attempt to connect takes a slot for a moment before it is
	// turned away, so a refusal does not yet mean every slot is taken.
	deadline := time.Now().Add(30 * time.Second)
	for h.Grab(ctx, max) < max {
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("holds %d of %d connection slots after 30s", h.Held(), max))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE postgres ALLOW_CONNECTIONS true`); err != nil {
		return fail(err)
	}
	return h, nil
}

// dbURL is URL with another database.
func (c *Cluster) dbURL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Held is how many connections the holder has.
func (h *Holder) Held() int { return len(h.conns) }

// Terminate ends, over one of the held connections (a starved server has
// no slot for another), every other client's connection whose
// application_name is app, and returns how many it ended.
func (h *Holder) Terminate(ctx context.Context, app string) (int, error) {
	if len(h.conns) == 0 {
		return 0, errors.New("pgcluster: terminate: the holder holds no connection")
	}
	return terminate(ctx, h.conns[0], app, "")
}

// Release closes every held connection.
func (h *Holder) Release() {
	for _, cn := range h.conns {
		cn.Close(context.Background())
	}
	h.conns = nil
}

// run runs a command as the server's user; its output is returned in the
// error when it fails.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	return runAs(ctx, c.cred, c.dir, c.o.Log, name, args...)
}

func runAs(ctx context.Context, cred *syscall.Credential, dir string, log io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	asUser(cmd, cred)
	if log != nil {
		fmt.Fprintf(log, "pgcluster: %s %s\n", name, strings.Join(args, " "))
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// asUser makes cmd run as cred's user (nil: as this process), with a
// HOME of that user's so that nothing reads root's files.
func asUser(cmd *exec.Cmd, cred *syscall.Credential) {
	if cred == nil {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Env = append(os.Environ(), "HOME="+cmd.Dir)
}

// serverUser is the postgres user's credential when this process is root
// (the server refuses to run as root), nil otherwise.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, and there is no postgres user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// ownedTempDir makes a temp folder owned by cred's user. It is made
// directly under the system's temp folder, because a test's own TempDir
// sits in a folder only root may enter.
func ownedTempDir(pattern string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp(os.TempDir(), pattern)
	if err != nil {
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	// The server wants its folders private; 0700 is what MkdirTemp gives.
	return dir, nil
}

// binDir finds the folder of PostgreSQL's server programs: that of
// initdb on PATH, else the newest /usr/lib/postgresql/N/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestV := "", -1
	for _, d := range ds {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil && v > bestV {
			best, bestV = d, v
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: initdb and pg_ctl (apt-get install postgresql)", ErrNotInstalled)
	}
	return best, nil
}

// FreePort is a TCP port of 127.0.0.1 that nothing listened on a moment
// ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitTCP waits until something accepts connections at addr.
func waitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		d := net.Dialer{Timeout: time.Second}
		cn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			cn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing accepts connections at %s after %s: %w", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
