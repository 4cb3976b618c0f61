package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/examples/demo"
)

func TestParseStoreURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url, backend, path string
		err                error
	}{
		{"sqlite://sluice.db", "sqlite", "sluice.db", nil},
		{"sqlite://dir/x.db", "sqlite", "dir/x.db", nil},
		{"sqlite:///abs/path.db", "sqlite", "/abs/path.db", nil},
		{"sqlite:x.db", "sqlite", "x.db", nil},
		{"plain.db", "sqlite", "plain.db", nil},
		{"/abs/plain.db", "sqlite", "/abs/plain.db", nil},
		{"postgres://root@127.0.0.1:5432/db?sslmode=disable", "postgres", "", nil},
		{"postgresql://h/db", "postgres", "", nil},
		{"redis://127.0.0.1:6379/0", "redis", "", nil},
		{"mysql://h/db", "", "", engine.ErrInvalid},
		{"", "", "", engine.ErrInvalid},
		{"sqlite://", "", "", engine.ErrInvalid},
	}
	for _, c := range cases {
		got, err := parseStoreURL(c.url)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("parseStoreURL(%q) err = %v, want %v", c.url, err, c.err)
			}
			continue
		}
		if err != nil || got.backend != c.backend || got.path != c.path {
			t.Errorf("parseStoreURL(%q) = %+v, %v; want %s %q", c.url, got, err, c.backend, c.path)
		}
	}
}

func TestOpenStoreNotBuilt(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"postgres://u:hunter2@127.0.0.1/db", "redis://127.0.0.1:6379/0"} {
		s, err := openStore(context.Background(), u)
		if s != nil || !errors.Is(err, engine.ErrUnsupported) || !strings.Contains(err.Error(), "not built yet") {
			t.Errorf("openStore(%q) = %v, %v; want an ErrUnsupported saying not built yet", u, s, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestOpenStoreSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, u := range []string{"sqlite://" + filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")} {
		s, err := openStore(context.Background(), u)
		if err != nil {
			t.Fatalf("openStore(%q): %v", u, err)
		}
		if s.Backend() != "sqlite" {
			t.Errorf("backend = %q", s.Backend())
		}
		s.Close()
	}
}

func TestRemoveSQLiteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := removeSQLiteFile(other); err == nil {
		t.Error("removeSQLiteFile deleted a file that is not a SQLite database")
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the other file is gone: %v", err)
	}
	if err := removeSQLiteFile(dir); err == nil {
		t.Error("removeSQLiteFile accepted a directory")
	}
	if err := removeSQLiteFile(filepath.Join(dir, "missing.db")); err != nil {
		t.Errorf("a missing file: %v", err)
	}

	db := filepath.Join(dir, "x.db")
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(db+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := removeSQLiteFile(db); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
}

func TestBenchThroughput(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "throughput", "--store", "sqlite://" + db,
		"--jobs", "300", "--concurrency", "10", "--batch", "100", "--log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	line := strings.TrimSpace(out.String())
	if strings.Count(line, "\n") != 0 {
		t.Errorf("want one result line, got:\n%s", line)
	}
	for _, want := range []string{"system=sluice ", "scenario=throughput ", "store=sqlite ", "jobs=300 ", "concurrency=10 ",
		"handled=300 ", "verified=300 ", "status=ok"} {
		if !strings.Contains(line, want) {
			t.Errorf("result line lacks %q: %s", want, line)
		}
	}
	for _, key := range []string{"insert_seconds", "insert_per_sec", "seconds", "work_seconds", "jobs_per_sec"} {
		if !regexp.MustCompile(`(^| )` + key + `=[0-9]+\.[0-9]{4}( |$)`).MatchString(line) {
			t.Errorf("result line lacks a number for %s: %s", key, line)
		}
	}

	// A second run resets the file: the same counts again.
	out.Reset()
	if code := run(context.Background(), []string{"bench", "throughput", "--store", db, "--jobs", "50", "--log-level", "warn"}, &out, &errOut); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "verified=50 ") {
		t.Errorf("second run: %s", out.String())
	}
}

func TestBenchThroughputError(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "throughput", "--store", "redis://127.0.0.1:6379/0", "--jobs", "10"}, &out, &errOut)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	line := strings.TrimSpace(out.String())
	if !strings.HasPrefix(line, "system=sluice ") || !strings.Contains(line, " status=error error=") {
		t.Errorf("want an error result line, got %q", line)
	}
	if strings.Contains(line[strings.Index(line, "error="):], " ") {
		t.Errorf("the error value has spaces: %q", line)
	}
}

func TestWorkerCommand(t *testing.T) {
	t.Parallel()
	db := sqlitetest.Path(t)
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 20 {
		j, err := e.Enqueue(context.Background(), engine.EnqueueParams{Queue: demo.QueueChaos, Kind: demo.KindChaosSleep,
			Args: demo.Sleep{MS: i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logFile := filepath.Join(t.TempDir(), "worker.log")
	exit := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		exit <- run(ctx, []string{"worker", "--store", "sqlite://" + db, "--queues", "chaos", "--worker-id", "test-worker",
			"--poll", "20ms", "--maintenance-interval", "50ms", "--log-file", logFile}, &out, &out)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for done := 0; done < len(ids); {
		done = 0
		for _, id := range ids {
			j, err := store.JobGetByID(context.Background(), &engine.JobGetByIDParams{ID: id})
			if err != nil {
				t.Fatal(err)
			}
			if j.State == engine.StateCompleted {
				done++
				if j.AttemptedBy != "test-worker" {
					t.Errorf("job %s attempted by %q", id, j.AttemptedBy)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed after 60s", done, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("worker exit %d: %s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
	log, _ := os.ReadFile(logFile)
	if !strings.Contains(string(log), "worker stopped") {
		t.Errorf("log file lacks the stop line:\n%s", log)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDemoCommand(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "demo.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"demo", "--db", db, "--refresh", "50ms", "--trickle", "20ms"}, &out, &out)
	}()
	completed := regexp.MustCompile(`completed [1-9]`)
	deadline := time.Now().Add(60 * time.Second)
	for !completed.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no job completed after 60s:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("demo exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop")
	}
	s := out.String()
	if !strings.Contains(s, "stopped. enqueued ") {
		t.Errorf("no final summary:\n%s", s)
	}
	if strings.Contains(s, "level=") {
		t.Errorf("logs reached the screen:\n%s", s)
	}

	// A second run finds the seed and does not add it again.
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if ok, err := demo.Seeded(context.Background(), store); err != nil || !ok {
		t.Errorf("Seeded after the demo = %v, %v", ok, err)
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 100, "plain"},
		{"a\nb\tc", 100, `a\nb\tc`},
		{"\x1b[31mred\x1b[0m", 100, `\x1b[31mred\x1b[0m`},
		{"bidi\u202eevil", 100, `bidi\u202eevil`},
		{"c1\u009bx", 100, `c1\x9bx`},
		{strings.Repeat("x", 12), 10, "xxxxxxxxxx…"},
	}
	for _, c := range cases {
		if got := sanitize(c.in, c.max); got != c.want {
			t.Errorf("sanitize(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
