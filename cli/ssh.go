package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	tea "charm.land/bubbletea/v2"
	"charm.land/ssh"
	"charm.land/wish/v2"
	"charm.land/wish/v2/bubbletea"
	gossh "golang.org/x/crypto/ssh"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/tui"
)

// The console over SSH: `sluice serve --ssh ADDR` lets the keys of an
// authorized-keys file open the console on the server's engine, each
// session its own program, each key with the role its line gives. A
// session calls the engine through the API in-process (api.Server.Local),
// so roles, redaction and read-only mode are the API's own.

// sshRoleOption is the authorized-keys option that gives a key its role.
const sshRoleOption = "sluice-role"

// sshDefaultRole is the role of a key whose line names none: the console
// exists to act, and the file is an explicit list of who may.
const sshDefaultRole = engine.RoleOperator

// sshKey is one authorized key and the identity it opens sessions as.
type sshKey struct {
	key gossh.PublicKey
	id  api.Identity
}

// sshKeys is an authorized-keys file.
type sshKeys []sshKey

// parseSSHKeys reads OpenSSH authorized_keys lines. The only option
// understood is sluice-role="viewer|inspector|operator|admin" (operator
// when absent), at most once a line; any other option is refused rather
// than ignored, since from=, command= and the like would otherwise look
// like restrictions and restrict nothing. A key is named by its comment, or by its
// fingerprint when the comment is empty or unprintable.
func parseSSHKeys(r io.Reader) (sshKeys, error) {
	var out sshKeys
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 16*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, comment, options, _, err := gossh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", engine.ErrInvalid, n, err)
		}
		role, named := sshDefaultRole, false
		for _, o := range options {
			name, value, _ := strings.Cut(o, "=")
			if name != sshRoleOption {
				return nil, fmt.Errorf("%w: line %d: option %q is not supported (only %s=ROLE)", engine.ErrInvalid, n, name, sshRoleOption)
			}
			// One role a key: with two, which one held would be the
			// parser's choice, and a viewer line with an admin option
			// appended opened admin sessions.
			if named {
				return nil, fmt.Errorf("%w: line %d: %s is given more than once (one role per key)", engine.ErrInvalid, n, sshRoleOption)
			}
			named = true
			role = engine.Role(strings.Trim(value, `"`))
			if !api.ValidRole(role) {
				return nil, fmt.Errorf("%w: line %d: unknown role %q (viewer, inspector, operator, admin)", engine.ErrInvalid, n, role)
			}
		}
		for _, k := range out {
			if ssh.KeysEqual(k.key, key) {
				return nil, fmt.Errorf("%w: line %d: the key of %q is listed twice", engine.ErrInvalid, n, k.id.Name)
			}
		}
		out = append(out, sshKey{key: key, id: api.Identity{Name: sshKeyName(comment, key), Role: role}})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// sshKeyName is the actor a key acts as: its comment when that is short
// printable text, else "ssh:" and its SHA256 fingerprint.
func sshKeyName(comment string, key gossh.PublicKey) string {
	c := strings.TrimSpace(comment)
	if c != "" && len(c) <= 64 && !strings.ContainsFunc(c, func(r rune) bool {
		return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '/'
	}) {
		return c
	}
	return "ssh:" + strings.TrimPrefix(gossh.FingerprintSHA256(key), "SHA256:")
}

// lookup finds the identity of an authenticated key.
func (ks sshKeys) lookup(key ssh.PublicKey) (api.Identity, bool) {
	if key == nil {
		return api.Identity{}, false
	}
	for _, k := range ks {
		if ssh.KeysEqual(k.key, key) {
			return k.id, true
		}
	}
	return api.Identity{}, false
}

func loadSSHKeys(path string) (sshKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ssh authorized keys: %w", err)
	}
	defer f.Close()
	keys, err := parseSSHKeys(f)
	if err != nil {
		return nil, fmt.Errorf("ssh authorized keys %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("ssh authorized keys %s: %w: no keys", path, engine.ErrInvalid)
	}
	return keys, nil
}

// defaultSSHHostKey is $XDG_DATA_HOME/sluice/ssh_host_ed25519_key, else
// ~/.local/share/sluice/ssh_host_ed25519_key.
func defaultSSHHostKey() string {
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "ssh_host_ed25519_key"
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "sluice", "ssh_host_ed25519_key")
}

// sshConsole serves the console over SSH.
type sshConsole struct {
	srv  *ssh.Server
	ln   net.Listener
	keys sshKeys
	// stopping ends every session's program (its context) when the
	// server stops, so each can say so before its connection closes;
	// sessions counts the sessions still open.
	stopping context.Context
	stopAll  context.CancelFunc
	sessions sync.WaitGroup
}

