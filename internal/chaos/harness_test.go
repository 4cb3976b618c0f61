package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestReportLineHasTheKeys(t *testing.T) {
	r := &Report{Store: "sqlite", Seed: 42, Violations: []string{"x"}}
	line := r.Line()
	for _, k := range []string{"store=sqlite", "seed=42", "jobs=", "kills=", "stalls=", "outages=", "panics=", "pills=", "pill_then_chance=", "releases=", "fp_releases=", "requarantined=", "probation_reruns=", "drain_seconds=", "violations=1"} {
		if !strings.Contains(" "+line, " "+k) {
			t.Errorf("report line %q lacks %s", line, k)
		}
	}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); !ok || k == "" || v == "" {
			t.Errorf("report line %q: %q is not key=value", line, f)
		}
	}
}

func TestDefaultFaultEveryGrowsWithTheJobs(t *testing.T) {
	prev := time.Duration(0)
	for _, n := range []int{1, 100, 1500, 5000, 50000, 1000000, 1 << 40} {
		d := DefaultFaultEvery(n)
		if d < prev || d < 500*time.Millisecond || d > 10*time.Second {
			t.Errorf("DefaultFaultEvery(%d) = %s (the one before %s)", n, d, prev)
		}
		prev = d
	}
	if d := DefaultFaultEvery(5000); d < 1400*time.Millisecond || d > 1600*time.Millisecond {
		t.Errorf("DefaultFaultEvery(5000) = %s, calibrated at 1.5s", d)
	}
}

func TestFaultList(t *testing.T) {
	if FaultList("") != nil || FaultList("all") != nil {
		t.Error("an empty list or all must mean every fault")
	}
	if got := FaultList(" kill, stall ,,"); strings.Join(got, "|") != "kill|stall" {
		t.Errorf("FaultList = %q", got)
	}
}

func TestPillThenChance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		order []string
		want  bool
	}{
		{[]string{"died", "died", "killed"}, true},
		{[]string{"died", "died", "stalled"}, true},
		{[]string{"died", "died", "died"}, false},        // a third pill: its lone run was not alone
		{[]string{"killed", "died", "died"}, false},      // a pill beside it at its second crash
		{[]string{"died", "killed", "died"}, false},      // the same
		{[]string{"killed", "stalled", "killed"}, false}, // p³, the calibrated chance
		{[]string{"died", "killed", "killed"}, false},
		{[]string{"died", "died", "lived"}, false},
		{[]string{"died", "died", "panic"}, false},
		{[]string{"died", "died"}, false},
		{nil, false},
	} {
		if got := pillThenChance(c.order); got != c.want {
			t.Errorf("pillThenChance(%q) = %v, want %v", c.order, got, c.want)
		}
	}
}
