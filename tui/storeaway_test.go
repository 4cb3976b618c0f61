package tui

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// syncBuffer is a bytes.Buffer a logger and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestEmbeddedStoreAwaySaysUnreachable: embedded (the engine in
// process, a real SQLite file), the store's counters go away under a
// quiet screen. The engine's live updates say so (ChangeLost, from their
// poll of the store): the header turns to unreachable on that word, as
// attached over HTTP when the stream drops, and the live updates are what
// the console logs as failing, not only its probe's counts, which found
// the outage up to 5 s later when the poll's failure was dropped. When
// the store is back the engine's resync makes it live again by itself.
func TestEmbeddedStoreAwaySaysUnreachable(t *testing.T) {
	storeAway(t, false)
}

// TestAttachedStoreAwaySaysUnreachable: the same, attached over HTTP to a
// server whose store goes away while the server stays up. Its event
// stream says so ("lost"), so the header turns at once: before, the
// server left the engine's word out, and the console said live until its
// 5 s probe found the counts failing.
func TestAttachedStoreAwaySaysUnreachable(t *testing.T) {
	storeAway(t, true)
}

func storeAway(t *testing.T, attached bool) {
	ctx := context.Background()
	path := sqlitetest.Path(t)
	store, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, err := engine.New(store, engine.Config{MaxAttempts: 3, WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, eng: eng}
	f.seed(t, ctx)
	var ctl engine.Control = eng
	if attached {
		hs := httptest.NewServer(api.NewServer(eng, api.ServerOptions{}))
		t.Cleanup(hs.Close)
		ctl = api.NewClient(hs.URL, "", api.ClientOptions{})
	}
	var logs syncBuffer
	opts := testOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	sctx, cancel := context.WithCancel(ctx)
	opts.Context = sctx
	s := start(t, ctl, opts)
	// Before the server closes, which waits for the session's stream.
	t.Cleanup(cancel)
	s.waitFor("evil-0001", "archived 7", "● live")
	header := func() string { return strings.SplitN(ansi.Strip(s.h.last()), "\n", 2)[0] }

	// The counters go away, from a connection of the test's own.
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`ALTER TABLE job_counts RENAME TO job_counts_away`); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the header says unreachable", func() bool { return strings.Contains(header(), "○ unreachable") })
	waitCond(t, "the live updates logged as failing", func() bool {
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "console load failed") && strings.Contains(l, "live updates") && strings.Contains(l, "no such table") {
				return true
			}
		}
		return false
	})

	if _, err := db.Exec(`ALTER TABLE job_counts_away RENAME TO job_counts`); err != nil {
		t.Fatal(err)
	}
	s.waitGone("⚠")
	waitCond(t, "the header says live again", func() bool {
		h := header()
		return strings.Contains(h, "● live") && !strings.Contains(h, "unreachable")
	})
	s.waitFor("evil-0001", "archived 7")
}

// storeAwayControl is a Control whose API answers while its store is away:
// Meta works, and every read of the store fails.
type storeAwayControl struct {
	engine.Control
	down       atomic.Bool
	countCalls atomic.Int64
}

func (c *storeAwayControl) Counts(ctx context.Context, q string) (*engine.Counts, error) {
	c.countCalls.Add(1)
	if c.down.Load() {
		return nil, errDown
	}
	return c.Control.Counts(ctx, q)
}

func (c *storeAwayControl) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	if c.down.Load() {
		return nil, errDown
	}
	return c.Control.ListJobs(ctx, p)
}

// TestStoreAwayWhileQuiet: the store goes away while nothing changes on
// screen and the meta still answers (embedded, the meta never reaches the
// store; over HTTP the server stays up). The header's probe finds it: the
// header says unreachable, not live, and the status line says why; when
// the store is back the next probe clears both by itself, without a key.
func TestStoreAwayWhileQuiet(t *testing.T) {
	f := setup(t, false)
	ctl := &storeAwayControl{Control: f.eng}
	s := start(t, ctl, testOptions())
	s.waitFor("evil-0001", "archived 7", "● live")
	ctl.down.Store(true)
	header := func() string { return strings.SplitN(ansi.Strip(s.h.last()), "\n", 2)[0] }
	n := ctl.countCalls.Load()
	s.tm.Send(ageTickMsg{})
	waitCond(t, "the probe read the counters", func() bool { return ctl.countCalls.Load() > n })
	waitCond(t, "the header says unreachable", func() bool { return strings.Contains(header(), "unreachable") })
	if h := header(); strings.Contains(h, "● live") {
		t.Fatalf("the header says live with the store away: %s", h)
	}
	s.waitFor("counts failed", "connection refused — retrying in")
	// A meta answer says nothing of the store: the warning stays.
	s.tm.Send(ageTickMsg{})
	time.Sleep(200 * time.Millisecond)
	if h := header(); !strings.Contains(h, "unreachable") {
		t.Fatalf("a tick with the store still away cleared the warning: %s", h)
	}
	ctl.down.Store(false)
	s.tm.Send(ageTickMsg{})
	s.waitGone("⚠")
	s.waitFor("● live", "archived 7")
}
