package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pgServerInstalled reports whether initdb and pg_ctl are to be found, as
// internal/pgcluster looks for them.
func pgServerInstalled() bool {
	if _, err := exec.LookPath("initdb"); err == nil {
		return true
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	return len(ms) > 0
}

// The pressure scenario at a few seconds a phase on a private cluster:
// one line per phase with the scenario's keys, every phase completing
// jobs, claim plans sampled. No figure is checked: the machine's load
// decides them.
func TestBenchPressureShort(t *testing.T) {
	if !pgServerInstalled() {
		if os.Getenv("CI") != "" {
			t.Fatal("PostgreSQL server binaries (initdb, pg_ctl) are missing; CI must have them")
		}
		t.Skip("PostgreSQL server binaries (initdb, pg_ctl) are missing")
	}
	dir := t.TempDir()
	timeline := filepath.Join(dir, "timeline.csv")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"pressure", "--private", "--durable=false",
		"--rate", "200", "--workers", "10", "--scale", "0.01", "--reader-tx", "100s",
		"--explain-every", "500ms", "--sample-every", "500ms", "--timeline", timeline,
		"--log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	phases := []string{"clean", "idle_xid", "recovery", "readers", "high_load"}
	if len(lines) != len(phases) {
		t.Fatalf("%d result lines, want %d:\n%s", len(lines), len(phases), out.String())
	}
	explained := 0
	for i, line := range lines {
		checkKeys(t, "pressure", line)
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		if kv["phase"] != phases[i] || kv["status"] != "ok" {
			t.Errorf("line %d: phase %s status %s, want %s ok: %s", i, kv["phase"], kv["status"], phases[i], line)
		}
		if n, err := strconv.Atoi(kv["completed"]); err != nil || n <= 0 {
			t.Errorf("phase %s completed %q jobs", kv["phase"], kv["completed"])
		}
		if n, _ := strconv.Atoi(kv["claim_explains"]); n > 0 {
			explained++
		}
	}
	if explained == 0 {
		t.Errorf("no phase sampled the claim's plan\nstderr: %s", errOut.String())
	}
	b, err := os.ReadFile(timeline)
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(string(b), "\n"); rows < 2 {
		t.Errorf("timeline has %d rows", rows)
	}
}
