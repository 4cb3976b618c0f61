package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// testSSHKey is a client key: its signer, and its authorized_keys line.
type testSSHKey struct {
	signer gossh.Signer
	line   string // "ssh-ed25519 AAAA... comment"
	pem    []byte // the private key, OpenSSH format
}

func newTestSSHKey(t testing.TB, comment string) testSSHKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, comment)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sp)))
	if comment != "" {
		line += " " + comment
	}
	return testSSHKey{signer: signer, line: line, pem: pem.EncodeToMemory(block)}
}

func TestParseSSHKeys(t *testing.T) {
	t.Parallel()
	maya, sam, anon := newTestSSHKey(t, "maya@laptop"), newTestSSHKey(t, "sam"), newTestSSHKey(t, "")
	weird := newTestSSHKey(t, "")
	weirdLine := weird.line + " two words"
	file := strings.Join([]string{
		"# operators",
		"",
		maya.line,
		`sluice-role="viewer" ` + sam.line,
		`sluice-role=admin ` + anon.line,
		weirdLine,
	}, "\n")
	keys, err := parseSSHKeys(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Identity{
		{Name: "maya@laptop", Role: engine.RoleOperator},
		{Name: "sam", Role: engine.RoleViewer},
		{Name: "ssh:" + strings.TrimPrefix(gossh.FingerprintSHA256(anon.signer.PublicKey()), "SHA256:"), Role: engine.RoleAdmin},
		{Name: "ssh:" + strings.TrimPrefix(gossh.FingerprintSHA256(weird.signer.PublicKey()), "SHA256:"), Role: engine.RoleOperator},
	}
	if len(keys) != len(want) {
		t.Fatalf("%d keys, want %d", len(keys), len(want))
	}
	for i, k := range []testSSHKey{maya, sam, anon, weird} {
		id, ok := keys.lookup(k.signer.PublicKey())
		if !ok || id != want[i] {
			t.Errorf("key %d: %+v %v, want %+v", i, id, ok, want[i])
		}
	}
	if _, ok := keys.lookup(newTestSSHKey(t, "x").signer.PublicKey()); ok {
		t.Error("a key not in the file was found")
	}

	for name, bad := range map[string]struct{ file, err string }{
		"other option":  {`from="10.0.0.0/8" ` + maya.line, `option "from" is not supported`},
		"command":       {`command="/bin/sh" ` + maya.line, `option "command" is not supported`},
		"unknown role":  {`sluice-role=root ` + maya.line, `unknown role "root"`},
		"listed twice":  {maya.line + "\n" + maya.line, "listed twice"},
		"not a key":     {"ssh-ed25519 notbase64", "line 1"},
		"garbage later": {maya.line + "\nhello", "line 2"},
	} {
		_, err := parseSSHKeys(strings.NewReader(bad.file))
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("%s: err %v, want ErrInvalid mentioning %q", name, err, bad.err)
		}
	}
}

// sshTerm is a client session with a pseudo-terminal whose output is
// gathered, escape sequences stripped, for substring checks.
type sshTerm struct {
	t    testing.TB
	sess *gossh.Session
	in   io.WriteCloser
	out  syncBuffer
	done chan error
}

