package tui

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
