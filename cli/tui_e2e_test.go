package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// End-to-end tests of the console: the real binary runs `sluice demo` in
// tmux, keys are typed with send-keys, the screen is read with
// capture-pane, and the store says what happened. They take a while, so
// they run only with SLUICE_E2E=1 (and tmux installed).

type tmuxConsole struct {
	t      *testing.T
	socket string
	db     string
}

func e2eBinary(t *testing.T) string {
	t.Helper()
	if os.Getenv("SLUICE_E2E") != "1" {
		t.Skip("end-to-end console test: set SLUICE_E2E=1 to run it")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	// scripts/test builds the binary once for every e2e test.
	if bin := os.Getenv("SLUICE_E2E_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// startDemo runs `sluice demo` on a fresh file in a tmux server of its
// own, without the outage's backlog of a few thousand dead invoices: these
// tests need a few dead jobs, not the night (TestConsoleStory has it).
func startDemo(t *testing.T, bin string) *tmuxConsole {
	return startDemoWith(t, bin, "", "--backlog", "0")
}

// startDemoWith runs `env <env> sluice demo` on a fresh file with the extra
// flags in a tmux server of its own.
func startDemoWith(t *testing.T, bin, env string, extra ...string) *tmuxConsole {
	t.Helper()
	dir := t.TempDir()
	c := &tmuxConsole{t: t, socket: fmt.Sprintf("sluice-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()), db: filepath.Join(dir, "demo.db")}
	cmd := fmt.Sprintf("env %s %s demo --db %s --trickle 0 --log-file %s %s", env, bin, c.db, filepath.Join(dir, "demo.log"), strings.Join(extra, " "))
	c.tmux("new-session", "-d", "-s", "e2e", "-x", "160", "-y", "45", cmd)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", c.socket, "kill-server").Run() })
	return c
}

func (c *tmuxConsole) tmux(args ...string) string {
	c.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", c.socket}, args...)...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (c *tmuxConsole) screen() string { return c.tmux("capture-pane", "-p", "-t", "e2e") }

func (c *tmuxConsole) send(keys ...string) {
	c.t.Helper()
	for _, k := range keys {
		c.tmux("send-keys", "-t", "e2e", k)
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *tmuxConsole) typeText(s string) {
	c.t.Helper()
	c.tmux("send-keys", "-t", "e2e", "-l", s)
	time.Sleep(100 * time.Millisecond)
}

// waitFor waits until the screen matches re and returns the match.
func (c *tmuxConsole) waitFor(re string, within time.Duration) []string {
	c.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(within)
	for {
		s := c.screen()
		if m := rx.FindStringSubmatch(s); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the screen never matched %q:\n%s", re, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitUntil waits until ok holds for the screen and returns it.
func (c *tmuxConsole) waitUntil(what string, within time.Duration, ok func(screen string) bool) string {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := c.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the screen never showed %s:\n%s", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// escape presses esc and waits until the screen no longer matches gone
// before any other key is sent: an esc that reaches the console in one
// read with the next key is that key with alt (a terminal cannot tell
// them apart), which happens on a loaded machine after a fixed pause.
func (c *tmuxConsole) escape(gone string) {
	c.t.Helper()
	rx := regexp.MustCompile(gone)
	c.send("Escape")
	c.waitUntil(fmt.Sprintf("%q gone after esc", gone), 15*time.Second, func(s string) bool { return !rx.MatchString(s) })
}

// quit presses q and waits for the console (and its engine) to end.
func (c *tmuxConsole) quit() {
	c.t.Helper()
	c.send("q")
	deadline := time.Now().Add(30 * time.Second)
	for exec.Command("tmux", "-L", c.socket, "has-session", "-t", "e2e").Run() == nil {
		if time.Now().After(deadline) {
			c.t.Fatalf("the demo did not stop after q:\n%s", c.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// retriedJobs opens the store and returns every job whose timeline holds
// an operator retry.
func retriedJobs(t *testing.T, db string) []string {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cursor := ""
	for {
		page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{States: engine.AllStates}, Cursor: cursor, Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			d, err := e.GetJob(ctx, j.ID, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range d.Timeline {
				if ev.Kind == engine.EventRetried {
					out = append(out, j.ID)
					break
				}
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	slices.Sort(out)
	return out
}

var dialogID = regexp.MustCompile(`│\s+(demo-[A-Za-z0-9-]+)\s+│`)

// TestConsoleMarkTwoAndRetry: mark two archived jobs, retry them, and
// exactly those two carry the operator's retry.
func TestConsoleMarkTwoAndRetry(t *testing.T) {
	bin := e2eBinary(t)
	c := startDemo(t, bin)
	c.waitFor(`archived ([2-9]|\d\d)`, 60*time.Second)
	c.waitFor(`(?m)^› demo-`, 30*time.Second)
	c.markTwoAndRetry(dialogID)
}

// markTwoAndRetry marks the first two rows, retries them, quits, and
// checks through the store that exactly those two carry an operator
// retry. ids finds the job ids the confirmation lists.
func (c *tmuxConsole) markTwoAndRetry(ids *regexp.Regexp) {
	c.t.Helper()
	c.markFirstTwo()
	c.send("r")
	c.waitFor(`Retry 2 marked jobs\?`, 10*time.Second)
	var marked []string
	for _, m := range ids.FindAllStringSubmatch(c.screen(), -1) {
		marked = append(marked, m[1])
	}
	if len(marked) != 2 {
		c.t.Fatalf("the confirmation names %v, want two jobs:\n%s", marked, c.screen())
	}
	c.send("y")
	c.waitFor(`2 retried`, 15*time.Second)
	c.quit()
	slices.Sort(marked)
	if got := retriedJobs(c.t, c.db); !slices.Equal(got, marked) {
		c.t.Fatalf("jobs with an operator retry: %v, want exactly %v", got, marked)
	}
}

// firstRow matches a list whose cursor is on its first row.
var firstRow = regexp.MustCompile(`LAST ERROR[^\n]*\n› `)

// markFirstTwo marks the list's first two rows. Rows that die meanwhile
// arrive above the cursor, which stays on its job: it goes to the top
// until it sees the cursor there (the demo's first deaths come for some
// seconds), so the two marks land on two rows (space marks and moves
// down; on the last row a second space would unmark — a loaded machine
// showed that).
func (c *tmuxConsole) markFirstTwo() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.send("g")
		time.Sleep(300 * time.Millisecond)
		if firstRow.MatchString(c.screen()) {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cursor never stayed on the first row:\n%s", c.screen())
		}
	}
	c.send("Space")
	c.waitFor(`1 marked`, 10*time.Second)
	c.send("Space")
	c.waitFor(`2 marked`, 10*time.Second)
}

// TestConsoleBulkRetry: a dry run from a filter, confirmed, runs to the
// end as one operation.
func TestConsoleBulkRetry(t *testing.T) {
	bin := e2eBinary(t)
	c := startDemo(t, bin)
	c.waitFor(`archived ([2-9]|\d\d)`, 60*time.Second)
	c.send("/")
	c.typeText("kind:invoice.generate")
	c.send("Enter")
	c.waitFor(`(?m)^› demo-\S+\s+billing\s+invoice\.generate`, 30*time.Second)
	c.send("b")
	m := c.waitFor(`retry (\d+) jobs? \(state archived, kind invoice\.generate\)`, 15*time.Second)
	n, _ := strconv.Atoi(m[1])
	if n == 0 {
		t.Fatal("the dry run matched nothing")
	}
	c.send("y")
	c.waitFor(`Bulk retry — completed`, 30*time.Second)
	c.send("Escape") // the dialog stays on the result until closed; its toast waits for it
	done := c.waitFor(`bulk retry completed: (\d+) matched, (\d+) retried, (\d+) failed`, 15*time.Second)
	c.quit()
	retried, _ := strconv.Atoi(done[2])
	got := retriedJobs(t, c.db)
	if len(got) != retried || retried == 0 {
		t.Fatalf("the operation says %d retried; the store shows %d jobs with a retry: %v", retried, len(got), got)
	}
	for _, id := range got {
		if !strings.HasPrefix(id, "demo-") {
			t.Errorf("unexpected job %s retried", id)
		}
	}
}

// startServe runs the real `sluice serve` over db on free loopback ports
// with the extra flags, and returns what it printed it serves: the HTTP
// base URL and, with --ssh, the SSH port.
func startServe(t *testing.T, bin, db string, env []string, extra ...string) (base, sshPort string) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"serve", "--store", "sqlite://" + db, "--listen", "127.0.0.1:0",
		"--log-file", filepath.Join(dir, "serve.log")}, extra...)
	serve := exec.Command(bin, args...)
	serve.Env = append(append(os.Environ(), "SLUICE_TOKENS=", "XDG_CONFIG_HOME="+dir), env...)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
	})
	wantSSH := slices.Contains(extra, "--ssh")
	sc := bufio.NewScanner(stdout)
	for (base == "" || (wantSSH && sshPort == "")) && sc.Scan() {
		if m := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)/api/v1`).FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
		}
		if m := regexp.MustCompile(`ssh://127\.0\.0\.1:(\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			sshPort = m[1]
		}
	}
	if base == "" || (wantSSH && sshPort == "") {
		t.Fatalf("serve printed no address (http %q, ssh %q)", base, sshPort)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return base, sshPort
}

// startConsole runs cmd in a tmux server of its own, 160×45.
func startConsole(t *testing.T, name, db, cmd string) *tmuxConsole {
	t.Helper()
	c := &tmuxConsole{t: t, socket: fmt.Sprintf("sluice-e2e-%s-%d-%d", name, os.Getpid(), time.Now().UnixNano()), db: db}
	c.tmux("new-session", "-d", "-s", "e2e", "-x", "160", "-y", "45", cmd)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", c.socket, "kill-server").Run() })
	return c
}

// TestConsoleOverSSH: the real `sluice serve --ssh`, reached by OpenSSH's
// client in tmux; two jobs marked and retried, recorded as the key's name.
func TestConsoleOverSSH(t *testing.T) {
	bin := e2eBinary(t)
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatal("the ssh client is not installed (scripts/test installs openssh-client)")
	}
	dir := t.TempDir()
	key := newTestSSHKey(t, "maya@laptop")
	keyFile, authFile := filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keyFile, key.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(authFile, []byte(key.line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := deadStore(t, 6, 0)
	_, port := startServe(t, bin, db, nil,
		"--ssh", "127.0.0.1:0", "--ssh-authorized-keys", authFile, "--ssh-host-key", filepath.Join(dir, "host_key"))

	c := startConsole(t, "ssh", db, fmt.Sprintf("ssh -F /dev/null -i %s -o IdentitiesOnly=yes -o StrictHostKeyChecking=no "+
		"-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p %s -t 127.0.0.1", keyFile, port))
	c.waitFor(`maya@laptop \(operator\)`, 30*time.Second)
	c.waitFor(`(?m)^› B-0`, 30*time.Second)
	c.markTwoAndRetry(regexp.MustCompile(`│\s+(B-\d+)\s+│`))
}

// TestConsoleAttachedOverHTTP: `sluice tui --api` against the real server
// with tokens. An operator's console runs story step 5 — a bulk retry from
// a filter, previewed and confirmed — to the end as one operation; a
// viewer's console shows the same jobs read-only, with no action keys and
// no payload.
func TestConsoleAttachedOverHTTP(t *testing.T) {
	bin := e2eBinary(t)
	db := deadStore(t, 8, 3)
	const opToken, viewToken = "op-token-0123456789abcdef", "view-token-0123456789abcdef"
	base, _ := startServe(t, bin, db, []string{"SLUICE_TOKENS=maya:operator:" + opToken + "\nsam:viewer:" + viewToken})

	viewer := startConsole(t, "viewer", db, fmt.Sprintf("%s tui --api %s --token %s", bin, base, viewToken))
	viewer.waitFor(`sam \(viewer\)\s+READ-ONLY`, 30*time.Second)
	viewer.waitFor(`(?m)^› [BE]-0`, 30*time.Second)
	viewer.send("/")
	viewer.typeText("queue:billing")
	viewer.send("Enter")
	viewer.waitFor(`(?m)^› B-0`, 15*time.Second)
	viewer.send("Enter", "p")
	viewer.waitFor(`hidden for your role`, 15*time.Second)
	screen := viewer.screen()
	if strings.Contains(screen, "r retry") || strings.Contains(screen, "b bulk") || strings.Contains(screen, "customer") {
		t.Fatalf("a viewer's console offers actions or shows a payload:\n%s", screen)
	}
	viewer.send("r", "b")
	viewer.quit()

	c := startConsole(t, "http", db, fmt.Sprintf("%s tui --api %s --token %s", bin, base, opToken))
	c.waitFor(`maya \(operator\)`, 30*time.Second)
	c.waitFor(`(?m)^› [BE]-0`, 30*time.Second)
	c.send("/")
	c.typeText("queue:billing")
	c.send("Enter")
	c.waitFor(`(?m)^› B-0`, 15*time.Second)
	c.send("b")
	m := c.waitFor(`retry (\d+) jobs? \(state archived, queue billing\)`, 15*time.Second)
	if m[1] != "8" {
		t.Fatalf("the dry run matched %s jobs, want the 8 billing ones", m[1])
	}
	c.send("y")
	c.waitFor(`Bulk retry — completed`, 30*time.Second)
	c.send("Escape") // the dialog stays on the result until closed; its toast waits for it
	c.waitFor(`bulk retry completed: 8 matched, 8 retried, 0 failed`, 15*time.Second)
	c.quit()
	got := retriedJobs(t, db)
	if len(got) != 8 {
		t.Fatalf("jobs with a retry: %v, want the 8 billing ones", got)
	}
	for _, id := range got {
		if !strings.HasPrefix(id, "B-") {
			t.Errorf("%s retried: the filter was queue:billing", id)
		}
	}
}
