package engine_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// storeAway takes the store's maintained counters (job_counts, the table
// Subscribe polls) away from a connection of the test's own to the same
// SQLite file, so every read of them fails as a store that is away does;
// the function it returns puts them back.
func storeAway(t *testing.T, path string) (back func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`ALTER TABLE job_counts RENAME TO job_counts_away`); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := db.Exec(`ALTER TABLE job_counts_away RENAME TO job_counts`); err != nil {
			t.Fatal(err)
		}
	}
}

// nextChange is the next change of ch, failing t if none comes before a
// generous deadline (the poll runs every second).
func nextChange(t *testing.T, ch <-chan engine.Change, what string) engine.Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: the subscription closed", what)
		}
		return c
	case <-time.After(15 * time.Second):
		t.Fatalf("no change came: want %s", what)
	}
	return engine.Change{}
}

// quiet fails t if ch carries a change for d (d spans polls).
func quiet(t *testing.T, ch <-chan engine.Change, d time.Duration, why string) {
	t.Helper()
	select {
	case c := <-ch:
		t.Fatalf("%s: got a %s change (err %v)", why, c.Kind, c.Err)
	case <-time.After(d):
	}
}

// TestSubscribeSaysWhenTheStoreIsAway: embedded (the engine in process),
// a store whose poll fails makes Subscribe send ChangeLost, with the
// error, once for the outage however many polls fail; the first poll that
// works again sends ChangeResync, and the next outage is told again. The
// failed poll was skipped without a word, so an embedded console said
// "● live" until its own probe, up to 5 s later, found the store away.
func TestSubscribeSaysWhenTheStoreIsAway(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := sqlitetest.Path(t)
	store, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e, err := engine.New(store, engine.Config{WorkerID: "subscribe-test"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	quiet(t, ch, 1500*time.Millisecond, "a store that answers")

	for outage := 1; outage <= 2; outage++ {
		back := storeAway(t, path)
		c := nextChange(t, ch, "lost")
		if c.Kind != engine.ChangeLost || c.Err == nil {
			t.Fatalf("outage %d: first change %s (err %v), want lost with the error", outage, c.Kind, c.Err)
		}
		t.Logf("outage %d: lost: %v", outage, c.Err)
		if outage == 1 {
			// Two more polls fail: nothing more is said.
			quiet(t, ch, 2500*time.Millisecond, "the store still away")
		}
		back()
		if c := nextChange(t, ch, "resync"); c.Kind != engine.ChangeResync {
			t.Fatalf("outage %d: after the store came back: %s change (err %v), want resync", outage, c.Kind, c.Err)
		}
	}
	quiet(t, ch, 1500*time.Millisecond, "the store back")
}

// TestSubscribeSaysWhenTheStoreCloses: a store closed under the engine
// (every read fails: sql: database is closed) is told once, not at every
// poll.
func TestSubscribeSaysWhenTheStoreCloses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := sqlite.Open(ctx, sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(store, engine.Config{WorkerID: "subscribe-test"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, ch, "lost"); c.Kind != engine.ChangeLost || c.Err == nil {
		t.Fatalf("first change %s (err %v), want lost with the error", c.Kind, c.Err)
	} else {
		t.Logf("lost: %v", c.Err)
	}
	quiet(t, ch, 2500*time.Millisecond, "the store still closed")
}
