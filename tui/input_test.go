package tui

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// TestFilterLineHelpsTheTypist: / reopens with the filter in force and a
// space after it, so a new term is a new term; a parse error is shown
// whole, the term that failed marked under the input.
func TestFilterLineHelpsTheTypist(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("/")
	s.typeText("kind:invoice.generate")
	s.waitFor("/queue:billing kind:invoice.generate")
	s.typeText(" colour:red")
	_, err := engine.ParseQuery("queue:billing kind:invoice.generate colour:red")
	msg := strings.TrimPrefix(err.Error(), engine.ErrInvalid.Error()+": ")
	screen := s.waitFor(`unknown field "colour"`)
	flat := strings.Join(strings.Fields(screen), " ")
	if !strings.Contains(flat, msg) {
		t.Fatalf("the error is not shown whole (%q):\n%s", msg, screen)
	}
	lines := strings.Split(screen, "\n")
	in := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "/queue:billing") })
	if in < 0 || in+1 >= len(lines) {
		t.Fatalf("no input line:\n%s", screen)
	}
	col := strings.Index(lines[in], "colour:red")
	if mark := lines[in+1]; len(mark) <= col || mark[col] != '^' {
		t.Fatalf("the failing term is not marked:\n%s\n%s", lines[in], lines[in+1])
	}
	s.golden(screen)
}
