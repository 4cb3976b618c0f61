package backendtest

import (
	"maps"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// OldErrorPattern is a dead job as a version before the id-aware
// normaliser left it: its last error and the pattern written then.
type OldErrorPattern struct{ ID, LastError, Pattern string }

// OldErrorPatterns are the dead jobs each store's upgrade test writes the
// old way: request ids of digits and of letters a–f, which grouped apart,
// and two columns that shared one group.
func OldErrorPatterns() []OldErrorPattern {
	return []OldErrorPattern{
		{"a", "partner api: 503 (request id req_36652661)", "partner api: <n> (request id req_<hex>)"},
		{"b", "partner api: 503 (request id req_aabdbebe)", "partner api: <n> (request id req_aabdbebe)"},
		{"c", "partner api: 503 (request id req_deccaaac)", "partner api: <n> (request id req_deccaaac)"},
		{"d", `column "decade" does not exist`, `column "<str>" does not exist`},
		{"e", `column "facade" does not exist`, `column "<str>" does not exist`},
	}
}

// CheckRegrouped checks the archived jobs' error groups after an upgrade
// over OldErrorPatterns: the request ids in one group of three, the two
// columns apart.
func CheckRegrouped(t testing.TB, groups []engine.ErrorGroup) {
	t.Helper()
	got := map[string]int64{}
	for _, g := range groups {
		got[g.Pattern] = g.Count
	}
	want := map[string]int64{
		"partner api: <n> (request id req_<id>)": 3,
		`column "decade" does not exist`:         1,
		`column "facade" does not exist`:         1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("groups after the upgrade: %v, want %v", got, want)
	}
}
