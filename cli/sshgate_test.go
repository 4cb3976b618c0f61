package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// readUntilClosed reads c until the server closes it, or fails the test
// when it is still open after limit; it returns what the server sent.
func readUntilClosed(t *testing.T, c net.Conn, limit time.Duration) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(limit)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still held the connection after %s (it sent %q)", limit, b)
	}
	return string(b)
}

// TestSSHConsoleBoundsPreAuth opens raw connections to the SSH console
// that never authenticate: past the bound, one is closed before the
// server says a word; the others are closed when the login grace ends;
// then a key holder opens a console, which outlives the grace.
func TestSSHConsoleBoundsPreAuth(t *testing.T) {
	dir := t.TempDir()
	maya := newTestSSHKey(t, "maya@laptop")
	keysFile := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keysFile, []byte(maya.line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := deadStore(t, 2, 0)
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	const grace, bound = 700 * time.Millisecond, 3
	o := &serveOptions{store: "sqlite://" + db, ssh: "127.0.0.1:0", sshKeys: keysFile,
		sshHostKey: filepath.Join(dir, "host"), sshLoginGrace: grace, sshMaxPreAuth: bound}
	sc, err := startSSHConsole(o, api.NewServer(e, api.ServerOptions{}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.stop)
	addr := sc.ln.Addr().String()

	idle := make([]net.Conn, bound)
	for i := range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// The server's version line says the connection was taken.
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "SSH-" {
			t.Fatalf("connection %d: read %q, %v; want the server's SSH- banner", i, buf, err)
		}
		idle[i] = c
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { extra.Close() })
	if got := readUntilClosed(t, extra, 10*time.Second); got != "" {
		t.Fatalf("connection %d past the bound of %d was served: it got %q", bound+1, bound, got)
	}
	for i, c := range idle {
		if got := readUntilClosed(t, c, 10*grace+5*time.Second); strings.Contains(got, "SSH-") {
			t.Fatalf("idle connection %d: got a second banner %q", i, got)
		}
	}

	// The slots are free again, and a console that logged in is not held
	// to the grace.
	term := openSSHTerm(t, addr, maya)
	term.waitFor(" of ")
	time.Sleep(2 * grace)
	term.keys("?")
	term.waitFor("generated from the key map")
	term.keys("q") // closes the help
	term.quit()
}
