package cli

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// partnerOutage writes a store whose partner.sync jobs died in two
// batches on either side of a whole second (the cutoff), beside a few
// dead SMS jobs of another error. It returns the file, the partner jobs
// dead before the cutoff and those dead after it.
func partnerOutage(t *testing.T) (db string, before, after []string, cutoff time.Time) {
	t.Helper()
	ctx := context.Background()
	db = sqlitetest.Path(t)
	s, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{
		Queues:       map[string]engine.QueueConfig{"partner": {Concurrency: 4}, "sms": {Concurrency: 2}},
		PollInterval: 10 * time.Millisecond, NoMaintenance: true, MaxAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	for kind, msg := range map[string]string{"partner.sync": "partner api: 503 Service Unavailable", "sms.send": "sms gateway: number blocked"} {
		if err := e.Register(engine.Kind{Name: kind, Handler: func(context.Context, *engine.Job) error { return errors.New(msg) }}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop(context.Background()) }()
	die := func(ps []engine.EnqueueParams) time.Time {
		t.Helper()
		if _, err := e.EnqueueMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
		var last time.Time
		deadline := time.Now().Add(30 * time.Second)
		for _, p := range ps {
			for {
				d, err := e.GetJob(ctx, p.ID, false)
				if err != nil {
					t.Fatal(err)
				}
				if d.Job.State == engine.StateArchived {
					if d.Job.FinalizedAt.After(last) {
						last = *d.Job.FinalizedAt
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s never died", p.ID)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		return last
	}
	batch := func(prefix, queue, kind string, n int) ([]engine.EnqueueParams, []string) {
		var ps []engine.EnqueueParams
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s-%02d", prefix, i)
			ps = append(ps, engine.EnqueueParams{ID: id, Queue: queue, Kind: kind})
			ids = append(ids, id)
		}
		return ps, ids
	}
	ps, before := batch("early", "partner", "partner.sync", 6)
	sms, _ := batch("sms", "sms", "sms.send", 2)
	last := die(append(ps, sms...))
	cutoff = last.Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(cutoff) + 200*time.Millisecond)
	ps, after = batch("late", "partner", "partner.sync", 5)
	die(ps)
	return db, before, after, cutoff
}

// TestConsoleRedriveWithCutoffInFewKeys: the partner-outage redrive from
// attach (find the group, cut off at a clock time, preview, rate, run)
// took 54 keys, 38 of them the cutoff typed as RFC 3339. The real binary,
// attached over HTTP in tmux, does it in at most 20 keys, and the store
// shows that exactly the jobs dead before the cutoff were retried.
func TestConsoleRedriveWithCutoffInFewKeys(t *testing.T) {
	bin := e2eBinary(t)
	db, before, after, cutoff := partnerOutage(t)
	base, _ := startServe(t, bin, db, nil)
	c := startConsole(t, "cutoff", db, fmt.Sprintf("env TZ=UTC %s tui --api %s", bin, base))
	c.waitFor(`● live`, 30*time.Second)
	c.waitFor(`archived 13`, 30*time.Second)
	keys := 0
	press := func(k ...string) { c.send(k...); keys += len(k) }
	typ := func(s string) { c.typeText(s); keys += utf8.RuneCountInString(s) }

	press(":")
	typ("err")
	press("Enter")
	c.waitFor(`(?m)^› partner\s+partner\.sync\s+(?:open\s+)?11 `, 15*time.Second)
	press("b")
	c.waitFor(`retry 11 jobs`, 15*time.Second)
	press("Tab")
	typ(cutoff.UTC().Format("15:04:05"))
	press("Enter")
	c.waitFor(`retry 6 jobs`, 15*time.Second)
	typ("5")
	c.waitFor(`5▏\] jobs/s`, 5*time.Second)
	press("y")
	c.waitFor(`Bulk retry — completed`, 30*time.Second)
	screen := c.screen()
	if keys > 20 {
		t.Fatalf("the redrive took %d keys, want at most 20", keys)
	}
	t.Logf("the redrive took %d keys (cutoff %s UTC)", keys, cutoff.UTC().Format("15:04:05"))
	if !strings.Contains(screen, "6 / 6 processed") {
		t.Fatalf("the run did not process the 6 jobs dead before the cutoff:\n%s", screen)
	}
	c.escape(`Bulk retry — `)
	c.quit()

	got := retriedJobs(t, db)
	slices.Sort(got)
	if !slices.Equal(got, before) {
		t.Fatalf("retried %v, want exactly the jobs dead before the cutoff %v (not %v)", got, before, after)
	}
	ctx := context.Background()
	e := engineOnFile(t, db)
	page, err := e.Operations(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Operations) != 1 || page.Operations[0].Rate != 5 || page.Operations[0].Succeeded != 6 {
		t.Fatalf("operations %+v, want one at 5/s that retried 6", page.Operations)
	}
}

// TestConsoleSheetHearsAnotherProcess: the sheet open in a console
// attached over HTTP stayed as it was when another process changed its
// job (the server heard of it only through its counters, a change that
// names no job); it now shows the change without a key.
func TestConsoleSheetHearsAnotherProcess(t *testing.T) {
	bin := e2eBinary(t)
	db := deadStore(t, 3, 0)
	base, _ := startServe(t, bin, db, nil)
	c := startConsole(t, "sheet", db, fmt.Sprintf("%s tui --api %s --query 'id:B-01 state:archived,available'", bin, base))
	c.waitFor(`● live`, 30*time.Second)
	c.waitFor(`(?m)^› B-01`, 30*time.Second)
	c.send("Enter")
	c.waitFor(`│ state\s+archived`, 15*time.Second)
	// Another process, on the store itself, not through this server.
	out, err := exec.Command(bin, "jobs", "retry", "B-01", "--store", "sqlite://"+db).CombinedOutput()
	if err != nil {
		t.Fatalf("jobs retry: %v\n%s", err, out)
	}
	c.waitFor(`│ state\s+available`, 10*time.Second)
	c.waitFor(`retried`, 5*time.Second)
	c.quit()
}

// TestConsoleLinkInOneKey: a job's link (here the corrected copy a
// retry with new input made) is one key away from anywhere on its
// sheet: l puts the › on it in view, enter follows it, esc comes back;
// ] pressed past the last section says so. It took five ] before, three
// of them changing nothing, and a sixth went on silently. On the
// followed link, d deletes the linked job, not the list's row under the
// sheet (it deleted B-01).
func TestConsoleLinkInOneKey(t *testing.T) {
	bin := e2eBinary(t)
	db := deadStore(t, 2, 0)
	out, err := exec.Command(bin, "jobs", "retry-with-input", "B-01", "--payload", `{"customer":1,"fixed":true}`,
		"--id", "B-01-fixed", "--store", "sqlite://"+db).CombinedOutput()
	if err != nil {
		t.Fatalf("retry-with-input: %v\n%s", err, out)
	}
	c := startConsole(t, "links", db, fmt.Sprintf("%s tui --store sqlite://%s --query 'id:B-01'", bin, db))
	c.waitFor(`(?m)^› B-01`, 30*time.Second)
	c.send("Enter")
	c.waitFor(`│ job B-01`, 15*time.Second)
	c.send("l")
	c.waitFor(`› supersed.*B-01-fixed`, 10*time.Second)
	c.waitFor(`enter follows B-01-fixed`, 5*time.Second)
	c.send("Enter")
	c.waitFor(`│ job B-01-fixed`, 10*time.Second)
	c.waitFor(`retry of\s+B-01`, 5*time.Second)
	c.send("Escape")
	c.waitFor(`│ job B-01\s`, 10*time.Second)
	c.send("]", "]", "]", "]", "]", "]", "]", "]", "]")
	c.waitFor(`the last section of the sheet; l goes to its links`, 10*time.Second)

	// A one-job key on a followed link acts on the job the sheet shows,
	// not on the list's row under it (d deleted B-01).
	c.send("l")
	c.waitFor(`enter follows B-01-fixed`, 10*time.Second)
	c.send("Enter")
	c.waitFor(`retry of\s+B-01`, 10*time.Second)
	c.send("d")
	c.waitFor(`Delete job B-01`, 10*time.Second)
	c.send("y")
	c.waitFor(`1 deleted`, 10*time.Second)
	c.quit()

	ctx := context.Background()
	e := engineOnFile(t, db)
	if _, err := e.GetJob(ctx, "B-01", false); err != nil {
		t.Fatalf("B-01, the list's row under the sheet, was acted on: %v", err)
	}
	if _, err := e.GetJob(ctx, "B-01-fixed", false); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("B-01-fixed, the job the sheet showed, was not deleted: %v", err)
	}
}

// TestConsoleNoKeyReachesAHiddenDialog: a terminal shrunk below the
// console's least size while the bulk preview is open hides it behind
// the too-small notice; y then started the retry nobody saw. Now the
// notice says what waits behind it, no key reaches it, and the store
// shows nothing retried; grown again, the preview is there.
func TestConsoleNoKeyReachesAHiddenDialog(t *testing.T) {
	bin := e2eBinary(t)
	db := deadStore(t, 3, 0)
	c := startConsole(t, "hidden", db, fmt.Sprintf("%s tui --store sqlite://%s", bin, db))
	c.waitFor(`(?m)^› B-0`, 30*time.Second)
	c.send("b")
	c.waitFor(`retry 3 jobs`, 15*time.Second)
	c.tmux("resize-window", "-t", "e2e", "-x", "50", "-y", "10")
	c.waitUntil("the too-small notice naming the dialog", 10*time.Second, func(s string) bool {
		return strings.Contains(strings.Join(strings.Fields(s), " "), "The bulk retry dialog is open; no key reaches it")
	})
	c.send("y", "5", "Enter")
	time.Sleep(2 * time.Second)
	c.tmux("resize-window", "-t", "e2e", "-x", "160", "-y", "45")
	c.waitFor(`retry 3 jobs`, 10*time.Second)
	c.waitFor(`y start`, 5*time.Second)
	c.escape(`y start`)
	c.quit()
	if got := retriedJobs(t, db); len(got) != 0 {
		t.Fatalf("keys reached the hidden preview: %v retried", got)
	}
}

// engineOnFile is an engine over the SQLite file db that runs no
// maintenance, its store closed when the test ends: what a test reads a
// console's store with after driving it.
func engineOnFile(t *testing.T, db string) *engine.Engine {
	t.Helper()
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
