package cli

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeVersion(t *testing.T) {
	t.Parallel()
	vcs := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"}}}
	tests := []struct {
		name             string
		version, commit  string
		bi               *debug.BuildInfo
		wantPrefix, want string
	}{
		{"stamped by scripts/release", "v0.3.0", "4f1c2d9", vcs, "sluice v0.3.0 (commit 4f1c2d9, go1.26.0, ", "4f1c2d9"},
		{"go build in a checkout", "", "", vcs, "sluice dev (commit 0123456789abcdef0123456789abcdef01234567+modified, go1.26.0, ", "0123456789abcdef0123456789abcdef01234567"},
		{"go install of a tag", "", "", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.2.0"}}, "sluice v0.2.0 (commit unknown, go1.26.1, ", "unknown"},
		{"no build info", "", "", nil, "sluice dev (commit unknown, ", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := describeVersion(tt.version, tt.commit, tt.bi)
			if got := v.String(); !strings.HasPrefix(got, tt.wantPrefix) {
				t.Errorf("String() = %q, want prefix %q", got, tt.wantPrefix)
			}
			if v.Commit != tt.want {
				t.Errorf("Commit = %q, want %q", v.Commit, tt.want)
			}
		})
	}
}

// TestVersionCommand: sluice version and --version print the version and
// the commit; -o json gives them as fields.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, stderr := runCLI(t, "", args...)
		if code != 0 || !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, "(commit ") {
			t.Fatalf("%v: exit %d %q %s", args, code, out, stderr)
		}
	}
	code, out, stderr := runCLI(t, "", "version", "-o", "json")
	var v buildVersion
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version == "" || v.Commit == "" || v.Platform == "" {
		t.Fatalf("version -o json: exit %d %q %s", code, out, stderr)
	}
}
