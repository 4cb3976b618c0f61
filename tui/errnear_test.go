package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
)

// seedNear adds one outage split by ids the normaliser cannot tell from
// words: four jobs in "partner refused batch <n>" and two groups of one
// beside it, one of them with an escape sequence in its id.
func (f *fixture) seedNear(t *testing.T) {
	t.Helper()
	for i, msg := range []string{
		"partner refused batch 7001", "partner refused batch 7002", "partner refused batch 7003", "partner refused batch 7004",
		"partner refused batch kxqzmw", "partner refused batch \x1b[2Jzz",
	} {
		f.die(t, "near-000"+string(rune('1'+i)), "billing", "invoice.generate", msg)
	}
}

// TestErrorGroupsNear: one outage split by an id the normaliser missed is
// a big group and groups of one beside it, and a retry of the big group
// leaves those dead. :errors counts them in a NEAR column and names the
// first under the list, for the cursor's group (its text made safe); it
// says nothing of them below 100 columns but the line, and nothing at all
// to a viewer from whom the server hides error text.
func TestErrorGroupsNear(t *testing.T) {
	f := setup(t, false)
	f.seedNear(t)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	screen := s.waitFor("partner refused batch <n>", "NEAR", "2 near-identical groups beside this one, the first: ")
	if strings.Contains(screen, "\x1b[2J") {
		t.Fatalf("a pattern's escape reached the screen raw:\n%s", screen)
	}
	s.golden(screen)

	// Below 100 columns: no NEAR column, the line stays.
	o := testOptions()
	o.NoSubscribe = true
	m := New(f.eng, o)
	defer m.Close()
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	runCmd(m, m.switchScreen(scrErrors))
	narrow := ansi.Strip(m.Render())
	if strings.Contains(narrow, "NEAR") || !strings.Contains(narrow, "2 near-identical groups beside this one") {
		t.Fatalf("at 80 columns:\n%s", narrow)
	}

	// A viewer who may not read error text is told nothing read from it.
	srv := api.NewServer(f.eng, api.ServerOptions{HideErrorsFromViewers: true})
	v := New(srv.Local(api.Identity{Name: "vera", Role: engine.RoleViewer}, api.ClientOptions{}), o)
	defer v.Close()
	v.Update(tea.WindowSizeMsg{Width: goldenW, Height: goldenH})
	runCmd(v, v.loadMeta())
	runCmd(v, v.switchScreen(scrErrors))
	hidden := ansi.Strip(v.Render())
	if !strings.Contains(hidden, "<hidden>") {
		t.Fatalf("the viewer's groups are not hidden: the check proves nothing:\n%s", hidden)
	}
	if strings.Contains(hidden, "NEAR") || strings.Contains(hidden, "near-identical") {
		t.Fatalf("a viewer without error text is told of near groups:\n%s", hidden)
	}
}
