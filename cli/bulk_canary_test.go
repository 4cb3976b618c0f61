package cli

import (
	"regexp"
	"strings"
	"testing"
)

// TestBulkCanary: sluice bulk --canary on a store with no worker redrives
// its sample, waits --canary-timeout for outcomes that never come, and
// halts, saying why and how to resume; operations resume sets it pending
// again and operations cancel ends it. A canary flag without --canary is
// refused rather than ignored.
func TestBulkCanary(t *testing.T) {
	path := deadStore(t, 6, 0)
	store := "sqlite://" + path
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "")

	if code, _, stderr := runCLI(t, "", "bulk", "retry", "--store", store, "-q", "state:archived", "--halt-failure-rate", "0.1", "--yes"); code == 0 ||
		!strings.Contains(stderr, "--halt-failure-rate needs --canary N") {
		t.Fatalf("a canary flag without --canary: exit %d\n%s", code, stderr)
	}
	code, out, stderr := runCLI(t, "", "bulk", "retry", "--store", store, "-q", "state:archived", "--canary", "2", "--canary-timeout", "1s", "--dry-run")
	if code != 0 || !strings.Contains(out, "--canary 2 --canary-timeout 1s --store") {
		t.Fatalf("dry run with --canary: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "bulk", "retry", "--store", store, "-q", "state:archived", "--canary", "2", "--canary-timeout", "1s", "--yes")
	m := regexp.MustCompile(`operation (\S+) halted: canary sample 2: 0 ok, 0 failed, 2 running \(90% needed\); resume it with: sluice operations resume (\S+) --store`).FindStringSubmatch(stderr)
	if code == 0 || m == nil || m[1] != m[2] || !strings.Contains(stderr, "a canary of 2 first (90% must succeed; halting above 20% failed again)") ||
		!regexp.MustCompile(`status\s+halted`).MatchString(out) {
		t.Fatalf("a canary whose sample never ran: exit %d\n%s%s", code, out, stderr)
	}
	id := m[1]
	if code, out, stderr = runCLI(t, "", "operations", "resume", id, "--store", store); code != 0 || !regexp.MustCompile(`status\s+pending`).MatchString(out) ||
		!regexp.MustCompile(`stage\s+sample 2: 0 ok, 0 failed, 2 running → continuing`).MatchString(out) {
		t.Fatalf("operations resume: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", "operations", "cancel", id, "--store", store); code != 0 || !regexp.MustCompile(`status\s+cancelled`).MatchString(out) {
		t.Fatalf("operations cancel: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, "", "operations", "resume", id, "--store", store); code == 0 || !strings.Contains(stderr, "it is cancelled") {
		t.Fatalf("resuming a cancelled operation: exit %d\n%s", code, stderr)
	}
}
