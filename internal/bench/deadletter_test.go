package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestBenchDeadLetter(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "dead.db")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"deadletter", "--store", "sqlite://" + db,
		"--jobs", "300", "--concurrency", "10", "--batch", "100", "--list-calls", "3", "--log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	line := strings.TrimSpace(out.String())
	checkKeys(t, "deadletter", line)
	if strings.Count(line, "\n") != 0 {
		t.Errorf("want one result line, got:\n%s", line)
	}
	for _, want := range []string{"system=sluice ", "scenario=deadletter ", "store=sqlite ", "jobs=300 ",
		"dead_retained=300 ", "list_first_rows=50 ", "list_deep_rows=50 ", "list_deep_how=cursor_after_51_oldest ",
		"error_groups=5 ", "dry_run_matched=300 ", "dry_run_estimated=false ", "retry_all_reported=300 ",
		"retry_status=completed ", "retry_failed=0 ", "available_after_retry=300 ", "archived_after_retry=0 ",
		"available_counted=300 ", "retry_verify=ok ", "status=ok"} {
		if !strings.Contains(line, want) {
			t.Errorf("result line lacks %q: %s", want, line)
		}
	}
	for _, key := range []string{"insert_per_sec", "dead_seconds", "retry_all_seconds", "retry_all_per_sec"} {
		if !regexp.MustCompile(`(^| )` + key + `=[0-9]+\.[0-9]{4}( |$)`).MatchString(line) {
			t.Errorf("result line lacks a number for %s: %s", key, line)
		}
	}
	for _, key := range []string{"list_first_p50_ms", "list_deep_p50_ms", "counts_p50_ms", "error_groups_p50_ms", "dry_run_ms"} {
		if !regexp.MustCompile(`(^| )` + key + `=[0-9]+\.[0-9]{3}( |$)`).MatchString(line) {
			t.Errorf("result line lacks a number for %s: %s", key, line)
		}
	}
	if !regexp.MustCompile(`(^| )peak_rss_mb=[0-9]+\.[0-9]( |$)`).MatchString(line) {
		t.Errorf("result line lacks peak_rss_mb: %s", line)
	}
}

func TestBenchDeadLetterReuse(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "dead.db")
	args := []string{"deadletter", "--store", db, "--jobs", "120", "--concurrency", "10", "--batch", "50",
		"--list-calls", "1", "--log-level", "warn"}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append(args, "--no-retry"), &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), " seeded=handlers ") || !strings.Contains(out.String(), " retry_all=skipped ") {
		t.Fatalf("seeding run: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(context.Background(), append(args, "--reuse"), &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), " seeded=reused ") || !strings.Contains(out.String(), " retry_verify=ok ") ||
		strings.Contains(out.String(), "dead_seconds") {
		t.Fatalf("reusing run: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	// Retried, the store holds available jobs: refused, and not deleted.
	out.Reset()
	if code := run(context.Background(), append(args, "--reuse"), &out, &errOut); code != 1 ||
		!strings.Contains(out.String(), "status=error") || !strings.Contains(out.String(), "--reuse") {
		t.Fatalf("reuse of a retried store: exit %d\nstdout: %s", code, out.String())
	}
}

func TestDeadIndex(t *testing.T) {
	for _, k := range deadKinds {
		for _, i := range []int{0, 7, 123456} {
			if got := deadIndex([]byte(k.payload(i))); got != i {
				t.Errorf("%s: payload %s gives %d, want %d", k.name, k.payload(i), got, i)
			}
		}
	}
}

// The deadline seeding, as PostgreSQL and Redis runs use it, on SQLite:
// the same five error groups, every job dead and then retried once.
func TestBenchDeadLetterDeadlineSeed(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "dead.db")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"deadletter", "--store", "sqlite://" + db, "--seed", "deadline",
		"--jobs", "300", "--batch", "100", "--list-calls", "1", "--log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	line := strings.TrimSpace(out.String())
	checkKeys(t, "deadletter", line)
	for _, want := range []string{" seeded=deadline ", " dead_retained=300 ", " error_groups=5 ", " retry_batches=",
		" redis_slowlog_ours=na ", " retry_verify=ok ", "status=ok"} {
		if !strings.Contains(line, want) {
			t.Errorf("result line lacks %q: %s", want, line)
		}
	}
}
