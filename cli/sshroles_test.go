package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api"
)

// TestSSHConsoleRefusesRepeatedRole: an authorized-keys line naming
// sluice-role more than once, conflicting or not, stops the SSH console
// from starting; a line such as sluice-role="viewer",sluice-role="admin"
// opened admin sessions.
func TestSSHConsoleRefusesRepeatedRole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := newTestSSHKey(t, "sam")
	srv := api.NewServer(nil, api.ServerOptions{})
	log := slog.New(slog.DiscardHandler)
	for _, opts := range []string{
		`sluice-role="viewer",sluice-role="admin"`,
		`sluice-role="admin",sluice-role="viewer"`,
		`sluice-role=viewer,sluice-role=viewer`,
		`sluice-role="viewer",sluice-role="viewer",sluice-role="operator"`,
	} {
		file := filepath.Join(dir, "keys")
		if err := os.WriteFile(file, []byte(opts+" "+key.line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		o := &serveOptions{ssh: "127.0.0.1:0", sshKeys: file, sshHostKey: filepath.Join(dir, "host")}
		sc, err := startSSHConsole(o, srv, log)
		if sc != nil {
			id, _ := sc.keys.lookup(key.signer.PublicKey())
			sc.stop()
			t.Errorf("%s: the console started, the key as %s", opts, id.Role)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "sluice-role is given more than once") || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%s: err %v, want it to name the repeated option and its line", opts, err)
		}
	}
}
