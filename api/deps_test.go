package api

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoPrometheusInAPI: a program that imports api (for the Client, or a
// Server without metrics) builds neither Prometheus nor protobuf; they come
// in with api/apimetrics only.
func TestNoPrometheusInAPI(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "prometheus") || strings.Contains(dep, "protobuf") {
			t.Errorf("api depends on %s", dep)
		}
	}
}
