package apimetrics

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAlertRulesNameExportedMetrics: every sluice_ metric the shipped
// alert rules (alerts/sluice.rules.yml) and their unit test query is one
// this package exports, with the labels the rules group and match by, so
// that renaming a metric or a label breaks this test rather than leaving
// an alert that never fires. promtool checks the rules' syntax and
// behaviour (scripts/test's alerts stage).
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	ch := make(chan *prometheus.Desc, 64)
	(&engineCollector{}).Describe(ch)
	NewEngineMetrics().Describe(ch)
	close(ch)
	labels := map[string][]string{}
	descRE := regexp.MustCompile(`fqName: "([a-z_]+)".*variableLabels: \{([a-z_,]*)\}`)
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read descriptor %s", d)
		}
		labels[m[1]] = regexp.MustCompile(`[a-z_]+`).FindAllString(m[2], -1)
	}
	for _, h := range []string{"_bucket", "_sum", "_count"} {
		labels["sluice_handler_duration_seconds"+h] = labels["sluice_handler_duration_seconds"]
	}

	for _, file := range []string{"alerts/sluice.rules.yml", "alerts/sluice.rules_test.yml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// A metric with its selector's labels: sluice_jobs{state="archived"}.
		useRE := regexp.MustCompile(`(sluice_[a-z_]+)(\{([^}]*)\})?`)
		uses := useRE.FindAllStringSubmatch(string(b), -1)
		if len(uses) == 0 {
			t.Fatalf("%s names no sluice_ metric", file)
		}
		for _, u := range uses {
			have, ok := labels[u[1]]
			if !ok {
				t.Errorf("%s queries %s, which apimetrics does not export", file, u[1])
				continue
			}
			for _, l := range regexp.MustCompile(`([a-z_]+)\s*=~?`).FindAllStringSubmatch(u[3], -1) {
				if l[1] != "instance" && !slices.Contains(have, l[1]) {
					t.Errorf("%s matches %s on label %s; it has %v", file, u[1], l[1], have)
				}
			}
		}
	}
	// The labels the rules group by.
	b, err := os.ReadFile("alerts/sluice.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?:by|on) \(([a-z_]+)\) \(?[a-z]*\(?(sluice_[a-z_]+)`).FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(labels[m[2]], m[1]) {
			t.Errorf("the rules group %s by %s; it has %v", m[2], m[1], labels[m[2]])
		}
	}
}
