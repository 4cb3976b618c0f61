package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend/sqlite"
)

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
	code := run(context.Background(), []string{"throughput", "--store", "sqlite://" + db,
		"--jobs", "300", "--concurrency", "10", "--batch", "100", "--log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	line := strings.TrimSpace(out.String())
	checkKeys(t, "throughput", line)
	if strings.Count(line, "\n") != 0 {
		t.Errorf("want one result line, got:\n%s", line)
	}
	for _, want := range []string{"system=sluice ", "scenario=throughput ", "store=sqlite ", "jobs=300 ", "concurrency=10 ",
		"handled=300 ", "verified=300 ", "status=ok"} {
		if !strings.Contains(line, want) {
			t.Errorf("result line lacks %q: %s", want, line)
		}
	}
	for _, key := range []string{"insert_seconds", "insert_per_sec", "seconds", "work_seconds", "jobs_per_sec", "write_tx_per_job"} {
		if !regexp.MustCompile(`(^| )` + key + `=[0-9]+\.[0-9]{4}( |$)`).MatchString(line) {
			t.Errorf("result line lacks a number for %s: %s", key, line)
		}
	}

	// A second run resets the file: the same counts again.
	out.Reset()
	if code := run(context.Background(), []string{"throughput", "--store", db, "--jobs", "50", "--log-level", "warn"}, &out, &errOut); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "verified=50 ") {
		t.Errorf("second run: %s", out.String())
	}
}

func TestBenchThroughputError(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	// Nothing listens on port 1: the store cannot be opened.
	code := run(context.Background(), []string{"throughput", "--store", "redis://127.0.0.1:1/0", "--jobs", "10"}, &out, &errOut)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	line := strings.TrimSpace(out.String())
	if !strings.HasPrefix(line, "system=sluice ") || !strings.Contains(line, " status=error error=") {
		t.Errorf("want an error result line, got %q", line)
	}
	if i := strings.Index(line, "error="); i >= 0 && strings.Contains(line[i:], " ") {
		t.Errorf("the error value has spaces: %q", line)
	}
}