var ansiSeq = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78cDEHMNOZ]|\x1bP[^\x1b]*\x1b\\`)

func (s *sshTerm) text() string { return ansiSeq.ReplaceAllString(s.out.String(), "") }

func (s *sshTerm) waitFor(sub string) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.text(), sub) {
		if time.Now().After(deadline) {
			s.t.Fatalf("the session never showed %q; it showed:\n%s", sub, tailText(s.text(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *sshTerm) keys(ks ...string) {
	s.t.Helper()
	for _, k := range ks {
		if _, err := io.WriteString(s.in, k); err != nil {
			s.t.Fatalf("send %q: %v", k, err)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// quit presses q and waits for the session to end.
func (s *sshTerm) quit() {
	s.t.Helper()
	s.keys("q")
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.t.Fatalf("the session did not end after q:\n%s", tailText(s.text(), 2000))
	}
}

func tailText(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func dialSSH(addr string, key testSSHKey) (*gossh.Client, error) {
	return gossh.Dial("tcp", addr, &gossh.ClientConfig{
		User:            "operator",
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(key.signer)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), // a fresh host key per test
		Timeout:         10 * time.Second,
	})
}

func openSSHTerm(t testing.TB, addr string, key testSSHKey) *sshTerm {
	t.Helper()
	c, err := dialSSH(addr, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	st := &sshTerm{t: t, sess: sess, done: make(chan error, 1)}
	sess.Stdout, sess.Stderr = &st.out, &st.out
	if st.in, err = sess.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := sess.Setenv("NO_COLOR", "1"); err != nil {
		t.Logf("setenv refused: %v", err)
	}
	if err := sess.RequestPty("xterm-256color", 40, 160, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	go func() { st.done <- sess.Wait() }()
	return st
}

// retriedBy returns the jobs whose timeline holds a retry, with who did it.
func retriedBy(t *testing.T, e *engine.Engine) map[string]string {
	t.Helper()
	out := map[string]string{}
	page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{States: engine.AllStates}, Limit: engine.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range page.Jobs {
		d, err := e.GetJob(context.Background(), j.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range d.Timeline {
			if ev.Kind == engine.EventRetried {
				out[j.ID] = ev.Actor
			}
		}
	}
	return out
}

// TestSSHConsoleSessions serves the console over SSH on a store of dead
// jobs: a stranger's key is refused, a session without a terminal is
// refused, an operator's key retries a job (recorded as the key's name),
// and a viewer's key gets a read-only console that changes nothing.
func TestSSHConsoleSessions(t *testing.T) {
	dir := t.TempDir()
	maya, sam, stranger := newTestSSHKey(t, "maya@laptop"), newTestSSHKey(t, "sam@desk"), newTestSSHKey(t, "eve")
	keysFile := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keysFile, []byte(maya.line+"\nsluice-role=\"viewer\" "+sam.line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	db := deadStore(t, 3, 0)
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	o := &serveOptions{store: "sqlite://" + db, ssh: "127.0.0.1:0", sshKeys: keysFile, sshHostKey: filepath.Join(dir, "host", "key")}
	sc, err := startSSHConsole(o, api.NewServer(e, api.ServerOptions{}), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.stop() })
	addr := sc.ln.Addr().String()
	if _, err := os.Stat(o.sshHostKey); err != nil {
		t.Fatalf("no host key generated: %v", err)
	}

	if c, err := dialSSH(addr, stranger); err == nil {
		c.Close()
		t.Fatal("a key not in the file opened a connection")
	}

	c, err := dialSSH(addr, maya)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.CombinedOutput("")
	c.Close()
	var exit *gossh.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 1 || !strings.Contains(string(out), "needs a terminal: connect with ssh -t") {
		t.Fatalf("a session without a terminal: %v %q", err, out)
	}

	op := openSSHTerm(t, addr, maya)
	op.waitFor("maya@laptop (operator)")
	op.waitFor("B-0")
	op.keys("r")
	op.waitFor("Retry")
	op.keys("y")
	deadline := time.Now().Add(15 * time.Second)
	for len(retriedBy(t, e)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no job retried; the session showed:\n%s", tailText(op.text(), 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The story's payload fix, over SSH: the built-in editor, as maya.
	op.keys("e")
	op.waitFor("Edit the payload of B-0")
	op.keys("\x1b[B", "\x1b[F", "\x7f", "42", "\x13") // down, end, backspace, "42", ctrl+s
	op.waitFor("payload saved (version")
	edited := ""
	// Every state: the job edited may be the one just retried, running
	// or dying again on a loaded machine, not yet back among the dead.
	page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{States: engine.AllStates}})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range page.Jobs {
		d, err := e.GetJob(context.Background(), j.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range d.Timeline {
			if ev.Kind == engine.EventPayloadEdited {
				if ev.Actor != "maya@laptop" || !strings.Contains(string(d.Job.Payload), "42") {
					t.Fatalf("%s edited by %q to %s", j.ID, ev.Actor, d.Job.Payload)
				}
				edited = j.ID
			}
		}
	}
	if edited == "" {
		t.Fatalf("no payload edited; the session showed:\n%s", tailText(op.text(), 2000))
	}
	op.quit()
	got := retriedBy(t, e)
	if len(got) != 1 {
		t.Fatalf("retried %v, want one job", got)
	}
	for id, actor := range got {
		if actor != "maya@laptop" {
			t.Fatalf("%s retried by %q, want the key's name", id, actor)
		}
	}
	// The trail names the surface and the key it came from.
	trail, err := e.Audit(context.Background(), engine.AuditQuery{Actor: "maya@laptop"})
	if err != nil || len(trail.Records) == 0 {
		t.Fatalf("the session's audit records: %v %+v", err, trail)
	}
	if r := trail.Records[len(trail.Records)-1]; r.Actor != "maya@laptop" || r.Surface != engine.SurfaceSSH || !strings.HasPrefix(r.Source, "SHA256:") || r.Role == "" {
		t.Fatalf("the retry over SSH recorded %+v", r)
	}

	viewer := openSSHTerm(t, addr, sam)
	viewer.waitFor("sam@desk (viewer)")
	viewer.waitFor("READ-ONLY")
	viewer.keys(" ", "r", "y", "d", "y", "e")
	viewer.quit()
	if after := retriedBy(t, e); len(after) != 1 {
		t.Fatalf("a viewer's session changed jobs: %v", after)
	}
	page, err = e.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil || len(page.Jobs) != 2 {
		t.Fatalf("archived after the viewer: %d, %v (want the 2 nobody retried)", len(page.Jobs), err)
	}

	// The server stops with a session open: the session is told, and
	// exits 1 (it ended silently, with 0).
	last := openSSHTerm(t, addr, maya)
	last.waitFor("maya@laptop (operator)")
	sc.stop()
	select {
	case err := <-last.done:
		var exit *gossh.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 1 {
			t.Fatalf("the session ended with %v, want exit status 1", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the session did not end when the server stopped")
	}
	last.waitFor("sluice: the server is shutting down")
}

func TestSSHConsoleRefusesToStartWithoutKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# nobody yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(nil, api.ServerOptions{})
	log := slog.New(slog.DiscardHandler)
	for name, tc := range map[string]struct {
		keys string
		want string
	}{
		"no file named": {"", "--ssh needs --ssh-authorized-keys"},
		"missing file":  {filepath.Join(dir, "missing"), "no such file"},
		"no keys":       {empty, "no keys"},
	} {
		o := &serveOptions{ssh: "127.0.0.1:0", sshKeys: tc.keys, sshHostKey: filepath.Join(dir, "host")}
		if sc, err := startSSHConsole(o, srv, log); err == nil || !strings.Contains(err.Error(), tc.want) {
			if sc != nil {
				sc.stop()
			}
			t.Errorf("%s: err %v, want it to say %q", name, err, tc.want)
		}
	}
}

// BenchmarkSSHConsoleSession opens b.N console sessions over SSH, one
// after another, and keeps them open: it reports how long each took to
// draw its first frame with rows, and the server's heap per open session.
// The store is SLUICE_BENCH_SSH_STORE (a SQLite file, say one of a million
// dead jobs) or else 150 dead jobs seeded here:
//
//	SLUICE_BENCH_SSH_STORE=/tmp/apib/m1.db go test -run XXX -bench SSHConsoleSession -benchtime 50x ./cli/
func BenchmarkSSHConsoleSession(b *testing.B) {
	db := os.Getenv("SLUICE_BENCH_SSH_STORE")
	if db == "" {
		db = deadStore(b, 150, 0)
	}
	addr, key := benchSSHConsole(b, db)

	// One session first, so the store's caches are warm and counted once.
	openSSHTerm(b, addr, key).waitFor(" of ")
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var first time.Duration
	for b.Loop() {
		t0 := time.Now()
		openSSHTerm(b, addr, key).waitFor(" of ")
		first += time.Since(t0)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms/first-frame")
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/(1<<20)/float64(b.N), "heap-MB/session")
}

// benchSSHConsole serves the console over SSH on a SQLite file (an engine
// without maintenance, an API without tokens) for a benchmark, and returns
// its address and the key that logs in.
func benchSSHConsole(b *testing.B, db string) (string, testSSHKey) {
	b.Helper()
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	key := newTestSSHKey(b, "bench")
	keysFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keysFile, []byte(key.line+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	o := &serveOptions{store: "sqlite://" + db, ssh: "127.0.0.1:0", sshKeys: keysFile, sshHostKey: filepath.Join(dir, "host")}
	sc, err := startSSHConsole(o, api.NewServer(e, api.ServerOptions{}), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sc.stop)
	return sc.ln.Addr().String(), key
}
