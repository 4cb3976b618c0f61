package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the console scenario re-execute this test binary as the
// benchmark binary: it measures in a fresh process.
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// wantKeys reads testdata/result_keys.txt: scenario -> keys in order.
func wantKeys(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "result_keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, keys, _ := strings.Cut(line, ":")
		want[name] = strings.Fields(keys)
	}
	return want
}

// checkKeys fails t unless line has exactly the keys, in the order, that
// the scenario printed before it moved out of the sluice binary.
func checkKeys(t *testing.T, scenario, line string) {
	t.Helper()
	want, ok := wantKeys(t)[scenario]
	if !ok {
		t.Fatalf("testdata/result_keys.txt has no %s line", scenario)
	}
	var got []string
	for _, kv := range strings.Fields(line) {
		k, _, _ := strings.Cut(kv, "=")
		got = append(got, k)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s result keys changed:\n got: %s\nwant: %s", scenario, strings.Join(got, " "), strings.Join(want, " "))
	}
}

// The console scenario on a small store: seeded here, measured in a child
// process of this binary, its keys as before.
func TestBenchConsoleKeys(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "console.db")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"console", "--store", "sqlite://" + db, "--jobs", "300",
		"--log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	line := strings.TrimSpace(out.String())
	if !strings.Contains(line, " rows_seen=300 ") || !strings.HasSuffix(line, " status=ok") {
		t.Errorf("result line: %s", line)
	}
	checkKeys(t, "console", line)
}

// The unique scenario on a small SQLite store: every duplicate answered
// with the job holding its key (else the scenario fails), its keys as
// listed.
func TestBenchUniqueKeys(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "unique.db")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"unique", "--store", "sqlite://" + db, "--jobs", "300", "--batch", "100",
		"--rounds", "2", "--log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	line := strings.TrimSpace(out.String())
	if !strings.HasSuffix(line, " status=ok") {
		t.Errorf("result line: %s", line)
	}
	checkKeys(t, "unique", line)
}

// The export scenario on a small SQLite store: seeded here, exported by
// the sluice binary (built here without -race) twice, every job counted
// (else the scenario fails), its keys as listed; a second run reuses the
// seed.
func TestBenchExportKeys(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "export.db")
	for _, extra := range [][]string{nil, {"--reuse", "--format", "csv", "--include-payload"}} {
		var out, errOut bytes.Buffer
		args := append([]string{"export", "--store", "sqlite://" + db, "--jobs", "300", "--batch", "100", "--runs", "2",
			"--sluice-bin", bin, "--log-level", "warn"}, extra...)
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
		}
		line := strings.TrimSpace(out.String())
		if !strings.HasSuffix(line, " status=ok") {
			t.Errorf("result line: %s", line)
		}
		checkKeys(t, "export", line)
	}
}