// startSSHConsole listens on o.ssh and serves a console per session, each
// calling apiSrv in-process as its key's identity.
func startSSHConsole(o *serveOptions, apiSrv *api.Server, log *slog.Logger) (*sshConsole, error) {
	if o.sshKeys == "" {
		return nil, fmt.Errorf("%w: --ssh needs --ssh-authorized-keys FILE: the keys that may open the console", engine.ErrInvalid)
	}
	keys, err := loadSSHKeys(o.sshKeys)
	if err != nil {
		return nil, err
	}
	hostKey := o.sshHostKey
	if hostKey == "" {
		hostKey = defaultSSHHostKey()
	}
	// A missing host key is generated; its folder must exist.
	if err := os.MkdirAll(filepath.Dir(hostKey), 0o700); err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	c := &sshConsole{keys: keys}
	gate := newSSHGate(o.sshMaxPreAuth)
	grace := o.sshLoginGrace
	if grace <= 0 {
		grace = sshLoginGrace
	}
	c.stopping, c.stopAll = context.WithCancel(context.Background())
	session := func(sess ssh.Session) (tea.Model, []tea.ProgramOption) {
		id, ok := keys.lookup(sess.PublicKey())
		if !ok { // not reached: authentication took only these keys
			wish.Fatalln(sess, "sluice: unknown key")
			return nil, nil
		}
		env := sess.Environ()
		getenv := func(k string) string {
			for i := len(env) - 1; i >= 0; i-- {
				if v, ok := strings.CutPrefix(env[i], k+"="); ok {
					return v
				}
			}
			return ""
		}
		// Its actions are recorded as the SSH surface's, from its key.
		ctl := apiSrv.Local(id, api.ClientOptions{Surface: engine.SurfaceSSH, Source: gossh.FingerprintSHA256(sess.PublicKey())})
		// The program ends with the session or with the server.
		ctx, cancel := context.WithCancel(sess.Context())
		stop := context.AfterFunc(c.stopping, cancel)
		context.AfterFunc(ctx, func() { stop(); cancel() })
		return tui.New(ctl, tui.Options{
			Source:        "over ssh",
			Actor:         id.Name,
			Getenv:        getenv,
			BuiltinEditor: true,
			Logger:        log.With("ssh_user", id.Name),
			Context:       ctx,
		}), []tea.ProgramOption{tea.WithContext(ctx)}
	}
	c.srv, err = wish.NewServer(
		wish.WithAddress(o.ssh),
		wish.WithHostKeyPath(hostKey),
		wish.WithPublicKeyAuth(func(_ ssh.Context, key ssh.PublicKey) bool {
			_, ok := keys.lookup(key)
			return ok
		}),
		wish.WithMiddleware(
			bubbletea.Middleware(session),
			needTerminal(), // a console needs a terminal
			c.sessionLog(log),
		),
		func(s *ssh.Server) error {
			s.HandshakeTimeout = grace
			s.ConnCallback = gate.admit
			return nil
		},
	)
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	c.ln, err = net.Listen("tcp", o.ssh)
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	go func() {
		if err := c.srv.Serve(c.ln); err != nil && !errors.Is(err, ssh.ErrServerClosed) {
			log.Error("ssh server", "err", err)
		}
	}()
	return c, nil
}

// needTerminal refuses a session without a terminal, saying how to ask
// for one (wish's activeterm said only "Requires an active PTY").
func needTerminal() wish.Middleware {
	return func(next ssh.Handler) ssh.Handler {
		return func(sess ssh.Session) {
			if _, _, ok := sess.Pty(); ok {
				next(sess)
				return
			}
			wish.Errorln(sess, "sluice: the console needs a terminal: connect with ssh -t (ssh -t -p PORT HOST)")
			_ = sess.Exit(1)
		}
	}
}

// sessionLog logs each session's start and end to the server's log, and
// counts it open; a session the server's stop ended is told so, and
// exits 1 (it used to end silently, with 0).
func (c *sshConsole) sessionLog(log *slog.Logger) wish.Middleware {
	return func(next ssh.Handler) ssh.Handler {
		return func(sess ssh.Session) {
			authenticated(sess.Context())
			c.sessions.Add(1)
			defer c.sessions.Done()
			id, _ := c.keys.lookup(sess.PublicKey())
			start := time.Now()
			log.Info("ssh session", "user", id.Name, "role", id.Role, "remote", sess.RemoteAddr().String())
			next(sess)
			if c.stopping.Err() != nil {
				wish.Errorln(sess, "\r\nsluice: the server is shutting down; this console session ends")
				_ = sess.Exit(1)
			}
			log.Info("ssh session ended", "user", id.Name, "dur", time.Since(start).Round(time.Millisecond))
		}
	}
}

// sshStopGrace bounds how long stop waits for the sessions' programs to
// end and say so before it closes their connections.
const sshStopGrace = 2 * time.Second

// stop ends every session's program, waits for them (at most
// sshStopGrace) and closes the listener and the connections.
func (c *sshConsole) stop() {
	c.stopAll()
	done := make(chan struct{})
	go func() { c.sessions.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(sshStopGrace):
	}
	_ = c.srv.Close()
}
