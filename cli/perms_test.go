package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestServeFilesArePrivate: `sluice serve` on a new SQLite file creates
// the file, its -wal and -shm and the --log-file readable by the owner
// only (0600) whatever the umask lets through, and warns when its tokens
// file is readable by every local user.
func TestServeFilesArePrivate(t *testing.T) {
	t.Setenv("SLUICE_TOKENS", "")
	old := syscall.Umask(0o022) // the usual umask, under which files were 0644
	t.Cleanup(func() { syscall.Umask(old) })

	dir := t.TempDir()
	db, logFile, tokens := filepath.Join(dir, "jobs.db"), filepath.Join(dir, "serve.log"), filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("maya:admin:0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokens, 0o644); err != nil {
		t.Fatal(err)
	}
	serveUntil(t, "sluice: serving", func(string) {
		for _, p := range []string{db, db + "-wal", db + "-shm", logFile} {
			st, err := os.Stat(p)
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s is %#o, want 0600", filepath.Base(p), st.Mode().Perm())
			}
		}
	}, "--store", "sqlite://"+db, "--listen", "127.0.0.1:0", "--tokens", tokens, "--log-file", logFile)
	logged, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), "tokens file is readable by other local users") {
		t.Errorf("no warning of the world-readable tokens file:\n%s", logged)
	}

	// A private tokens file is not warned about.
	if err := os.Chmod(tokens, 0o600); err != nil {
		t.Fatal(err)
	}
	logFile2 := filepath.Join(dir, "serve2.log")
	serveUntil(t, "sluice: serving", nil, "--store", "sqlite://"+db, "--listen", "127.0.0.1:0", "--tokens", tokens, "--log-file", logFile2)
	if logged, _ := os.ReadFile(logFile2); strings.Contains(string(logged), "readable by other") {
		t.Errorf("a 0600 tokens file is warned about:\n%s", logged)
	}
}

// TestServeHidesErrorsFromViewers: sluice serve --hide-errors-from-viewers
// answers a viewer's job list with the error text hidden, and an
// inspector's with it.
func TestServeHidesErrorsFromViewers(t *testing.T) {
	t.Setenv("SLUICE_TOKENS", "vera:viewer:viewer-0123456789abcdef\nines:inspector:inspector-0123456789abcdef")
	db := deadStore(t, 1, 0) // its job died of "card declined"
	addr := regexp.MustCompile(`serving (http://\S+/api/v1)`)
	for _, hide := range []bool{false, true} {
		args := []string{"--store", "sqlite://" + db, "--listen", "127.0.0.1:0"}
		if hide {
			args = append(args, "--hide-errors-from-viewers")
		}
		serveUntil(t, "sluice: serving", func(stdout string) {
			m := addr.FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("no address in %q", stdout)
			}
			for token, want := range map[string]bool{"viewer-0123456789abcdef": !hide, "inspector-0123456789abcdef": true} {
				r, _ := http.NewRequest("GET", m[1]+"/jobs?state=archived", nil)
				r.Header.Set("Authorization", "Bearer "+token)
				res, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if strings.Contains(string(b), "card declined") != want {
					t.Errorf("hide %v, %s: error text shown %v, want %v: %s", hide, token, !want, want, b)
				}
			}
		}, args...)
	}
}
