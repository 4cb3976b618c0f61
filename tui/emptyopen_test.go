package tui

import (
	"strings"
	"testing"
)

// TestEnterOnEmptyListOpensNoSheet: on the walk, enter on a state tab
// with no jobs opened the sheet of the job opened before, from another
// tab, with its action keys in the footer (r retry, u release) though
// no job of the list was under the cursor. Enter on an empty list now
// says so and leaves the sheet closed.
func TestEnterOnEmptyListOpensNoSheet(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("<enter>")
	s.waitFor("│ job ")
	s.keys("<esc>")
	s.waitGone("│ job ")
	// archived → quarantined → undecodable → cancelled: none cancelled.
	s.keys("<tab>", "<tab>", "<tab>")
	s.waitFor("no cancelled jobs")
	s.keys("<enter>")
	screen := s.waitFor("no job under the cursor")
	if strings.Contains(screen, "│ job ") {
		t.Fatalf("enter on an empty list opened a job's sheet:\n%s", screen)
	}
}
