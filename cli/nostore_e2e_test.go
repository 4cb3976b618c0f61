package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConsoleNeverCreatesAStore: commands that only read, and a console
// without workers, never create (or migrate) the store they are pointed
// at. A mistyped path is an error naming `sluice migrate`, in a real
// terminal, and leaves no file behind.
func TestConsoleNeverCreatesAStore(t *testing.T) {
	bin := e2eBinary(t)
	dir := t.TempDir()
	nope := filepath.Join(dir, "nope.db")
	script := fmt.Sprintf("%[1]s jobs list --store sqlite://%[2]s; echo jobs-exit=$?; "+
		"%[1]s quarantine list --store sqlite://%[2]s; echo quarantine-exit=$?; "+
		"%[1]s tui --store sqlite://%[2]s; echo tui-exit=$?; sleep 60", bin, nope)
	c := startConsole(t, "nostore", nope, "sh -c '"+script+"'")
	c.waitFor(`tui-exit=\d`, 30*time.Second)
	// The pane wraps long lines: compare with the whitespace taken out.
	screen := strings.Join(strings.Fields(c.screen()), "")
	for _, want := range []string{"jobs-exit=1", "quarantine-exit=1", "tui-exit=1", "does not exist", "sluice migrate --store sqlite://" + nope} {
		if !strings.Contains(screen, strings.Join(strings.Fields(want), "")) {
			t.Errorf("the terminal does not show %q:\n%s", want, screen)
		}
	}
	if _, err := os.Stat(nope); !os.IsNotExist(err) {
		t.Errorf("a read-only command left %s behind (stat: %v)", nope, err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(nope + side); !os.IsNotExist(err) {
			t.Errorf("a read-only command left %s%s behind", nope, side)
		}
	}
}
