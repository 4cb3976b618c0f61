package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
)

// waitFor receives from ch until want arrives, under a generous deadline.
func waitFor(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("no wake-up %q", want)
		}
	}
}

func insertJobs(t *testing.T, s backend.Store, queue string, n int, delay time.Duration) {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	prefix := queue + "-" + hex.EncodeToString(b[:])
	jobs := make([]*backend.JobInsertParams, n)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{ID: prefix + "-" + strconv.Itoa(i),
			Queue: queue, Kind: "k", Payload: []byte(`{}`), SchemaVersion: 1, MaxAttempts: 3, Fingerprint: "fp", Delay: delay}
	}
	res, err := s.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// TestWakeupsAcrossStores: an insert through one store wakes the
// listeners of another store on the same schema (another process), with
// the queue's name.
func TestWakeupsAcrossStores(t *testing.T) {
	t.Parallel()
	s1 := pgtest.New(t)
	s2 := pgtest.Reopen(t, s1).(*postgres.Store)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := s2.Wakeups(ctx)
	// The listener connects in the background: insert until it hears.
	deadline := time.Now().Add(30 * time.Second)
	for heard := false; !heard; {
		insertJobs(t, s1, "mail", 1, 0)
		select {
		case q := <-wake:
			heard = q == "mail"
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no wake-up from the other store")
		}
	}
	insertJobs(t, s1, "billing", 3, 0)
	waitFor(t, wake, "billing")
}

// TestOneNotificationPerBatch counts the notifications of a batch insert
// on a LISTEN connection of the test's own: one for a batch of 60 jobs in
// two queues, none for jobs scheduled later.
func TestOneNotificationPerBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	conn, err := pgx.Connect(ctx, pgtest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	channel := "sluice_" + s.Schema()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	insertJobs(t, s, "a", 30, 0)
	insertJobs(t, s, "later", 30, time.Hour)
	jobs := make([]*backend.JobInsertParams, 0, 60)
	for i := range 60 {
		q := []string{"x", "y"}[i%2]
		jobs = append(jobs, &backend.JobInsertParams{ID: "b" + strconv.Itoa(i),
			Queue: q, Kind: "k", Payload: []byte(`{}`), SchemaVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `SELECT pg_notify($1, 'end')`, channel); err != nil {
		t.Fatal(err)
	}
	var got []string
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Payload == "end" {
			break
		}
		got = append(got, n.Payload)
	}
	if want := []string{"a", "x\ny"}; !slices.Equal(got, want) {
		t.Fatalf("notifications %q, want %q", got, want)
	}
}

// TestFaultListenerReconnects terminates the listener's connection (only
// this test's own): the listener reconnects by itself, wakes every queue
// once it is back (notifications sent meanwhile are lost), and hears
// the next insert.
func TestFaultListenerReconnects(t *testing.T) {
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("fault test: set SLUICE_FAULT_TESTS=1")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := pgtest.New(t)
	wake := s.Wakeups(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for heard := false; !heard; {
		insertJobs(t, s, "q", 1, 0)
		select {
		case q := <-wake:
			heard = q == "q"
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("listener never heard")
		}
	}
	tag, err := s.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query = $1 AND pid <> pg_backend_pid()`, "LISTEN "+pgx.Identifier{"sluice_" + s.Schema()}.Sanitize())
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate the listener: %v %v", tag, err)
	}
	waitFor(t, wake, "") // back, and every queue woken
	insertJobs(t, s, "after", 1, 0)
	waitFor(t, wake, "after")
}

// TestNotifyFalse: a store opened with notify=false sends nothing.
func TestNotifyFalse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t, "notify=false")
	conn, err := pgx.Connect(ctx, pgtest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	channel := "sluice_" + s.Schema()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	insertJobs(t, s, "a", 3, 0)
	if _, err := s.Pool().Exec(ctx, `SELECT pg_notify($1, 'end')`, channel); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	if err != nil || n.Payload != "end" {
		t.Fatalf("first notification %+v %v, want only the test's own", n, err)
	}
}
