package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cmdline"
	"github.com/sluicehq/sluice/internal/pgcluster"
)

// storePassword is the password the secrets tests put in store URLs; it
// must be found in no output, log or error.
const storePassword = "Hunter2-Secret"

// serveUntil runs `sluice serve args...` in process until its output
// holds want (or 30s pass), calls during (when not nil) while it still
// serves, then stops it, and returns what it printed.
func serveUntil(t *testing.T, want string, during func(stdout string), args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- cmdline.Run(ctx, newRoot(), "sluice", append([]string{"serve"}, args...), &out, &errb) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) && time.Now().Before(deadline) {
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve ended (exit %d) before printing %q:\n%s\n%s", code, want, out.String(), errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !strings.Contains(out.String(), want) {
		cancel()
		<-done
		t.Fatalf("serve never printed %q:\n%s\n%s", want, out.String(), errb.String())
	}
	if during != nil {
		during(out.String())
	}
	cancel()
	<-done
	return out.String(), errb.String()
}

// TestStorePasswordNeverPrinted: a PostgreSQL password given as
// ?password= (or in the URL's user) reaches neither the startup line,
// the log, an error, nor `sluice config show`; an unparsable store URL is
// not echoed raw.
func TestStorePasswordNeverPrinted(t *testing.T) {
	t.Setenv("SLUICE_TOKENS", "")
	t.Setenv("SLUICE_STORE", "")
	t.Setenv("SLUICE_API", "")

	t.Run("unparsable urls", func(t *testing.T) {
		for _, store := range []string{
			"postgres://root:" + storePassword + "%zz@127.0.0.1:5432/test",
			"postgres://root@127.0.0.1:5432/test?password=" + storePassword + "&x=%zz",
			"redis://:" + storePassword + "%zz@127.0.0.1:6379/0",
			"mysql://root:" + storePassword + "@127.0.0.1/x",
		} {
			code, out, stderr := runCLI(t, "", "jobs", "list", "--store", store)
			if code == 0 || strings.Contains(out+stderr, storePassword) {
				t.Errorf("jobs list --store %s: exit %d, prints the password:\n%s%s", store, code, out, stderr)
			}
			code, out, stderr = runCLI(t, "", "tui", "--api", strings.Replace(store, "postgres", "http", 1)+"/%zz")
			if code == 0 || strings.Contains(out+stderr, storePassword) {
				t.Errorf("tui --api: exit %d, prints the password:\n%s%s", code, out, stderr)
			}
		}
	})

	t.Run("config show", func(t *testing.T) {
		t.Setenv("SLUICE_STORE", "postgres://root:"+storePassword+"@db:5432/test?sslpassword="+storePassword)
		code, out, stderr := runCLI(t, "", "config", "show", "serve")
		if code != 0 || strings.Contains(out, storePassword) || !strings.Contains(out, "postgres://root:xxxxx@db:5432/test?sslpassword=xxxxx") {
			t.Fatalf("config show serve: exit %d:\n%s%s", code, out, stderr)
		}
	})

	t.Run("postgres", func(t *testing.T) {
		base, _ := pgcluster.SharedStoreURL(t)
		withPassword := base + "&password=" + storePassword

		// An error naming the store: the schema holds no store yet.
		code, out, stderr := runCLI(t, "", "jobs", "list", "--store", withPassword)
		if code == 0 || !strings.Contains(stderr, "holds no sluice store") || strings.Contains(out+stderr, storePassword) {
			t.Fatalf("jobs list on an empty schema: exit %d:\n%s%s", code, out, stderr)
		}

		logFile := filepath.Join(t.TempDir(), "serve.log")
		out, stderr = serveUntil(t, "sluice: serving", nil, "--store", pgcluster.Migrating(withPassword),
			"--listen", "127.0.0.1:0", "--log-file", logFile, "--log-level", "debug")
		logged, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		all := out + stderr + string(logged)
		if strings.Contains(all, storePassword) || !strings.Contains(all, "password=xxxxx") {
			t.Fatalf("serve prints or logs the password:\n%s", all)
		}
	})
}

// TestConsoleHeaderHidesStorePassword: the console's header names its
// store without the password given as ?password= (the real binary in
// tmux, on a fresh PostgreSQL schema).
func TestConsoleHeaderHidesStorePassword(t *testing.T) {
	bin := e2eBinary(t)
	base, _ := pgcluster.SharedStoreURL(t)
	// The password first, so the header (cut to the screen's width)
	// would show it.
	storeURL := strings.Replace(pgcluster.Migrating(base), "?", "?password="+storePassword+"&", 1)
	c := startConsole(t, "pg-secret", "", fmt.Sprintf("%s demo --store '%s' --trickle 0 --backlog 0", bin, storeURL))
	screen := c.waitFor(`password=xxxxx`, 60*time.Second)
	if s := c.screen(); strings.Contains(s, storePassword) {
		t.Fatalf("the console shows the password:\n%s (%d lines matched)", s, len(screen))
	}
}
