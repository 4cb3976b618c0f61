package tui

import (
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// TestErrorGroupsTriage resolves the first group of :errors with a note
// typed on the command line and ignores the second: STATUS says where
// each stands, the line under the list who closed the cursor's group,
// when and why; the ignored group leaves the list until i shows the
// ignored ones, and I on it brings it back open.
func TestErrorGroupsTriage(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	s.waitFor("invalid currency", "connection refused")
	s.keys("V")
	s.waitFor(":resolve ")
	s.typeText("fixed in deploy 42")
	s.keys("<enter>")
	s.waitFor("resolved by", "fixed in deploy 42")
	s.keys("j", "I")
	s.waitFor(":ignore ")
	s.typeText("test data")
	s.keys("<enter>")
	s.waitGone("invalid currency")
	s.keys("k")
	s.waitGone("error group billing / invoice.generate ignored")
	s.goldenAs("resolved", s.waitFor("resolved by", "fixed in deploy 42"))

	s.keys("i")
	s.waitFor("invalid currency")
	s.waitGone("ignored error groups shown")
	s.keys("j")
	s.goldenAs("ignored", s.waitFor("ignored by", "test data"))
	s.goldenANSI("ignored_ansi")

	gs, err := f.eng.ListErrorGroups(t.Context(), engine.ListErrorGroupsParams{Ignored: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.GroupStatus{}
	for _, g := range gs {
		got[g.Pattern] = g.Status
	}
	if got["dial tcp <addr>: connect: connection refused"] != engine.GroupResolved || got[`invalid currency "<str>"`] != engine.GroupIgnored {
		t.Fatalf("statuses in the store: %v", got)
	}

	// I on an ignored group brings it back, open.
	s.keys("I")
	s.waitFor("error group billing / invoice.generate open again")
	s.keys("i")
	s.waitFor("invalid currency")
}
