package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
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

// The operator's night (../shared/STORY.md) on the real binary: `sluice
// demo` in tmux, with the demo's own data, step by step as the story
// writes it; and the attached console's connection badge telling the
// truth when its server goes away and comes back.

// number reads "4,180" as 4180.
func number(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

var archivedTab = regexp.MustCompile(`archived (\d{1,3}(?:,\d{3})*)`)

// tab reads a state tab's count from the screen's tab line; -1 when the
// screen shows no tabs or the count is still on its way.
func tab(t *testing.T, screen string, rx *regexp.Regexp) int {
	lines := strings.SplitN(screen, "\n", 3)
	if len(lines) < 2 {
		return -1
	}
	if m := rx.FindStringSubmatch(lines[1]); m != nil {
		return number(t, m[1])
	}
	return -1
}

// cursorTo presses j (from the top) until the cursor row matches row.
func (c *tmuxConsole) cursorTo(row string, within time.Duration) {
	c.t.Helper()
	rx := regexp.MustCompile(`(?m)^› .*` + row)
	c.send("g")
	deadline := time.Now().Add(within)
	for !rx.MatchString(c.screen()) {
		if time.Now().After(deadline) {
			c.t.Fatalf("the cursor never reached a row matching %q:\n%s", row, c.screen())
		}
		c.send("j")
	}
}

// command types a : command.
func (c *tmuxConsole) command(name string) {
	c.t.Helper()
	c.send(":")
	c.typeText(name)
	c.send("Enter")
}

// TestConsoleStory walks the operator's night through `sluice demo`: the
// backlog the outage left, its error groups, a bad-data job fixed in the
// editor and redriven with two others, the outage group's bulk retry at a
// rate typed in the dialog (its progress seen moving, the archived count
// falling and staying down, as the outage is over), the quarantined
// poison pill looked at and released, and the operation on the
// Operations screen.
func TestConsoleStory(t *testing.T) {
	bin := e2eBinary(t)
	// The outage lasts 90 s from the seed rather than the demo's
	// minutes: long enough that the seed's own four outage invoices spend
	// their five attempts (10 s of backoff, behind the backlog's 4,176
	// deaths) inside it on a loaded machine, so the outage group reads
	// 4,180; the steps before the bulk retry take about 30 s of it. At
	// 60 s a CI run with every lane busy saw the four succeed after it
	// (the group at 4,176).
	const outage = 90 * time.Second
	seeded := time.Now()
	// The editor fixes the typo: what Maya does by hand in $EDITOR.
	// Email's dead jobs are kept three hours: inside the day's warning,
	// so the morning's tabs count them as expiring.
	c := startDemoWith(t, bin, `VISUAL= EDITOR="sed -i s/EURO/EUR/"`, "--outage", outage.String(),
		"--retention", "email/archived=3h")

	// 1. The console opens on archived; the count rises live to the
	// outage's backlog (4,176 + the seed's own 4).
	first := -1
	screen := c.waitUntil("archived at 4,180 or more", 90*time.Second, func(s string) bool {
		n := tab(t, s, archivedTab)
		if first < 0 && n >= 0 {
			first = n
		}
		return strings.Contains(s, "▸archived") && n >= 4180
	})
	before := tab(t, screen, archivedTab)
	if first >= before {
		t.Fatalf("the archived count did not rise live: first %d, then %d", first, before)
	}

	// 2. Why did they die? The error groups: the outage and the bad data.
	c.command("errors")
	c.waitFor(`(?m)^. billing\s+invoice\.generate\s+(?:open\s+)?4,180 .*dial tcp <addr>: connection refused`, 90*time.Second)
	c.waitFor(`(?m)^. billing\s+invoice\.generate\s+(?:open\s+)?31 .*invalid currency "<str>"`, 60*time.Second)
	c.waitFor(`(?m)^. email\s+receipt\.send\s+(?:open\s+)?2 .*template not found`, 30*time.Second)

	// 3. Look at one: enter on the bad-data group lists its 31 jobs,
	// enter on one opens its sheet with the attempt timeline (a claim
	// before each run), p its payload.
	c.cursorTo(`invalid currency`, 30*time.Second)
	c.send("Enter")
	c.waitFor(`▸archived 31 `, 15*time.Second)
	c.waitFor(`(?m)^1 of 31 `, 15*time.Second)
	c.send("Enter")
	job := c.waitFor(`│ job (demo-seed-\d+)`, 15*time.Second)[1]
	c.waitFor(`claimed +#1 `, 15*time.Second)
	c.waitFor(`failed +#1 `, 15*time.Second)
	c.send("p")
	c.waitFor(`"currency": "EURO"`, 15*time.Second)

	// 4. Fix the data, redrive the few: e edits the payload, the sheet
	// shows it and the edit on the timeline; that job and two more are
	// marked and retried.
	c.send("e")
	c.waitFor(`"currency": "EUR",`, 30*time.Second)
	c.waitFor(`currency: "EURO" → "EUR"`, 15*time.Second)
	c.send("Space")
	c.waitFor(`1 marked`, 10*time.Second)
	c.send("Space")
	c.waitFor(`2 marked`, 10*time.Second)
	c.send("Space")
	c.waitFor(`3 marked`, 10*time.Second)
	c.send("r")
	c.waitFor(`Retry 3 marked jobs\?`, 10*time.Second)
	if !strings.Contains(c.screen(), job) {
		t.Fatalf("the confirmation does not name the edited job %s:\n%s", job, c.screen())
	}
	c.send("y")
	c.waitFor(`3 retried`, 15*time.Second)

	// 5. The outage is over: back on the error groups (esc twice: the
	// sheet, then the group's list), b on the outage group previews the
	// retry with ten sample rows, a rate typed in the dialog, y starts
	// it; its progress bar moves at that rate with an ETA.
	c.escape(`│ job demo-seed-`)
	c.send("Escape")
	c.waitFor(`Error groups of .* — the jobs tab and filter scope them`, 15*time.Second)
	c.cursorTo(`connection refused`, 15*time.Second)
	// The database is back: V resolves the outage's group with a note
	// (typed on the command line), before its jobs are redriven.
	c.send("V")
	c.waitFor(`(?m)^:resolve\s*$`, 10*time.Second)
	c.typeText("db failover done")
	c.send("Enter")
	c.waitFor(`(?m)^. billing\s+invoice\.generate\s+resolved\s+4,180 .*dial tcp`, 15*time.Second)
	c.cursorTo(`connection refused`, 15*time.Second)
	for time.Now().Before(seeded.Add(outage + 2*time.Second)) {
		time.Sleep(200 * time.Millisecond) // a wait for the outage's end, not a measurement
	}
	c.send("b")
	preview := c.waitFor(`retry 4,180 jobs \(state archived, queue billing, kind invoice\.generate, error group "dial tcp`, 30*time.Second)[0]
	screen = c.waitFor(`sample:`, 10*time.Second)[0]
	if n := len(regexp.MustCompile(`│\s+demo-(?:seed|outage)-\d+\s+billing invoice\.generate dial tcp`).FindAllString(c.screen(), -1)); n != 10 {
		t.Fatalf("%s with %d sample rows, want 10:\n%s", preview, n, screen)
	}
	c.typeText("200")
	c.waitFor(`rate \[\s*200▏\] jobs/s · takes about 21s`, 10*time.Second) // 20.9 s, rounded up
	c.send("y")
	progress := regexp.MustCompile(`([\d,]+) / 4,180 processed`)
	bar := regexp.MustCompile(`│ (█*)░* +\d+%`)
	frames, bars := map[int]bool{}, map[int]bool{}
	sawRate := false
	watch := func(s string) {
		if m := progress.FindStringSubmatch(s); m != nil {
			if n := number(t, m[1]); n > 0 && n < 4180 {
				frames[n] = true
			}
		}
		if m := bar.FindStringSubmatch(s); m != nil {
			bars[len([]rune(m[1]))] = true
		}
		if regexp.MustCompile(`\d+/s · ETA \d+s · limit 200/s`).MatchString(s) {
			sawRate = true
		}
	}
	c.waitUntil("three progress frames", 60*time.Second, func(s string) bool {
		watch(s)
		return len(frames) >= 3 && len(bars) >= 3 && sawRate
	})
	// esc back to the list while it runs: the archived count falls as
	// the operation works.
	c.escape(`Bulk retry — `)
	c.command("jobs")
	c.waitUntil("the archived count falling while the retry runs", 30*time.Second, func(s string) bool {
		n := tab(t, s, archivedTab)
		return n >= 0 && n < before && regexp.MustCompile(`bulk retry \d+%`).MatchString(s)
	})
	// b brings the running operation's dialog back; it stays on the
	// result until closed.
	c.send("b")
	screen = c.waitUntil("the bulk retry's end", 120*time.Second, func(s string) bool {
		watch(s)
		return strings.Contains(s, "Bulk retry — completed")
	})
	seen := make([]int, 0, len(frames))
	for n := range frames {
		seen = append(seen, n)
	}
	slices.Sort(seen)
	t.Logf("progress frames seen (processed of 4,180): %v; %d distinct bar lengths", seen, len(bars))
	if !strings.Contains(screen, "4,180 / 4,180 processed · 4,180 ok · 0 failed") || !strings.Contains(screen, "esc close") {
		t.Fatalf("the dialog does not stay on the result:\n%s", screen)
	}
	c.send("Escape")
	c.waitUntil("the dialog closed", 10*time.Second, func(s string) bool { return !strings.Contains(s, "Bulk retry — ") })

	// The archived count has fallen, and stays down once every retried
	// job has run: the outage is over, so they succeed.
	down := func(s string) bool { n := tab(t, s, archivedTab); return n >= 0 && n <= before-4000 }
	c.waitUntil(fmt.Sprintf("archived at %d or less", before-4000), 30*time.Second, down)
	idle := regexp.MustCompile(`available 0  running 0  retryable 0 `)
	c.waitUntil("every retried job run", 120*time.Second, func(s string) bool {
		if n := tab(t, s, archivedTab); n > before-4000 {
			t.Fatalf("the archived count came back up to %d (from %d before the retry):\n%s", n, before, s)
		}
		return idle.MatchString(s)
	})
	t.Logf("archived: %d before the retry, %d after every retried job ran", before, tab(t, c.screen(), archivedTab))
	for range 10 {
		if s := c.screen(); !down(s) {
			t.Fatalf("the archived count came back up (from %d before the retry):\n%s", before, s)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// 6. Something else crashed: a quarantined tab, one fingerprint of
	// report.render with 3 crashes; its job and its payload.
	c.waitFor(`quarantined 1 `, 30*time.Second)
	c.command("quarantine")
	c.waitFor(`(?m)^› [0-9a-f]+… report\.render\s+quarantined\s+3 `, 15*time.Second)
	c.send("Enter")
	c.waitFor(`▸quarantined 1 `, 15*time.Second)
	c.waitFor(`(?m)^› demo-seed-\d+\s+reports\s+report\.render`, 15*time.Second)
	c.send("Enter")
	c.waitFor(`│ job demo-seed-\d+`, 15*time.Second)
	c.send("p")
	c.waitFor(`"poison": true`, 15*time.Second)
	c.escape(`"poison": true`)
	c.send("Escape")
	c.waitFor(`Quarantine — `, 15*time.Second)

	// 7. Morning: u releases the fingerprint, the confirmation says how
	// many held jobs; the Operations screen shows the bulk retry done.
	c.send("u")
	c.waitFor(`Release 1 fingerprint, \d+ held jobs?\?`, 15*time.Second)
	c.send("y")
	c.waitFor(`released 1 fingerprint`, 15*time.Second)
	c.command("operations")
	c.waitFor(`(?m)^› \S+\s+retry\s+completed .*100%\s+4,180\s+4,180\s+4,180\s+0 operator`, 15*time.Second)

	// 8. The morning after: :audit says who did what in the night — the
	// group resolved, the bulk retry, the release — each by its actor
	// from the console; the archived tab counts the email jobs that
	// retention deletes within the day.
	c.command("audit")
	c.waitFor(`(?m)^. +\S+ operator +\S+ +console +resolve\S* +ok `, 15*time.Second)
	c.waitFor(`(?m)^. +\S+ operator +\S+ +console +bulk +ok +retry 4,180 jobs`, 15*time.Second)
	c.waitFor(`(?m)^. +\S+ operator +\S+ +console +release\S* +ok `, 15*time.Second)
	c.command("jobs")
	// The whole list, not the night's last filter: the note counts every
	// job, so a filter's tabs leave it out.
	c.send("/")
	c.send("C-u")
	c.send("Enter")
	c.waitFor(`archived [\d,]+ \([1-9][\d,]* exp(?:iring)?\)`, 45*time.Second)
	c.quit()

	// The store agrees: the edited job ran with its fixed payload, the
	// outage's jobs completed.
	ctx := context.Background()
	store, err := sqlite.Open(ctx, c.db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.GetJob(ctx, job, true)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.State != engine.StateCompleted || !strings.Contains(string(d.Job.Payload), `"currency":"EUR"`) {
		t.Errorf("the edited job %s is %s with payload %s; want completed with EUR", job, d.Job.State, d.Job.Payload)
	}
	f, err := engine.ParseQuery(`state:archived queue:billing errgroup:"dial tcp <addr>: connection refused"`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := e.CountJobs(ctx, engine.CountJobsParams{Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	if n := left.States[engine.StateArchived]; n != 0 {
		t.Errorf("%d jobs of the outage group are still archived", n)
	}
}

// serveAt runs `sluice serve` over db at addr and waits until it says it
// serves; stop ends it.
func serveAt(t *testing.T, bin, db, addr string) (stop func()) {
	t.Helper()
	dir := t.TempDir()
	serve := exec.Command(bin, "serve", "--store", "sqlite://"+db, "--listen", addr, "--log-file", filepath.Join(dir, "serve.log"))
	serve.Env = append(os.Environ(), "SLUICE_TOKENS=", "XDG_CONFIG_HOME="+dir)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
	}
	t.Cleanup(stop)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.Contains(sc.Text(), "serving http://"+addr) {
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return stop
}

// TestConsoleAttachedConnectionTruth: with its
// server stopped the attached console stops saying live; started again on
// the same address, the warning clears by itself and the header says live.
func TestConsoleAttachedConnectionTruth(t *testing.T) {
	bin := e2eBinary(t)
	db := deadStore(t, 6, 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	stop := serveAt(t, bin, db, addr)

	c := startConsole(t, "conn", db, fmt.Sprintf("%s tui --api http://%s", bin, addr))
	c.waitFor(`● live`, 30*time.Second)
	c.waitFor(`(?m)^› B-0`, 30*time.Second)

	stop()
	c.waitUntil("the header no longer live", 60*time.Second, func(s string) bool {
		return !strings.Contains(s, "● live") && strings.Contains(s, "○ unreachable")
	})

	serveAt(t, bin, db, addr)
	c.waitUntil("live again with no warning", 90*time.Second, func(s string) bool {
		return strings.Contains(s, "● live") && !strings.Contains(s, "○ unreachable") &&
			!strings.Contains(s, "⚠") && !strings.Contains(s, "connection refused") &&
			regexp.MustCompile(`(?m)^› B-0`).MatchString(s)
	})
	c.quit()
}
